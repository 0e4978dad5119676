"""A member's view (orchestrator/daemon/members/_view.py): read from the bubblewrap command line
its sandbox is made from (``sandbox_plan.bwrap_argv``, what ``Host.confine`` returns), or built
from an unsandboxed member's workdir, worktree, runtime home and ``attach_paths``; a member
elsewhere has none. Each rule of docs/security.md's "A member's attachments are read with its
own rights" that is about *where*."""

from __future__ import annotations

import os
import socket
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.contracts import Confined
from orchestrator.daemon.members._view import local_view, sandbox_view, view_of
from orchestrator.errors import SandboxUnavailable
from orchestrator.paths import Home
from runtimes.hosts.sandbox.plan import SandboxPolicy, bwrap_argv
from tests.support.fakes import team_config

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.members._view import MemberView

pytestmark = pytest.mark.anyio


def _policy(tmp_path: Path) -> SandboxPolicy:
    """Member ``a``: its workdir inside the operator's home (so ~/.ssh is under a bind), its
    runtime home in teamctl's state dir, ``b``'s workdir beside it, a ``sandbox_ro`` dir."""
    home = tmp_path / "operator"
    for path in (home / ".ssh", home / "proj" / ".ssh", tmp_path / "state" / "members" / "a",
                 tmp_path / "b", tmp_path / "shared"):
        path.mkdir(parents=True)
    return SandboxPolicy(workdir=home, runtime_home=tmp_path / "state" / "members" / "a",
                         home=home, ro=(tmp_path / "shared",),
                         conceal=(tmp_path / "state", tmp_path / "b"))


def _sandboxed(tmp_path: Path) -> tuple[Any, SandboxPolicy]:
    policy = _policy(tmp_path)
    argv = bwrap_argv("bwrap", policy, ["true"])
    # as the member's own runtime gets it: its socket bound at another path
    argv[1:1] = ["--bind", str(tmp_path / "state" / "mcp"), "/run/teamctl/mcp"]
    return sandbox_view("a", argv), policy


def test_a_sandboxed_member_sees_its_binds_and_nothing_its_sandbox_covers(
        tmp_path: Path) -> None:
    view, policy = _sandboxed(tmp_path)
    home = str(policy.home)
    shown = [f"{home}/notes.md", f"{policy.runtime_home}/tmp/shot.png",
             f"{tmp_path}/shared/spec.pdf", "/etc/hostname", "/usr/share/doc/x"]
    covered = [f"{home}/.ssh/id_ed25519",  # a credential dir, even inside its workdir
               "/etc/shadow", "/tmp/mine.txt", "/proc/self/environ", "/dev/null",
               f"{tmp_path}/state/logs/daemon.out", f"{tmp_path}/state/members/b/mcp.json",
               f"{tmp_path}/b/secret.txt", "/run/teamctl/mcp/teamctl.sock", "/root/x",
               "/var/log/syslog"]
    assert [p for p in shown if not view.shows(p)] == []
    assert [p for p in covered if view.shows(p)] == []
    assert view.sandboxed and view.closed is None and view.workdir == home


def test_a_sandboxed_members_private_home_and_tmp_are_not_this_machines(
        tmp_path: Path) -> None:
    """The operator's home as the member sees it is a tmpfs of its own: a file it writes at
    ~/x is not the operator's ~/x, so neither is read for it."""
    policy = _policy(tmp_path)
    policy = SandboxPolicy(workdir=tmp_path / "b", runtime_home=policy.runtime_home,
                           home=policy.home)
    view = sandbox_view("a", bwrap_argv("bwrap", policy, ["true"]))
    assert not view.shows(f"{policy.home}/notes.md")
    assert not view.shows("/tmp/x") and view.shows(f"{tmp_path}/b/x")


def test_an_unknown_bubblewrap_option_closes_the_view(tmp_path: Path) -> None:
    """Fail closed: an option the parser does not know (its arity unknown, what it mounts
    unknown), or an argv without ``--``, reads none of the member's paths."""
    argv = bwrap_argv("bwrap", _policy(tmp_path), ["true"])
    unknown = sandbox_view("a", [argv[0], "--overlay-src", "/x", *argv[1:]])
    assert unknown.closed is not None and unknown.closed[0] == "sandbox_unknown"
    assert not unknown.shows(str(tmp_path / "operator" / "notes.md"))
    cut = sandbox_view("a", argv[:argv.index("--")])
    assert cut.closed is not None and cut.closed[0] == "sandbox_unknown"
    short = sandbox_view("a", ["bwrap", "--bind", "/x"])
    assert short.closed is not None


