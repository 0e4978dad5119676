"""What a sandboxed member in a worktree sees of git (docs/security.md, "Git is part of the
boundary"): its worktree is its workdir — never the operator's checkout, which is concealed
like another member's workdir — and of the repository's git dir it may write only what a
commit in its own worktree writes:

- the object store (``objects/``): new blobs, trees and commits;
- its worktree's admin dir (``worktrees/<name>/``: its ``HEAD``, index, ``logs/HEAD``);
- the directory of its own branch's ref and the one of its reflog
  (``refs/heads/teamctl/<team>/<member>/``, ``logs/refs/heads/...``): git moves a ref by
  writing ``<ref>.lock`` beside it and renaming it over, so the directory must be writable —
  and holds that one ref alone (``_record.branch_name``): a teammate's ref sharing it could
  only be bound read-only over, and such a mount is dropped in this sandbox as soon as the
  teammate moves its ref in its own (the kernel detaches a mount whose file is renamed over
  in another mount namespace).

Everything else of it — the shared ``config``, ``hooks/``, ``info/``, ``packed-refs``, the
operator's ``HEAD`` and index, every other ref and every other worktree's admin dir — is bound
read-only. Pure: ``sandbox_plan.SandboxPolicy.git`` takes the binds in this order, after the
concealment, so each shows through it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.daemon.worktrees._create import workdir_in
from orchestrator.daemon.worktrees._record import branch_name

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.daemon.worktrees._record import Worktree

__all__ = ["SandboxView", "sandbox_view"]


@dataclass(frozen=True)
class SandboxView:
    """A worktree member's sandbox: its ``workdir`` there, what to ``conceal`` (the operator's
    checkout) and git's ``binds`` (path, writable) in order."""

    workdir: Path
    conceal: tuple[Path, ...]
    binds: tuple[tuple[Path, bool], ...]


def sandbox_view(tree: Worktree, workdir: Path, *, writable: bool) -> SandboxView:
    """``tree``'s view for a member whose team file names ``workdir`` (in the operator's
    checkout); ``writable`` False (``permissions = "read"``): all of it read-only."""
    place = tree.place()
    binds: list[tuple[Path, bool]] = [(tree.path, writable), (place.common_dir, False)]
    if writable and tree.branch == branch_name(tree.team, tree.member):
        own = tree.branch.split("/")[:-1]
        binds += [(place.common_dir / "objects", True), (place.git_dir, True),
                  (place.common_dir.joinpath("refs", "heads", *own), True),
                  (place.common_dir.joinpath("logs", "refs", "heads", *own), True)]
    return SandboxView(workdir_in(tree, workdir), (tree.repo,), tuple(binds))
