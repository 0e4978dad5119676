"""The parts of a sandboxed member on an SSH host that need no sshd (the whole is
tests/e2e/test_sandbox_ssh.py): which team files are taken, the plan moved to a host,
the remote side's sandboxed start and its image copy."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.config import TeamFileError, load_team_file
from runtimes.hosts.sandbox.network import (
    INSIDE_SOCKET,
    RELAY_DIR,
    network_plan,
    on_host,
    proxy_socket,
    relay_command,
)
from runtimes.hosts.sandbox.plan import SandboxPolicy, host_argv, policy_json

SIDE = Path(__file__).resolve().parents[2] / "runtimes" / "hosts" / "remote_side.py"
PLAN = (SIDE.parent / "sandbox" / "plan.py").read_text(encoding="utf-8")
_HOSTS = ('[hosts.box]\naddress = "box.example"\n'
          '[hosts.pods]\nkind = "kubernetes"\nimage = "ghcr.io/x/agent:1"\n')


def _team(tmp_path: Path, member: str) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "t"\n{_HOSTS}[[members]]\nname = "a"\n{member}\n')
    return path


def test_a_sandboxed_member_on_an_ssh_host_is_taken(tmp_path: Path) -> None:
    """``sandbox = "process"`` with an SSH ``host`` (refused before: "bubblewrap runs here
    only"), network on or off."""
    for network in ("on", "off"):
        config = load_team_file(_team(tmp_path, f'runtime = "claude"\nhost = "box"\n'
                                                f'sandbox = "process"\nnetwork = "{network}"'))
        assert config.resolved(config.members[0]).sandbox == "process"


@pytest.mark.parametrize(("member", "expected"), [
    ('runtime = "claude"\nhost = "pods"\nlogin = "isolated"\nsandbox = "process"',
     "Kubernetes pod cannot be"),
    ('runtime = "opencode"\nhost = "box"\nsandbox = "process"\nnetwork = "off"',
     'OpenCode on another host needs network = "on"'),
])
def test_what_a_remote_sandbox_cannot_be_yet_is_refused_with_why(
        tmp_path: Path, member: str, expected: str) -> None:
    with pytest.raises(TeamFileError, match=expected):
        load_team_file(_team(tmp_path, member))


def test_the_network_plan_on_a_host_binds_the_forwarded_socket_and_runs_its_python(
        tmp_path: Path) -> None:
    """The egress proxy's socket here is found in the plan, and replaced by its forwarded
    path there at the same inside path; the relay runs under the host's ``python3``, from its
    source (nothing of teamctl is installed there), with the same arguments but the hand-over
    (a descriptor does not cross the forwarding: it relays there) — where here it is imported
    from teamctl's own directory and hands its listeners to the daemon."""
    plan = network_plan("off", tmp_path / "egress.sock", ["127.0.0.1:8080"], python="/venv/py")
    assert proxy_socket(plan) == str(tmp_path / "egress.sock")
    moved = on_host(plan, "/home/u/.teamctl-remote/x/egress.sock", "python3")
    assert moved.bwrap_args == ("--unshare-net", "--bind",
                                "/home/u/.teamctl-remote/x/egress.sock", INSIDE_SOCKET)
    here, there = relay_command("/venv/py"), relay_command("python3", source=True)
    assert plan.relay[:len(here)] == here and str(RELAY_DIR) in here[-1]
    assert moved.relay[:len(there)] == there and there[-1] == (RELAY_DIR / "relay.py").read_text()
    assert plan.relay[len(here):] == ("--socket", INSIDE_SOCKET, "--hand-over", "--map", "8080",
                                      "--")
    assert moved.relay[len(there):] == ("--socket", INSIDE_SOCKET, "--map", "8080", "--")
    assert "--map" in moved.relay and proxy_socket(network_plan("off", tmp_path, [])) \
        == str(tmp_path)


def _policy(home: Path) -> SandboxPolicy:
    return SandboxPolicy(workdir=Path("~/proj"), runtime_home=Path("/op/members/t/a"),
                         home=Path("~"), conceal=(Path("~/.teamctl-remote"),),
                         hide=(Path("/op/secret"),), login=((Path("/op/.claude"), True),))


def test_the_policy_is_sent_in_the_hosts_paths_and_built_there(tmp_path: Path) -> None:
    """``policy_json`` names every path as the host has it; ``host_argv`` there binds the
    workdir and runtime home read-write, hides the home's credentials and conceals teamctl's
    state found there; a relative path is the home's."""
    home = tmp_path / "remote"
    for sub in ("proj", ".ssh", ".teamctl-remote/x/t/a", "rh"):
        (home / sub).mkdir(parents=True)

    def place(path: str) -> str:
        return path.replace("~", str(home)).replace("/op/members/t/a", str(home / "rh"))

    sent = policy_json(_policy(home), place)
    assert (sent["workdir"], sent["runtime_home"], sent["home"]) == (
        str(home / "proj"), str(home / "rh"), str(home))
    spec = {"bwrap": "true", "policy": {**sent, "workdir": "proj"}, "mode": "on",
            "bwrap_args": ["--bind", "/x", "/run/teamctl/mcp"], "relay": []}
    argv = host_argv(spec, ["/bin/echo", "hi"], "/usr/bin:/bin", sys.executable)
    pairs = list(zip(argv, argv[1:], argv[2:], strict=False))
    assert ("--bind", str(home / "proj"), str(home / "proj")) in pairs
    assert ("--bind", str(home / "rh"), str(home / "rh")) in pairs
    assert ("--tmpfs", str(home / ".ssh"), "--remount-ro") in pairs
    assert ("--tmpfs", str(home / ".teamctl-remote"), "--bind") in pairs or \
        ("--tmpfs", str(home / ".teamctl-remote"), "--remount-ro") in pairs
    assert argv[-6:] == ["/run/teamctl/mcp", "--chdir", str(home / "proj"), "--",
                         "/bin/echo", "hi"]
    with pytest.raises(LookupError, match="bubblewrap"):
        host_argv({**spec, "bwrap": "no-such-bwrap"}, ["/bin/echo"], "/nowhere", "python3")


def _side(home: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, str(SIDE), *args], input=stdin, capture_output=True,
                          timeout=30, env={"HOME": str(home), "PATH": os.environ["PATH"]},
                          check=False)