def test_a_bind_through_a_symlink_shows_the_real_directory(tmp_path: Path) -> None:
    """Layers are real paths: a workdir named through a symlink shows where its files are."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    view = sandbox_view("a", ["bwrap", "--bind", str(tmp_path / "link"),
                              str(tmp_path / "link"), "--", "true"])
    assert view.shows(f"{tmp_path}/real/f") and not view.shows(f"{tmp_path}/link/f")


def test_an_unsandboxed_member_sees_its_workdir_worktree_home_and_grants_only(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    worktree = state / "worktrees" / "web" / "a"
    view = local_view("a", workdirs=(tmp_path / "repo", worktree),
                      runtime_home=state / "members" / "web" / "a",
                      grants=[str(tmp_path / "granted")], state_dir=state)
    shown = [f"{tmp_path}/repo/a.png", f"{worktree}/b.png", f"{state}/members/web/a/tmp/c.png",
             f"{tmp_path}/granted/d.png"]
    hidden = [f"{state}/members/web/b/mcp.json", f"{state}/logs/daemon.out",
              f"{state}/state.db", f"{tmp_path}/elsewhere.png", "/etc/shadow", "/proc/1/environ"]
    assert [p for p in shown if not view.shows(p)] == []
    assert [p for p in hidden if view.shows(p)] == []
    assert not view.sandboxed and view.workdir == str(worktree)


def test_teamctls_state_stays_hidden_when_a_workdir_holds_it(tmp_path: Path) -> None:
    """A workdir of the operator's home holds teamctl's state dir: the state stays out of the
    view (other members' tokens, the daemon's log), the member's own runtime home in it."""
    state = tmp_path / ".local" / "state" / "teamctl"
    view = local_view("a", workdirs=(tmp_path, tmp_path), runtime_home=state / "members" / "a",
                      grants=[], state_dir=state)
    assert view.shows(f"{tmp_path}/notes.md") and view.shows(f"{state}/members/a/x")
    assert not view.shows(f"{state}/logs/daemon.out")
    assert not view.shows(f"{state}/members/b/mcp.json")


class _Host:
    """A member's host as the view asks it: ``confine`` answers the command as it is (``()``),
    a bubblewrap argv, None (a host elsewhere), or raises."""

    def __init__(self, answer: tuple[str, ...] | Exception | None, name: str | None = None
                 ) -> None:
        self.answer = answer
        self.name = name

    async def confine(self, argv: Sequence[str], *, env: Mapping[str, str],
                      workdir: Path | None = None) -> Confined | None:
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer is None:
            return None
        return Confined(self.answer or tuple(argv), dict(env))


async def _view(config: TeamConfig, host: _Host, workdir: str, home: Home) -> MemberView:
    state = SimpleNamespace(team="web", name="a", config=config.member("a"), host=host,
                            workdir=workdir)
    return await view_of(state, config, home)  # type: ignore[arg-type]


async def test_the_view_is_asked_of_the_members_host(tmp_path: Path) -> None:
    """The host's ``confine`` says what the member is: the command as it is (an unsandboxed
    member of this machine, ``attach_paths`` granted), a bubblewrap argv (sandboxed), None (a
    host elsewhere: closed), SandboxUnavailable (closed, the reason kept)."""
    config = team_config(tmp_path, {"name": "a", "attach_paths": [str(tmp_path / "g")]})
    home = Home(tmp_path / "home")
    local = await _view(config, _Host(()), str(tmp_path), home)
    assert local.shows(f"{tmp_path}/g/x") and not local.shows(f"{home.root}/state.db")
    assert local.shows(f"{home.root}/members/web/a/runtime/x")  # its runtime home...
    assert not local.shows(f"{home.root}/members/web/a/mcp.json")  # ...not the daemon's dir
    argv = ("bwrap", "--bind", str(tmp_path / "w"), str(tmp_path / "w"), "--chdir",
            str(tmp_path / "w"), "--", "true")
    boxed = await _view(config, _Host(argv), str(tmp_path / "w"), home)
    assert boxed.sandboxed and boxed.shows(f"{tmp_path}/w/x")
    assert not boxed.shows(f"{tmp_path}/g/x"), "attach_paths is no grant inside a sandbox"
    far = await _view(config, _Host(None, "box"), "~", home)
    assert far.closed is not None and far.closed[0] == "elsewhere" and "box" in far.closed[1]
    down = await _view(config, _Host(SandboxUnavailable("a", "no bwrap")), "/w", home)
    assert down.closed is not None and down.closed[0] == "sandbox_unavailable"


def test_layers_are_real_paths_so_a_symlinked_state_dir_stays_hidden(tmp_path: Path) -> None:
    """teamctl's home named through a symlink: covered as written and as resolved."""
    (tmp_path / "real-state").mkdir()
    os.symlink(tmp_path / "real-state", tmp_path / "state")
    view = local_view("a", workdirs=(tmp_path, tmp_path), runtime_home=tmp_path / "rh",
                      grants=[], state_dir=tmp_path / "state")
    assert not view.shows(f"{tmp_path}/real-state/state.db")
    assert not view.shows(f"{tmp_path}/state/state.db")


@pytest.mark.parametrize("network", ["on", "off"])
def test_every_option_a_sandbox_host_writes_is_one_the_view_reads(tmp_path: Path,
                                                                  network: str) -> None:
    """The command lines ``SandboxHost`` really builds — a one-shot's (``confine``) and the
    runtime's own (its socket bound in), with the network on or cut off behind the egress
    proxy's socket — parse to an open view: a new bubblewrap option in the policy fails here
    rather than closing every sandboxed member's attachments."""
    from runtimes.hosts.local.host import LocalHost
    from runtimes.hosts.sandbox.host import SandboxHost
    from runtimes.hosts.sandbox.network import network_plan
    from runtimes.hosts.sandbox.plan import NETWORK_ON

    plan = NETWORK_ON if network == "on" else network_plan(
        "off", tmp_path / "egress.sock", ["api.anthropic.com"])
    host = SandboxHost(LocalHost(), "a", _policy(tmp_path), tmp_path / "mcp", network=plan)
    (tmp_path / "mcp").mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as listening:  # the member's own, as the daemon's
        listening.bind(str(tmp_path / "mcp" / "teamctl.sock"))
        for mcp in (False, True):
            view = sandbox_view("a", host.argv(["true"], {"PATH": os.defpath}, mcp=mcp))
            assert view.closed is None and view.shows(str(tmp_path / "operator" / "x"))
            assert not view.shows("/run/teamctl/egress.sock")
            assert not view.shows("/run/teamctl/mcp/teamctl.sock")
