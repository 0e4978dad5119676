"""Member worktrees as the control API sees them: made (or reused) when a team launches,
listed and pruned, diffed against their base."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon import worktrees
from orchestrator.errors import NotFound, TeamctlError
from orchestrator.wire import DiffDoc, KeptWorktree, WorktreeInfo, WorktreesDoc

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.roster import Roster
    from orchestrator.daemon.store import AsyncStore

__all__ = ["WorktreeOps"]

log = structlog.get_logger("teamctl.teams")


class WorktreeOps:
    def __init__(self, roster: Roster, store: AsyncStore, *, root: Path) -> None:
        self._roster = roster
        self._store = store
        self._worktree_root = root
        self._prune_lock = anyio.Lock()

    async def prepare(self, config: TeamConfig) -> dict[str, Path]:
        """Each ``worktree = true`` member's worktree (made, or reused from the journal), and
        the member's workdir inside it."""
        known = {w.member: w for w in await self._store.worktrees(config.name)}
        workdirs: dict[str, Path] = {}
        for member in config.members:
            if not config.member_worktree(member):
                continue
            workdir = config.member_workdir(member)
            tree = await anyio.to_thread.run_sync(
                worktrees.create, self._worktree_root, config.name, member.name, workdir,
                config.member_base(member), known.get(member.name))
            if tree is not known.get(member.name):
                await self._store.save_worktree(tree)
                log.info("worktree_created", team=config.name, member=member.name,
                         path=str(tree.path), branch=tree.branch, base=tree.base)
            workdirs[member.name] = await anyio.to_thread.run_sync(worktrees.workdir_in, tree,
                                                                   workdir)
        return workdirs

    async def listed(self, team: str | None, *, prune: bool) -> WorktreesDoc:
        """Every member worktree the journal knows (of ``team``, or all); with ``prune``,
        remove those that lose nothing (clean, merged or pushed, member not running) — under a
        lock, saying why each other one is kept."""
        async with self._prune_lock:
            trees = await self._store.worktrees(team)
            pruned: list[str] = []
            kept: list[KeptWorktree] = []
            if prune:
                for tree in trees:
                    running = tree.team in self._roster.teams
                    try:  # one worktree git cannot read is kept; the others are still pruned
                        reason = await anyio.to_thread.run_sync(
                            functools.partial(worktrees.prune_one, tree, running=running))
                    except TeamctlError as exc:
                        reason = f"it could not be checked ({exc.message})"
                    if reason is None:
                        await self._store.forget_worktree(tree.team, tree.member)
                        pruned.append(f"{tree.team}/{tree.member}")
                        log.info("worktree_pruned", team=tree.team, member=tree.member)
                    else:
                        kept.append(KeptWorktree(team=tree.team, member=tree.member,
                                                 reason=reason))
                trees = await self._store.worktrees(team)
            infos = [WorktreeInfo.model_validate({
                **(await anyio.to_thread.run_sync(worktrees.inspect, t)),
                "running": t.team in self._roster.teams}) for t in trees]
        return WorktreesDoc(worktrees=infos, pruned=pruned, kept=kept)

    async def diff(self, team: str | None, member: str, *, stat: bool) -> DiffDoc:
        name = await self._roster.resolve_any(team)
        tree = next((t for t in await self._store.worktrees(name)
                     if t.member == member), None)
        if tree is None:
            raise NotFound("member worktree", member, [
                t.member for t in await self._store.worktrees(name)])
        text = await anyio.to_thread.run_sync(functools.partial(worktrees.diff, tree, stat=stat))
        return DiffDoc(team=name, member=member, base=tree.base, stat=stat, text=text)
