"""The sandbox's command line (runtimes/hosts/sandbox/plan.py), its probe and the team file's
sandbox
keys, without starting a sandbox (tests/integration/test_sandbox.py runs the real one)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from orchestrator.config import load_team_file
from orchestrator.errors import TeamFileError
from runtimes.hosts.sandbox.host import describe, mcp_toolchain, member_policy, probe
from runtimes.hosts.sandbox.network import RELAY_DIR
from runtimes.hosts.sandbox.plan import NetworkPlan, SandboxPolicy, bwrap_argv, toolchain

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def _policy(tmp_path: Path, **extra: object) -> SandboxPolicy:
    home, state = tmp_path / "operator", tmp_path / "state"
    for path in (home / ".ssh", state / "members" / "t" / "a", tmp_path / "work",
                 tmp_path / "other"):
        path.mkdir(parents=True, exist_ok=True)
    fields: dict[str, object] = {
        "workdir": tmp_path / "work", "runtime_home": state / "members" / "t" / "a",
        "home": home, "conceal": (state, tmp_path / "other")} | extra
    return SandboxPolicy(**fields)  # type: ignore[arg-type]


def _at(argv: Sequence[str], *words: str) -> int:
    """Where the run ``words`` starts in ``argv`` (ValueError if it is not there)."""
    for index in range(len(argv) - len(words) + 1):
        if tuple(argv[index:index + len(words)]) == words:
            return index
    raise ValueError(words)


def test_the_mounts_come_in_the_order_that_is_the_policy(tmp_path: Path) -> None:
    """The operator's home is a tmpfs before the member's own binds; teamctl's state is
    covered before its runtime home (inside it) is bound again; ~/.ssh is hidden after the
    member's own (a workdir of ~ still hides it) and read-only; every namespace and the
    capability drop are asked; the command comes last, after ``--``, as given (no shell)."""
    policy = _policy(tmp_path)
    argv = bwrap_argv("bwrap", policy, ["claude", "-p", "a b; rm -rf ~"])
    home, state = str(policy.home), str(tmp_path / "state")
    for flag in ("--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc",
                 "--unshare-uts", "--new-session"):
        assert flag in argv
    assert _at(argv, "--cap-drop", "ALL") < _at(argv, "--")
    assert "--unshare-net" not in argv  # network "on": the host's
    assert _at(argv, "--tmpfs", home) < _at(argv, "--bind", str(policy.workdir))
    assert _at(argv, "--tmpfs", state) < _at(argv, "--bind", str(policy.runtime_home))
    assert _at(argv, "--bind", str(policy.workdir)) < _at(argv, "--tmpfs", f"{home}/.ssh")
    assert _at(argv, "--tmpfs", f"{home}/.ssh") < _at(argv, "--remount-ro", f"{home}/.ssh")
    assert _at(argv, "--tmpfs", str(tmp_path / "other")) > 0
    assert argv[_at(argv, "--"):] == ["--", "claude", "-p", "a b; rm -rf ~"]
    assert _at(argv, "--size", str(policy.tmp_bytes), "--tmpfs", "/tmp") > 0


def test_a_workdir_of_the_operators_home_still_hides_its_credentials(tmp_path: Path) -> None:
    """``workdir = ~``: the home is bound read-write, then ~/.ssh is covered (never a path
    that holds the member's own workdir or runtime home)."""
    policy = _policy(tmp_path)
    policy = SandboxPolicy(workdir=policy.home, runtime_home=policy.runtime_home,
                           home=policy.home, conceal=policy.conceal)
    argv = bwrap_argv("bwrap", policy, ["x"])
    assert _at(argv, "--bind", str(policy.home)) < _at(argv, "--tmpfs", f"{policy.home}/.ssh")
    assert str(policy.home) not in [str(p) for p in policy.hidden()]


def test_sandbox_hide_adds_a_file_and_a_shared_workdir_is_not_concealed(tmp_path: Path) -> None:
    """A hidden file becomes /dev/null's (unreadable); another member sharing this member's
    workdir (worktree = false) does not hide it from this one."""
    secret = tmp_path / "work" / ".env"
    policy = _policy(tmp_path, hide=(secret,))
    secret.write_text("TOKEN=x")
    policy = SandboxPolicy(**{**policy.__dict__, "conceal": (*policy.conceal, policy.workdir)})
    argv = bwrap_argv("bwrap", policy, ["x"])
    assert _at(argv, "--ro-bind", "/dev/null", str(secret)) > 0
    with pytest.raises(ValueError):
        _at(argv, "--tmpfs", str(policy.workdir))


def test_the_network_plan_is_the_seam_for_the_egress_proxy(tmp_path: Path) -> None:
    """A NetworkPlan's arguments come after the mounts, its relay in front of the command."""
    plan = NetworkPlan(mode="off", bwrap_args=("--unshare-net",), relay=("relay", "--"))
    argv = bwrap_argv("bwrap", _policy(tmp_path), ["claude"], network=plan)
    assert _at(argv, "--unshare-net") < _at(argv, "--")
    assert argv[-3:] == ["relay", "--", "claude"]


def test_the_toolchain_is_the_npm_package_and_the_interpreters_prefix(tmp_path: Path) -> None:
    """A CLI installed by npm: the directory that holds its node_modules is bound (once, not
    each path inside it); a ``#!/usr/bin/env node`` script's node in a prefix is bound by its
    prefix; directories inside a bound one are not bound again."""
    package = tmp_path / "cli" / "node_modules" / "@x" / "cli"
    package.mkdir(parents=True)
    script = package / "cli.js"
    script.write_text("#!/usr/bin/env node\n")
    script.chmod(0o755)
    bin_dir = tmp_path / "cli" / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "cli").symlink_to("../@x/cli/cli.js")
    node_prefix = tmp_path / "nvm" / "v22"
    (node_prefix / "bin").mkdir(parents=True)
    (node_prefix / "lib").mkdir()
    node = node_prefix / "bin" / "node"
    node.write_text("")
    node.chmod(0o755)
    found = toolchain(str(bin_dir / "cli"), f"{node_prefix / 'bin'}:/usr/bin")
    assert found == (tmp_path / "cli", node_prefix)


