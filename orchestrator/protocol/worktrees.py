"""Members' git worktrees (``worktrees``, ``diff``): each tree's branch, base and changes, the
kept ones, a member's diff — and their params.
"""

from pydantic import Field

from orchestrator.protocol.common import Doc, MemberParams, TeamParams

__all__ = [
    "DiffDoc", "DiffParams", "KeptWorktree", "WorktreeInfo", "WorktreesDoc", "WorktreesParams",
]


class WorktreeInfo(Doc):
    team: str
    member: str
    path: str
    branch: str
    base: str
    missing: bool
    ahead: int = Field(description="commits on the branch that are not in the base")
    dirty: int = Field(description="tracked files changed and not committed")
    untracked: int
    diffstat: str = Field(description="git diff --shortstat against the base")
    running: bool


class KeptWorktree(Doc):
    team: str
    member: str
    reason: str


class WorktreesDoc(Doc):
    """``teamctl worktrees --json [--prune]``."""

    worktrees: list[WorktreeInfo]
    pruned: list[str] = Field(default=[], description="team/member of each removed worktree")
    kept: list[KeptWorktree] = []


class DiffDoc(Doc):
    """``teamctl diff MEMBER --json``: the member's changes against its base."""

    team: str
    member: str
    base: str
    stat: bool
    text: str


class WorktreesParams(TeamParams):
    prune: bool = False


class DiffParams(MemberParams):
    stat: bool = False