def test_a_sandboxed_members_image_is_copied_into_its_own_dir_on_the_host(
        tmp_path: Path) -> None:
    """``put SHA SIZE DIR``: the verified cache copy, and a 0600 copy in DIR (the member's
    runtime home, where its sandbox can read it) whose path is printed — from the cache
    alone when the cache copy is intact (stdin not read)."""
    data = b"\x89PNG fake image bytes"
    sha = hashlib.sha256(data).hexdigest()
    into = tmp_path / "members" / "a" / "attachments"
    kept = _side(tmp_path, "put", sha, str(len(data)), str(into), stdin=data)
    assert kept.returncode == 0, kept.stderr
    assert Path(kept.stdout.decode().strip()) == into / sha
    assert (into / sha).read_bytes() == data and (into / sha).stat().st_mode & 0o777 == 0o600
    (into / sha).unlink()
    again = _side(tmp_path, "put", sha, str(len(data)), str(into))
    assert again.returncode == 0 and (into / sha).read_bytes() == data


def test_a_sandboxed_start_where_bubblewrap_is_missing_is_refused_never_run_bare(
        tmp_path: Path) -> None:
    """The remote side's ``run`` with a ``sandbox`` spec and no bubblewrap on the host's PATH:
    exit 125 with why, and the command never ran (its marker file is not made)."""
    marker = tmp_path / "ran"
    policy = {"workdir": str(tmp_path), "runtime_home": str(tmp_path / "rh"),
              "home": str(tmp_path), "rw": [], "ro": [], "hide": [], "conceal": [],
              "login": [], "tmp_bytes": 1 << 20, "workdir_writable": True}
    header = {"root": str(tmp_path / "rh"), "argv": ["/usr/bin/touch", str(marker)],
              "cwd": str(tmp_path), "env": {"PATH": "/nowhere"}, "grace": 1,
              "sandbox": {"bwrap": "bwrap", "plan": PLAN, "policy": policy}}
    done = _side(tmp_path, "run", stdin=json.dumps(header).encode() + b"\n")
    assert done.returncode == 125, done.stderr
    assert b"teamctl-remote: sandbox unavailable: bubblewrap (bwrap) is not installed" \
        in done.stderr
    assert not marker.exists()


def test_doctor_says_a_remote_sandboxed_members_view_in_the_hosts_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor showed a sandboxed member on an SSH host this machine's paths (its home, its
    workdir here) — not what it sees. Now it names the host and the host's paths; none of
    this machine's home or TEAMCTL_HOME appears."""
    from orchestrator.client.doctor import describe_members
    from orchestrator.config import TeamConfig

    monkeypatch.setenv("TEAMCTL_HOME", str(tmp_path / "state"))
    config = TeamConfig.model_validate({
        "team": {"name": "t", "workdir": str(tmp_path)},
        "hosts": {"gpu1": {"address": "10.0.0.1"}},
        "members": [{"name": "far", "runtime": "claude", "host": "gpu1", "worktree": False,
                     "workdir": "/srv/proj", "sandbox": "process",
                     "sandbox_hide": ["~/.secret"]}]})
    [row] = describe_members(config, timeout=1.0)
    view = row["sandbox"]
    assert view["host"] == "gpu1"
    assert view["rw"][0] == "/srv/proj (on gpu1)"
    assert "~/.ssh" in view["hidden"] and "~/.secret" in view["hidden"]
    text = repr(view)
    assert str(tmp_path) not in text, "no path of this machine"
