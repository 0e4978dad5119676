"""The SSH launcher without a network: how ssh failures are classified, how a member's private
dir and paths are carried to the host, a host that answers garbage or hangs, and the
ControlMaster's directory. (The remote side's own processes: tests/integration/
test_ssh_remote_side.py; against a real sshd: tests/e2e/test_ssh_members.py.)"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from orchestrator.contracts import ImagePart
from runtimes.hosts.ssh import host as ssh
from runtimes.hosts.ssh.host import SshHost, SshTarget, classify
from tests.support.scripts import python_script

if TYPE_CHECKING:
    from collections.abc import Iterator

SIDE = Path(ssh.__file__).parents[1] / "remote_side.py"
TARGET = SshTarget("box", "10.0.0.5", "dev", 2222, "~/.ssh/id_box", ("Compression=yes",))


ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio


@pytest.mark.parametrize(("stderr", "code", "expected"), [
    ("ssh: connect to host 10.0.0.5 port 2222: Connection refused", 255, "host_unreachable"),
    ("ssh: Could not resolve hostname nowhere: Name or service not known", 255,
     "host_unreachable"),
    ("Connection timed out during banner exchange", 255, "host_connect_hung"),
    ("@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@", 255, "host_key_mismatch"),
    ("Host key verification failed.", 255, "host_key_mismatch"),
    ("dev@10.0.0.5: Permission denied (publickey).", 255, "host_auth_failed"),
    ("sh: 1: python3: not found", 127, "host_runtime_missing"),
])
def test_ssh_failures_are_typed_with_their_fix(stderr: str, code: int, expected: str) -> None:
    error = classify("lead", TARGET, code, stderr)
    assert error.code == expected
    assert error.retryable is (expected in ("host_unreachable", "host_connect_hung"))
    assert "on host box" in error.message and error.exit_code == 1


def _host(tmp_path: Path) -> SshHost:
    host = SshHost(TARGET, tmp_path / "cm", "h0", "web", "lead", tmp_path / "state")
    host._remote = ssh._Remote("/home/dev", "3.11.2")
    return host


def test_every_ssh_is_batch_bounded_and_multiplexed(tmp_path: Path) -> None:
    argv = _host(tmp_path).base_argv()
    for option in ("BatchMode=yes", f"ConnectTimeout={ssh.CONNECT_TIMEOUT}",
                   "ServerAliveInterval=5", "ControlMaster=auto", "Compression=yes"):
        assert option in argv
    assert argv[-2:] == ["--", "dev@10.0.0.5"] and argv[argv.index("-p") + 1] == "2222"
    fallback = ssh.control_dir(Path("/" + "x" * 200))
    assert len(fallback.as_posix()) + 34 < 104, \
        "a Unix socket path (and ssh's temporary name for it) stays under the kernel's limit"
    fallback.rmdir()


def test_paths_and_the_private_dir_are_carried_to_the_host(tmp_path: Path) -> None:
    host = _host(tmp_path)
    state = tmp_path / "state"
    home = state / "runtime"
    (home / "codex-home").mkdir(parents=True)
    (home / "codex-home" / "config.toml").write_text(f'sqlite_home = "{state}/db"\n')
    (home / "codex-home" / "auth.json").symlink_to(Path.home() / ".codex" / "auth.json")
    (home / "tmp").mkdir()
    (home / "tmp" / "junk").write_text("x")
    (state / "mcp").mkdir()
    (state / "big.bin").write_bytes(b"\0" * (ssh._MIRROR_MAX_BYTES + 1))
    root = "/home/dev/.teamctl-remote/h0/web/lead"
    assert host.rewrite(str(state / "config")) == f"{root}/config"
    assert host.rewrite("~") == "/home/dev" and host.rewrite("~/src") == "/home/dev/src"
    assert host.rewrite(f"--settings={state}/s.json") == f"--settings={root}/s.json"
    mirrored = host._mirror()
    assert mirrored["files"] == {
        "runtime/codex-home/config.toml": f'sqlite_home = "{root}/db"\n'}
    assert mirrored["links"] == {"runtime/codex-home/auth.json": "/home/dev/.codex/auth.json"}
    assert mirrored["dirs"] == ["runtime", "runtime/codex-home"], \
        "the runtime's tmp is the host's own, the socket dir here only, big files stay here"


def _fake_ssh(tmp_path: Path, body: str) -> str:
    path = tmp_path / "ssh"
    return str(python_script(path, f"import sys, time\n{body}\n"))


@pytest.mark.anyio
async def test_a_host_that_answers_garbage_or_hangs_is_a_typed_bounded_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.errors import HostUnavailable

    host = SshHost(TARGET, tmp_path, "h0", "web", "lead", tmp_path / "state",
                   ssh=_fake_ssh(tmp_path, 'print("Welcome! MOTD banner, not JSON")'))
    with pytest.raises(HostUnavailable) as caught:
        await host.connect()
    assert caught.value.code == "host_runtime_missing" and "unexpected" in caught.value.message
    host.ssh = _fake_ssh(tmp_path, "time.sleep(3600)")
    monkeypatch.setattr(ssh, "PROBE_TIMEOUT", 0.05)  # it hangs: any deadline is waited out
    with pytest.raises(HostUnavailable) as caught:
        await host._run_side("probe", deadline=0.05)
    assert caught.value.code == "host_connect_hung" and caught.value.retryable
    host.ssh = _fake_ssh(tmp_path, 'sys.stderr.write("Permission denied (publickey).\\n")\n'
                                   "sys.exit(255)")
    with pytest.raises(HostUnavailable) as caught:
        await host.put_file(ImagePart("image/png", 1, 1, hashlib.sha256(b"x").hexdigest(), b"x"))
    assert caught.value.code == "host_auth_failed"


# -- the ControlMaster's directory is the operator's own ---------------------------------------

OTHER_UID = 65534  # nobody


def _predictable(home: Path) -> Path:
    """Where the ControlMaster sockets used to be: a name anyone could compute and create."""
    key = hashlib.sha256(str(home).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"tc-{os.getuid()}-{key}"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # a short home: pytest's tmp_path under xdist (…/popen-gw1/test_…) is too long for a
    # ControlPath socket, and the home's own ssh/ is only chosen when its sockets fit
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    root = Path(tempfile.mkdtemp(prefix="tch-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)
    planted = _predictable(root)
    if planted.is_symlink():
        planted.unlink()
    shutil.rmtree(planted, ignore_errors=True)


def _owned_privately(path: Path) -> bool:
    status = os.lstat(path)
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() \
        and stat.S_IMODE(status.st_mode) == 0o700


def test_a_control_dir_precreated_by_another_uid_is_never_used(home: Path) -> None:
    """A directory another user created where teamctl looks (the old predictable /tmp name,
    the home's ``ssh``) is neither used nor taken over (chmod): the sockets go to a 0700
    directory of this uid."""
    for planted in (_predictable(home), home / "ssh"):
        planted.mkdir(mode=0o777)
        os.chown(planted, OTHER_UID, OTHER_UID)
        planted.chmod(0o777)
    chosen = ssh.control_dir(home)
    assert chosen not in (_predictable(home), home / "ssh") and _owned_privately(chosen)
    assert chosen.name.startswith("tc-") and chosen.name != _predictable(home).name, \
        "the fallback is a fresh random name"
    for planted in (_predictable(home), home / "ssh"):
        assert (os.lstat(planted).st_uid, stat.S_IMODE(os.lstat(planted).st_mode)) == (
            OTHER_UID, 0o777), "never chmodded"
    with pytest.raises(ssh.ControlDirUntrusted, match="belongs to uid 65534"):
        ssh.trusted_dir(home / "ssh")
    shutil.rmtree(chosen)


def test_a_control_dir_that_is_a_symlink_is_refused(home: Path, tmp_path: Path) -> None:
    """A symlink where the control dir goes is never followed (nor its target chmodded),
    even to a 0700 dir of ours."""
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    for planted in (_predictable(home), home / "ssh"):
        planted.symlink_to(target)
    chosen = ssh.control_dir(home)
    assert chosen not in (_predictable(home), home / "ssh") and _owned_privately(chosen)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755, "the target is left alone"
    with pytest.raises(ssh.ControlDirUntrusted, match="not a directory"):
        ssh.trusted_dir(home / "ssh")
    _predictable(home).unlink()
    shutil.rmtree(chosen)


def test_a_control_dir_with_a_loose_mode_is_refused(home: Path) -> None:
    """A control dir of ours that others may enter (0755) is refused, not silently fixed."""
    for planted in (_predictable(home), home / "ssh"):
        planted.mkdir(mode=0o755)
        planted.chmod(0o755)
    chosen = ssh.control_dir(home)
    assert chosen not in (_predictable(home), home / "ssh") and _owned_privately(chosen)
    with pytest.raises(ssh.ControlDirUntrusted, match="mode 755"):
        ssh.trusted_dir(home / "ssh")
    shutil.rmtree(chosen)


def test_the_control_dir_is_under_the_home_when_its_sockets_fit(home: Path) -> None:
    chosen = ssh.control_dir(home)
    assert chosen == home / "ssh" and _owned_privately(chosen)
    assert ssh.control_dir(home) == chosen, "one dir per home for the daemon's life"


@pytest.mark.anyio
async def test_a_master_socket_teamctl_did_not_make_is_refused_before_any_secret(
        tmp_path: Path) -> None:
    """In our dir, a ControlPath that is another uid's socket is a typed
    ``host_control_untrusted`` failure before ssh runs: the stdin header,
    with the member's secrets, never goes through a master teamctl did not start."""
    from orchestrator.errors import HostUnavailable

    ran = tmp_path / "ran"
    control = tmp_path / "cm"
    control.mkdir(mode=0o700)
    host = SshHost(TARGET, control, "h0", "web", "lead", tmp_path / "state",
                   ssh=_fake_ssh(tmp_path, f"open({str(ran)!r}, 'a').write('ran')"))
    with socket.socket(socket.AF_UNIX) as fake:
        fake.bind(host.control_path)
        os.chown(host.control_path, OTHER_UID, OTHER_UID)
        for attempt in (host.connect(), host.spawn(["claude"], cwd=tmp_path,
                                                   env={"ANTHROPIC_API_KEY": "sk-secret"})):
            with pytest.raises(HostUnavailable) as caught:
                await attempt
            assert caught.value.code == "host_control_untrusted"
            assert not caught.value.retryable and str(control) in caught.value.message
    assert not ran.exists(), "no ssh was run"


def test_a_killed_daemons_random_control_dir_is_found_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home too long for a ControlPath gets a random 0700 dir; a daemon killed with -9 leaves
    it (and its masters) behind, and the next daemon of the home reuses it, so it can still close
    them — a crashed daemon left an SSH session on the host before. A record that points at a
    dir that is not privately ours is ignored."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    home = tmp_path / ("h" * 90)
    home.mkdir(mode=0o700)
    monkeypatch.setattr(ssh, "_control_dirs", {})
    first = ssh.control_dir(home)
    assert first.parent != home and _owned_privately(first)
    monkeypatch.setattr(ssh, "_control_dirs", {})  # a new daemon process
    assert ssh.control_dir(home) == first
    first.chmod(0o755)  # no longer private: never reused
    monkeypatch.setattr(ssh, "_control_dirs", {})
    second = ssh.control_dir(home)
    assert second != first and _owned_privately(second)
    shutil.rmtree(first)
    shutil.rmtree(second)