def test_probe_says_why_a_bwrap_is_missing_or_cannot_make_its_namespaces(
        tmp_path: Path) -> None:
    """Not found: the reason names it. One that exits 1 (as bwrap does where user namespaces
    are off): not ok, its error in the reason — never taken for a working sandbox."""
    missing = probe(str(tmp_path / "nope" / "bwrap"))
    assert not missing.ok and "not installed" in (missing.reason or "")
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\n"
                      "exit 1\n")
    broken.chmod(0o755)
    found = probe(str(broken))
    assert not found.ok and "No permissions to creating new namespace" in (found.reason or "")


def _team(tmp_path: Path, member: str, team: str = "") -> Path:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "t"\n{team}\n[[members]]\nname = "a"\nruntime = "claude"\n'
                    f"{member}\n")
    return path


def test_sandbox_keys_member_wins_paths_expanded(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``~`` is the operator's home; the member's sandbox wins over the team's; hide adds."""
    monkeypatch.setenv("HOME", str(tmp_path / "op"))
    config = load_team_file(_team(
        tmp_path, 'sandbox = "process"\nsandbox_ro = ["~/sdk/../sdk2"]\nsandbox_hide = ["/x"]',
        'sandbox = "none"\nsandbox_rw = ["/cache"]\nsandbox_hide = ["~/.kube"]'))
    member = config.members[0]
    assert config.resolved(member).sandbox == "process"
    assert config.resolved(member).sandbox_paths == {
        "rw": ["/cache"], "ro": [str(tmp_path / "op" / "sdk2")],
        "hide": [str(tmp_path / "op" / ".kube"), "/x"]}
    assert config.resolved(member).network == "on"


@pytest.mark.parametrize(("member", "expected"), [
    ('sandbox = "process"\nsandbox_rw = ["relative/dir"]', "is not absolute"),
    ('sandbox = "process"\nsandbox_ro = ["~other/x"]', "is not absolute"),
    ('sandbox = "process"\nsandbox_rw = ["/' + "x" * 5000 + '"]', "at most 4096"),
    ('sandbox = "process"\nsandbox_hide = [' + ", ".join(['"/a"'] * 65) + "]", "at most 64"),
    ('sandbox = "container"', "'none' or 'process'"),
    ('network = "off"', "needs sandbox"),
    ('sandbox = "process"\nnetwork = "allowlist"\nallow_hosts = ["https://x.com"]',
     r"not host\[:port\]"),
    ('sandbox = "process"\nnetwork = "allowlist"\nallow_hosts = ["x.com:99999"]', "port"),
])
def test_bad_sandbox_keys_are_refused(tmp_path: Path, member: str, expected: str) -> None:
    with pytest.raises(TeamFileError, match=expected):
        load_team_file(_team(tmp_path, member))


def test_allow_hosts_take_names_wildcards_and_addresses(tmp_path: Path) -> None:
    config = load_team_file(_team(
        tmp_path, 'sandbox = "process"\nnetwork = "allowlist"\nallow_hosts = ["API.x.com", '
        '"*.github.com:443", "10.0.0.1:8080", "[::1]:3128"]'))
    assert config.resolved(config.members[0]).allow_hosts == [
        "api.x.com", "*.github.com:443", "10.0.0.1:8080", "[::1]:3128"]


def test_a_node_cli_sandboxed_still_has_the_python_that_runs_teamctl_mcp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The python that runs ``teamctl mcp`` (and the network relay) is bound inside even when
    the CLI's own interpreter is another (node): a venv's python is a symlink into its base
    interpreter's prefix (pyenv's, under the operator's home), which must be there too — a
    sandboxed real Claude failed to start ("teamctl's MCP server did not start") without it."""
    base, venv = tmp_path / "base", tmp_path / "venv"
    (base / "bin").mkdir(parents=True)
    (base / "lib").mkdir()
    (base / "bin" / "python3.11").write_text("")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", str(base))
    tools = toolchain("/usr/bin/node", "/usr/bin", extra=mcp_toolchain())
    assert venv in tools
    assert base in tools


def test_the_network_relays_directory_is_bound_inside_whatever_the_pythonpath(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay is imported from its own directory (its compiled file): that directory is in
    the toolchain even where teamctl is installed and no PYTHONPATH names the checkout."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert RELAY_DIR in mcp_toolchain()
    assert (RELAY_DIR / "relay.py").is_file()


def _runtime_team(tmp_path: Path, runtime: str, keys: str) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "t"\n[[members]]\nname = "a"\nruntime = "{runtime}"\n'
                    f"{keys}\n")
    return path


def test_a_sandboxed_codex_asking_is_refused_naming_why(tmp_path: Path) -> None:
    """Codex's ``ask`` is its own sandbox's refusals turned into questions, and its own
    sandbox cannot start inside teamctl's: the team file is refused, saying what to use; a
    sandboxed Claude member may ask (its questions are its own permission rules)."""
    keys = 'sandbox = "process"\npermissions = "ask"\ntransport = "app-server"'
    with pytest.raises(TeamFileError, match=r"cannot run sandboxed: codex asks through its "
                                            r"own sandbox.*use \"edit\" or \"full\""):
        load_team_file(_runtime_team(tmp_path, "codex", keys))
    load_team_file(_runtime_team(tmp_path, "codex", 'sandbox = "process"\npermissions = "edit"'))
    load_team_file(_runtime_team(tmp_path, "claude", 'sandbox = "process"\npermissions = "ask"'))


@pytest.mark.parametrize("network", ["off", "allowlist"])
def test_opencode_with_its_network_cut_is_accepted(tmp_path: Path, network: str) -> None:
    """teamctl reaches ``opencode serve`` in an empty network namespace through the relay's
    Unix socket (tests/integration/test_sandbox_opencode_net.py): ``network = "off" |
    "allowlist"`` is no longer refused for it (it was, while only loopback TCP reached it)."""
    team = load_team_file(_runtime_team(tmp_path, "opencode",
                                        f'sandbox = "process"\nnetwork = "{network}"'))
    assert team.resolved(team.members[0]).network == network


def test_a_read_member_sees_its_workdir_read_only(tmp_path: Path) -> None:
    """``permissions = "read"`` in a sandbox: the kernel binds the workdir read-only (what
    keeps a Codex member read-only, its own sandbox being off inside ours); its runtime home
    stays writable; ``teamctl doctor`` lists the workdir under read-only."""
    work, state = tmp_path / "work", tmp_path / "state"
    private = state / "members" / "t" / "a"
    policy = member_policy(workdir=work, private=private,
                           state_root=state, others=(), paths={"rw": [], "ro": [], "hide": []},
                           runtime="codex", login="isolated", permissions="read")
    argv = bwrap_argv("bwrap", policy, ["codex"])
    assert _at(argv, "--ro-bind", str(work), str(work)) > 0
    assert _at(argv, "--ro-bind", str(private), str(private)) < \
        _at(argv, "--bind", str(private / "runtime"), str(private / "runtime"))
    view = describe(policy, "/usr/bin/true", "/usr/bin")
    assert str(work) in view["ro"] and str(work) not in view["rw"]
    edit = bwrap_argv("bwrap", member_policy(
        workdir=work, private=private, state_root=state, others=(),
        paths={"rw": [], "ro": [], "hide": []}, runtime="codex", login="isolated",
        permissions="edit"), ["codex"])
    assert _at(edit, "--bind", str(work), str(work)) > 0


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_command_run_for_a_member_is_confined_like_the_member_without_its_socket(
        tmp_path: Path, anyio_backend: str) -> None:
    """``confine`` (what teamctl runs on a member's behalf: a check, git, ``--version``) gives
    the member's own bubblewrap line and network plan — its relay in front of the command,
    its proxy's variables — but never teamctl's MCP socket; this machine gives the command
    as it is; a host elsewhere runs nothing here."""
    from runtimes.hosts.local.host import LocalHost
    from runtimes.hosts.sandbox import host as sandbox_host
    from runtimes.hosts.sandbox.host import SandboxHost
    from runtimes.hosts.sandbox.probe import SandboxSupport

    sandbox_host._PROBED["bwrap-test"] = SandboxSupport(ok=True, path="/usr/bin/bwrap")
    network = NetworkPlan(mode="off", bwrap_args=("--unshare-net",),
                          env={"HTTPS_PROXY": "http://127.0.0.1:9"}, relay=("relay", "--"))
    host = SandboxHost(LocalHost(), "a", _policy(tmp_path), tmp_path / "mcp",
                       bwrap="bwrap-test", network=network)
    confined = await host.confine(["make", "test"], env={"PATH": "/usr/bin"})
    assert confined is not None
    argv = list(confined.argv)
    assert argv[0] == "/usr/bin/bwrap"
    assert argv[_at(argv, "--"):] == ["--", "relay", "--", "make", "test"]
    assert "--unshare-net" in argv
    assert not any("teamctl.sock" in word for word in argv)
    assert confined.env == {"PATH": "/usr/bin", "HTTPS_PROXY": "http://127.0.0.1:9"}
    local = await LocalHost().confine(["make"], env={"PATH": "/bin"})
    assert local is not None and local.argv == ("make",)


def test_parents_of_teamctls_state_inside_a_writable_workdir_are_pinned_before_it_is_covered(
        tmp_path: Path) -> None:
    """A workdir of ``~`` holds teamctl's state (``~/.local/state/teamctl``): inside, the
    member could rename ``~/.local`` aside and make its own state dir there — the daemon, by
    path, would then use it. Each directory between the workdir and the state is bound onto
    itself (a mount point: EBUSY to a rename) before the state is covered; the private dir
    is bound read-only and the runtime home read-write after the cover."""
    home = tmp_path / "operator"
    state = home / ".local" / "state" / "teamctl"
    private = state / "members" / "t" / "a"
    (private / "runtime").mkdir(parents=True)
    policy = SandboxPolicy(workdir=home, runtime_home=private / "runtime", private=private,
                           home=home, conceal=(state,))
    argv = bwrap_argv("bwrap", policy, ["x"])
    cover = _at(argv, "--tmpfs", str(state))
    for pinned in (home / ".local", home / ".local" / "state"):
        assert _at(argv, "--bind", str(home), str(home)) < \
            _at(argv, "--bind", str(pinned), str(pinned)) < cover
    rest = argv[cover:]  # bound before the cover too, then again after it (a home in it)
    assert _at(rest, "--ro-bind", str(private), str(private)) < \
        _at(rest, "--bind", str(private / "runtime"), str(private / "runtime"))
    assert policy.pins(state) == [home / ".local", home / ".local" / "state"]
    beside = SandboxPolicy(workdir=tmp_path / "w", runtime_home=private / "runtime",
                           private=private, home=home, conceal=(state,))
    assert beside.pins(state) == [], "no writable bind holds it: nothing to pin"
