"""A git worktree per member (``worktree = true``): its own checkout on its own branch, so two
teammates editing the same file never clobber each other or the operator's checkout — and,
for a sandboxed member, the boundary git keeps (docs/security.md, "Git is part of the
boundary").

- ``_record``: the worktree as the journal records it, and where git works from that record;
- ``_create``: making it (or finding it again on a relaunch), hardened git in the operator's
  checkout; ``_include``: the ``.worktreeinclude`` files copied in, never through a symlink;
- ``_changes``: what it holds beyond its base (``worktrees``, ``diff``); ``_prune``: removing
  it only when that loses nothing;
- ``_sandbox``: what a sandboxed member sees of git; ``_files``: reading a file a member
  could have replaced.

Nothing here ever deletes work. Every git call runs from an argv list with a deadline, through
``orchestrator.git_run.Git`` (inside the member's boundary when the caller confines it); call
these functions from a worker thread.
"""

from __future__ import annotations

from orchestrator.daemon.worktrees._changes import Changes, changes, diff, inspect
from orchestrator.daemon.worktrees._create import (
    checkout_of,
    complete,
    create,
    ensure_ref_dirs,
    workdir_in,
)
from orchestrator.daemon.worktrees._include import Refusal
from orchestrator.daemon.worktrees._prune import prune_one
from orchestrator.daemon.worktrees._record import (
    MIGRATIONS,
    Worktree,
    WorktreeJournal,
    branch_name,
)
from orchestrator.daemon.worktrees._sandbox import SandboxView, sandbox_view

__all__ = ["MIGRATIONS", "Changes", "PlacedWorktrees", "Refusal", "SandboxView", "Worktree",
           "WorktreeJournal", "branch_name", "changes", "checkout_of", "complete", "create", "diff",
           "ensure_ref_dirs", "inspect", "prune_one", "sandbox_view", "workdir_in"]


class PlacedWorktrees:
    """The worktree each member of a launching team was placed in (``WorktreeOps.prepare``),
    by (team, member): what the composition root builds a sandboxed member's view from when
    its host is made, right after."""

    def __init__(self) -> None:
        self._trees: dict[tuple[str, str], Worktree] = {}

    def put(self, tree: Worktree) -> None:
        self._trees[(tree.team, tree.member)] = tree

    def get(self, team: str, member: str) -> Worktree | None:
        return self._trees.get((team, member))

    def clear(self, team: str) -> None:
        """Before a team is placed again (a member may have left its worktree)."""
        for key in [k for k in self._trees if k[0] == team]:
            del self._trees[key]
