"""teamctl's own git on a sandboxed member's tree, inside a boundary (docs/security.md, "Git is
part of the boundary"): the second layer under the hardened git of ``orchestrator/git_run.py``.

The command line is ``sandbox_plan``'s, the same mounts as a member's sandbox, narrowed to
what git reads: the system and git itself read-only, the member's worktree and the
repository's git dir read-only (``reads``), a scratch directory of the daemon's read-write
(``scratch``: the copy of the index a diff marks untracked files in, the empty blob that
takes), the operator's home an empty tmpfs with its credential paths hidden, a private
``/tmp``, no network (an empty namespace), no capability, its own pid namespace, gone with
its parent. A program git were still talked into running would see the member's own tree
and nothing else, and write nowhere that lasts.

Why a view of its own rather than the member's running sandbox (``Host.confine``): teamctl
runs git on a worktree while its member is stopped as well (``worktrees --prune`` removes
only those), and what git needs is narrower than what the member may do — nothing here is
writable, nothing reaches the network, no egress proxy or socket is involved.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.contracts import Confined, SandboxUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from runtimes.hosts.sandbox.probe import SandboxSupport

__all__ = ["GitViewSandbox", "git_view_argv"]

# the policy and the probe are imported when a sandboxed member's git first runs: the daemon
# builds this view at start for every team, most of which sandbox nothing


def git_view_argv(bwrap: str, argv: Sequence[str], *, reads: Sequence[Path], scratch: Path,
                  workdir: Path, home: Path, path_env: str) -> list[str]:
    """The bubblewrap command line that runs ``argv`` (``git ...``) in the view: pure. The
    scratch dir stands where a member's runtime home would (the one read-write bind)."""
    from runtimes.hosts.sandbox.plan import NetworkPlan, SandboxPolicy, bwrap_argv, toolchain

    executable = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=path_env)
    program = executable or argv[0]
    policy = SandboxPolicy(workdir=workdir, runtime_home=scratch, home=home, ro=tuple(reads),
                           workdir_writable=False,
                           toolchain=toolchain(program, os.path.dirname(program)))
    return bwrap_argv(bwrap, policy, [program, *argv[1:]],
                      network=NetworkPlan(mode="off", bwrap_args=("--unshare-net",)))


@dataclass
class GitViewSandbox:
    """``orchestrator.git_run.GitViews`` with bubblewrap: ``bwrap`` probed once (a real run),
    a start refused with ``SandboxUnavailable`` where it cannot make its namespaces."""

    bwrap: str = "bwrap"
    _support: SandboxSupport | None = field(default=None, init=False, repr=False)

    def confine(self, *, reads: Sequence[Path], scratch: Path,
                workdir: Path) -> Callable[[Sequence[str], Mapping[str, str]], Confined]:
        return functools.partial(self._confined, tuple(reads), scratch, workdir)

    def _confined(self, reads: tuple[Path, ...], scratch: Path, workdir: Path,
                  argv: Sequence[str], env: Mapping[str, str]) -> Confined:
        support = self._support
        if support is None:  # blocking, once: teamctl's git runs on worker threads
            from runtimes.hosts.sandbox.probe import probe

            support = self._support = probe(self.bwrap)
        if not support.ok:
            raise SandboxUnavailable("git", support.reason or "unknown")
        wrapped = git_view_argv(support.path or self.bwrap, argv, reads=reads, scratch=scratch,
                                workdir=workdir, home=Path(env.get("HOME") or Path.home()),
                                path_env=env.get("PATH", os.defpath))
        return Confined(tuple(wrapped), dict(env))
