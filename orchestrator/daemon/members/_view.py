"""A member's view of the files: what it can read with its own rights, not the daemon's.

The daemon runs with the operator's rights; a member's sandbox does not. A path a member hands
a tool (``send_message``'s attachments) is therefore read only where the member could read it
itself (issue 44, attack 3: a member sent ``~/.ssh/id_ed25519``, ``/etc/shadow``, another
member's ``mcp.json`` and ``daemon.out`` to a teammate, read by the daemon as the operator).

A view is a list of layers in the order they are made: a path (a directory or a file) and
whether the member sees this machine's object there. The last layer that holds a path decides —
as bubblewrap's mounts do, a later one covering an earlier one — and a path no layer holds is
not seen. Layers are this machine's real paths (symlinks resolved), because the reader checks
where an opened file really is.

- **A sandboxed member**: read from the very command line its sandbox is made from
  (``Host.confine``, the member's own bubblewrap argv), so the view cannot drift from the
  policy. A bind of a path onto itself shows that path; a tmpfs (its private ``/tmp`` and home,
  a hidden credential dir, teamctl's concealed state), ``/proc``, ``/dev``, a symlink, a file
  bound over another (``/dev/null`` over ``/etc/shadow``) or a bind to another path (its own
  socket at ``/run/teamctl``) show nothing of this machine's there. An option this parser
  does not know closes the view (fail closed).
- **An unsandboxed member**: its workdir, its worktree, its runtime home and the operator's
  ``attach_paths``; then teamctl's state dir covered; then its runtime home and worktree shown
  again (they live there) — not the rest of its private dir, which is the daemon's.
- **A member elsewhere** (an SSH host, a pod): its paths name files of that machine, which the
  daemon cannot read with the member's rights: a closed view.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.contracts import runtime_home as contract_runtime_home
from orchestrator.errors import SandboxUnavailable

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.members.state import MemberState
    from orchestrator.paths import Home

__all__ = ["Layer", "MemberView", "local_view", "runtime_home", "sandbox_view", "view_of"]

PROBE = ("true",)  # the one-shot command whose confinement shows the member's boundary

# bubblewrap's options by what they do to the view (bubblewrap 0.8's --help)
_FLAGS = frozenset({
    "--die-with-parent", "--unshare-user", "--unshare-user-try", "--unshare-pid",
    "--unshare-ipc", "--unshare-uts", "--unshare-cgroup", "--unshare-cgroup-try",
    "--unshare-net", "--unshare-all", "--share-net", "--new-session", "--as-pid-1",
    "--clearenv", "--disable-userns", "--assert-userns-disabled"})
_SETTINGS = {  # options that change no mount's contents, and how many values each takes
    "--cap-drop": 1, "--cap-add": 1, "--perms": 1, "--size": 1, "--remount-ro": 1,
    "--chdir": 1, "--unsetenv": 1, "--setenv": 2, "--uid": 1, "--gid": 1, "--hostname": 1,
    "--argv0": 1, "--chmod": 2, "--lock-file": 1, "--sync-fd": 1, "--info-fd": 1,
    "--json-status-fd": 1, "--block-fd": 1, "--userns-block-fd": 1}
_BINDS = frozenset({"--bind", "--ro-bind", "--bind-try", "--ro-bind-try", "--dev-bind",
                    "--dev-bind-try"})
_COVERS = {  # a mount of something other than this machine's path there (its last value)
    "--tmpfs": 1, "--proc": 1, "--dev": 1, "--mqueue": 1, "--dir": 1, "--symlink": 2,
    "--file": 2, "--bind-data": 2, "--ro-bind-data": 2}


@dataclass(frozen=True)
class Layer:
    """One step of a view: ``path`` (absolute, real) and below it, this machine's object is
    seen by the member (``shown``) or not."""

    path: str
    shown: bool


@dataclass(frozen=True)
class MemberView:
    """What ``member`` can read with its own rights (the module's doc). ``workdir``: where a
    refusal tells it to put a file; ``closed``: (rule, why) when no path of it is read here."""

    member: str
    workdir: str
    layers: tuple[Layer, ...] = ()
    sandboxed: bool = False
    closed: tuple[str, str] | None = None

    def shows(self, path: str) -> bool:
        """Whether the member sees this machine's object at ``path`` (absolute, normalized)."""
        seen = False
        for layer in self.layers:
            if _within(path, layer.path):
                seen = layer.shown
        return seen

    def fix(self) -> str:
        """What the member can do about a refusal, in its own words."""
        if self.sandboxed:
            return (f"Put the file in your workdir ({self.workdir}) — your /tmp and home are "
                    "your sandbox's own, which teamctl cannot see — or ask the operator to "
                    "bind its directory into your sandbox (sandbox_ro in the team file).")
        return (f"Put the file in your workdir ({self.workdir}), or ask the operator to grant "
                "its directory (attach_paths in the team file).")


def runtime_home(home: Home, team: str, member: str) -> Path:
    """The member's runtime home: the directory its runtime itself writes, inside its private
    dir (the daemon's: its MCP configuration and token, its pid record — not in the view)."""
    return contract_runtime_home(home.member_dir(team, member))


async def view_of(state: MemberState, config: TeamConfig, home: Home) -> MemberView:
    """``state``'s view, asked of its host: how it runs a one-shot command (``confine``) is
    its boundary — the bubblewrap argv of its sandbox, the command as it is (no sandbox), or
    None (a host elsewhere)."""
    try:
        confined = await state.host.confine(PROBE, env={})
    except SandboxUnavailable as exc:
        return MemberView(state.name, state.workdir, sandboxed=True, closed=(
            "sandbox_unavailable", f"your sandbox cannot be made here now ({exc.reason})"))
    if confined is None:
        return MemberView(state.name, state.workdir, closed=(
            "elsewhere", f"you run on host {state.host.name}, so this path names a file "
                         "there, and teamctl reads a teammate's attachments on its own machine "
                         "only; put what matters in the message's text"))
    if tuple(confined.argv) == PROBE:
        spec = state.config
        return local_view(state.name, workdirs=(config.resolved(spec).workdir, state.workdir),
                          runtime_home=runtime_home(home, state.team, state.name),
                          grants=config.resolved(spec).attach_paths, state_dir=home.root)
    return sandbox_view(state.name, confined.argv)


def local_view(member: str, *, workdirs: Sequence[str | Path], runtime_home: Path,
               grants: Iterable[str], state_dir: Path) -> MemberView:
    """An unsandboxed member's view: ``workdirs`` (its workdir, its worktree), ``grants``
    (``attach_paths``) and its ``runtime_home``; teamctl's ``state_dir`` covered; then those
    of its own that lie in the state dir (its runtime home, a worktree) shown again."""
    own = _real([*map(str, workdirs), str(runtime_home)])
    covered = _both(str(state_dir))
    layers = [Layer(p, True) for p in [*own, *_real(grants)]]
    layers += [Layer(p, False) for p in covered]
    layers += [Layer(p, True) for p in own if any(_within(p, c) for c in covered)]
    return MemberView(member, str(workdirs[-1]), tuple(layers))


def sandbox_view(member: str, argv: Sequence[str]) -> MemberView:
    """A sandboxed member's view from its bubblewrap ``argv`` (``bwrap [options] -- command``):
    closed if an option is not one this parser knows or the argv has no ``--``."""
    layers: list[Layer] = []
    workdir, index = "/", 1
    while index < len(argv) and argv[index] != "--":
        option = argv[index]
        count = _arity(option)
        values = argv[index + 1:index + 1 + (count or 0)]
        if count is None or len(values) < count:
            return _unknown(member, option)
        if option in _BINDS:
            layers += _bind(values[0], values[1])
        elif option in _COVERS:
            layers += [Layer(p, False) for p in _both(values[-1])]
        elif option == "--chdir":
            workdir = values[0]
        index += 1 + count
    if index >= len(argv):
        return _unknown(member, "(no -- before the command)")
    return MemberView(member, workdir, tuple(layers), sandboxed=True)


def _arity(option: str) -> int | None:
    if option in _FLAGS:
        return 0
    if option in _BINDS:
        return 2
    return _SETTINGS.get(option, _COVERS.get(option))


def _bind(source: str, dest: str) -> list[Layer]:
    """A bind of a path onto itself shows that path (the real one: what bubblewrap binds);
    onto another path, it shows nothing of this machine's at ``dest``."""
    if os.path.normpath(source) == os.path.normpath(dest):
        return [Layer(os.path.realpath(source), True)]
    return [Layer(p, False) for p in _both(dest)]


def _unknown(member: str, option: str) -> MemberView:
    return MemberView(member, "/", sandboxed=True, closed=(
        "sandbox_unknown", f"teamctl cannot tell what your sandbox shows ({option[:64]} is "
                           "not a bubblewrap option it reads), so it reads none of your paths"))


def _real(paths: Iterable[str]) -> list[str]:
    return [os.path.realpath(p) for p in paths]


def _both(path: str) -> list[str]:
    """A covered path as written and as resolved here (whichever the member's object has)."""
    lexical, real = os.path.normpath(path), os.path.realpath(path)
    return [lexical] if lexical == real else [lexical, real]


def _within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (both absolute and normalized)."""
    return path == root or path.startswith(root if root.endswith("/") else root + "/")
