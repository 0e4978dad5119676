"""Member worktrees as the control API sees them: made (or reused) when a team launches,
listed and pruned, diffed against their base.

Every git command on a member's tree is the hardened git of ``orchestrator/git_run.py`` at the
place teamctl recorded; for a member that is (or was last launched) sandboxed it runs inside
a boundary too (``GitViews``: its worktree and the repository's git dir read-only, a scratch
dir of the daemon's, no network) — running or stopped, as ``--prune`` needs. Where no such
boundary can be had, git on that member's tree is refused (``git_sandbox_unavailable``),
never run without it."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
import structlog

from orchestrator.config import TeamConfig
from orchestrator.daemon import worktrees
from orchestrator.daemon.worktrees import PlacedWorktrees, Worktree
from orchestrator.errors import GitFailed, NotFound, TeamctlError
from orchestrator.git_run import Git
from orchestrator.protocol.worktrees import DiffDoc, KeptWorktree, WorktreeInfo, WorktreesDoc

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.config import MemberConfig
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.daemon.roster import Roster
    from orchestrator.git_run import Confine, GitViews

__all__ = ["WorktreeOps"]

log = structlog.get_logger("teamctl.teams")
_T = TypeVar("_T")


@dataclass(frozen=True)
class _Boundary:
    """How git runs on one member's tree: hardened, and inside ``views`` when
    ``sandboxed``."""

    views: GitViews | None
    sandboxed: bool

    def worktree(self, tree: Worktree, scratch: Path) -> Git:
        """Git in the worktree, able to write ``scratch`` only."""
        return Git(tree.place(), confine=self._confine(tree, scratch))

    def repository(self, tree: Worktree, scratch: Path) -> Git:
        """Git in the worktree's repository, as the operator's checkout sees it."""
        return Git(worktrees.checkout_of(tree), confine=self._confine(tree, scratch))

    def _confine(self, tree: Worktree, scratch: Path) -> Confine | None:
        if not self.sandboxed:
            return None
        if self.views is None:
            raise GitFailed("(any)", f"{tree.team}/{tree.member} is sandboxed and this daemon "
                            "cannot run git inside a sandbox", code="git_sandbox_unavailable")
        return self.views.confine(reads=(tree.place().common_dir,), scratch=scratch,
                                  workdir=tree.path)


class WorktreeOps:
    def __init__(self, roster: Roster, store: AsyncStore, *, root: Path,
                 placed: PlacedWorktrees | None = None, views: GitViews | None = None) -> None:
        """``placed``: filled at each launch for the composition root (each sandboxed
        member's view); ``views``: the boundary git runs in for a sandboxed member's tree
        (None: such trees' git is refused)."""
        self._roster = roster
        self._store = store
        self._worktree_root = root
        self._placed = placed or PlacedWorktrees()
        self._views = views
        self._prune_lock = anyio.Lock()

    async def prepare(self, config: TeamConfig) -> dict[str, Path]:
        """Each ``worktree = true`` member's worktree (made, or reused from the journal), and
        the member's workdir inside it."""
        known = {w.member: w for w in await self._store.worktrees(config.name)}
        self._placed.clear(config.name)
        workdirs: dict[str, Path] = {}
        for member in config.members:
            if config.resolved(member).worktree:
                tree = await self._made(config, member, known.get(member.name))
                self._placed.put(tree)
                workdirs[member.name] = await anyio.to_thread.run_sync(
                    worktrees.workdir_in, tree, config.resolved(member).workdir)
        return workdirs

    async def _made(self, config: TeamConfig, member: MemberConfig,
                    known: Worktree | None) -> Worktree:
        tree, refused = await anyio.to_thread.run_sync(
            worktrees.create, self._worktree_root, config.name, member.name,
            config.resolved(member).workdir, config.resolved(member).base, known)
        for refusal in refused:
            log.warning("worktree_include_refused", team=config.name, member=member.name,
                        path=refusal.path, reason=refusal.reason)
        if tree != known:
            await self._store.save_worktree(tree)
            if known is None:
                log.info("worktree_created", team=config.name, member=member.name,
                         path=str(tree.path), branch=tree.branch, base=tree.base)
        if config.resolved(member).sandbox != "none":
            await anyio.to_thread.run_sync(worktrees.ensure_ref_dirs, tree)
        return tree

    async def listed(self, team: str | None, *, prune: bool) -> WorktreesDoc:
        """Every member worktree the journal knows (of ``team``, or all); with ``prune``,
        remove those that lose nothing (clean, merged or pushed, member not running) — under a
        lock, saying why each other one is kept."""
        async with self._prune_lock:
            pruned: list[str] = []
            kept: list[KeptWorktree] = []
            if prune:
                for tree in await self._trees(team):
                    reason = await self._pruned(tree)
                    if reason is None:
                        await self._store.forget_worktree(tree.team, tree.member)
                        pruned.append(f"{tree.team}/{tree.member}")
                        log.info("worktree_pruned", team=tree.team, member=tree.member)
                    else:
                        kept.append(KeptWorktree(team=tree.team, member=tree.member,
                                                 reason=reason))
            infos = [WorktreeInfo.model_validate({
                **(await self._on_thread(_inspected, t)),
                "running": t.team in self._roster.teams}) for t in await self._trees(team)]
        return WorktreesDoc(worktrees=infos, pruned=pruned, kept=kept)

    async def _pruned(self, tree: Worktree) -> str | None:
        """None once ``tree`` is removed, else why it is kept: one worktree git cannot read
        is kept, the others are still pruned."""
        if tree.team in self._roster.teams:
            return "its member is running"
        try:
            return await self._on_thread(_pruned, tree)
        except TeamctlError as exc:
            return f"it could not be checked ({exc.message})"

    async def diff(self, team: str | None, member: str, *, stat: bool) -> DiffDoc:
        name = await self._roster.resolve_any(team)
        trees = await self._trees(name)
        tree = next((t for t in trees if t.member == member), None)
        if tree is None:
            raise NotFound("member worktree", member, [t.member for t in trees])
        text = await self._on_thread(functools.partial(_diffed, stat=stat), tree)
        return DiffDoc(team=name, member=member, base=tree.base, stat=stat, text=text)

    async def _trees(self, team: str | None) -> list[Worktree]:
        """The recorded worktrees, those recorded before schema 17 completed (and saved)."""
        trees = []
        for tree in await self._store.worktrees(team):
            complete = await anyio.to_thread.run_sync(worktrees.complete, tree)
            if complete != tree:
                await self._store.save_worktree(complete)
            trees.append(complete)
        return trees

    async def _on_thread(self, work: Callable[[Worktree, _Boundary], _T],
                         tree: Worktree) -> _T:
        """``work`` on ``tree`` in a worker thread, inside ``tree``'s boundary."""
        boundary = _Boundary(self._views, await self._sandboxed(tree))
        return await anyio.to_thread.run_sync(work, tree, boundary)

    async def _sandboxed(self, tree: Worktree) -> bool:
        """Whether ``tree``'s member is sandboxed in its running team, else in its team's last
        launch; a member (or team) the journal no longer knows counts as sandboxed."""
        config = self._roster.teams.get(tree.team)
        if config is None:
            record = next((r for r in await self._store.teams() if r.name == tree.team), None)
            if record is None:
                return True
            config = TeamConfig.model_validate(record.config)
        member = config.member(tree.member)
        return (config.team.sandbox if member is None
                else config.resolved(member).sandbox) != "none"


# each in a worker thread, with a scratch dir of its own (0700, removed after)

def _inspected(tree: Worktree, boundary: _Boundary) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="teamctl-git-") as scratch:
        return worktrees.inspect(boundary.worktree(tree, Path(scratch)), tree, Path(scratch))


def _diffed(tree: Worktree, boundary: _Boundary, *, stat: bool) -> str:
    with tempfile.TemporaryDirectory(prefix="teamctl-git-") as scratch:
        return worktrees.diff(boundary.worktree(tree, Path(scratch)), tree, Path(scratch),
                              stat=stat)


def _pruned(tree: Worktree, boundary: _Boundary) -> str | None:
    with tempfile.TemporaryDirectory(prefix="teamctl-git-") as scratch:
        return worktrees.prune_one(tree, boundary.worktree(tree, Path(scratch)),
                                   boundary.repository(tree, Path(scratch)))
