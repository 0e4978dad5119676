"""The merge queue (docs/land.md): a done task's commits, one at a time per team, merged onto the
team's integration branch in a scratch worktree of teamctl's, checked there inside the owner's
boundary, and landed — the branch moved by compare-and-swap — only when the check passed.

``task_done`` hears every task that became done (the board's ``on_gated``): when the team has
``[team] integrate`` and the owner works in a worktree, what the owner left uncommitted is
committed with the task's title (its own git, inside its boundary) and its worktree's commit
enters the queue. Each team's queue has one worker, started when something is queued (or its
team launches) and gone when nothing is left. What fails goes back to the one who can fix it:
a conflict or a failing check puts the task back in progress under its owner, who is told
what failed; after ``integrate_retries`` attempts — or at once when the owner cannot fix it
(the branch checked out somewhere, a check that cannot run as the owner) — the task fails to
the operator (``needs you``). ``start`` recovers what a killed daemon left running
(``_journal``: landed if the branch holds its result, queued again otherwise).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.from_thread
import structlog

from orchestrator.daemon.board import Notice, minimal_environ
from orchestrator.daemon.land import _git as land_git
from orchestrator.daemon.land._check import integration_check
from orchestrator.daemon.land._journal import LandJournal, NewEntry
from orchestrator.daemon.land._messages import (
    conflict_note,
    needs_you_text,
    queued_note,
    sent_back_text,
)
from orchestrator.daemon.telemetry import CheckRan
from orchestrator.errors import GitFailed, IntegrateRefused, TaskRefused, TeamctlError
from orchestrator.git_run import Git, GitPlace
from orchestrator.protocol.land import QueueDoc

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from anyio.abc import TaskGroup

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import Confined, Host
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.members import MemberState, Supervisor
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.daemon.teams import Teams
    from orchestrator.daemon.worktrees import Worktree
    from orchestrator.protocol.board import TaskDoc
    from orchestrator.protocol.land import EntryState, QueueEntryDoc

    Environ = Callable[[Mapping[str, str]], dict[str, str]]

__all__ = ["Land"]

log = structlog.get_logger("teamctl.land")
_T = TypeVar("_T")


@dataclass(frozen=True)
class _Landed:
    result: str
    note: str
    seconds: float | None = None


@dataclass(frozen=True)
class _Requeued:
    note: str


@dataclass(frozen=True)
class _Failed:
    note: str
    to_operator: bool = False  # the owner cannot fix it
    result: str | None = None
    seconds: float | None = None


_Outcome = _Landed | _Requeued | _Failed


async def _thread(work: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    return await anyio.to_thread.run_sync(functools.partial(work, *args, **kwargs))


def _confine_as(host: Host) -> Callable[[Sequence[str], Mapping[str, str]], Confined]:
    """git on the owner's worktree as the owner runs it (its sandbox), from a worker thread."""
    def confine(argv: Sequence[str], env: Mapping[str, str]) -> Confined:
        confined = anyio.from_thread.run(functools.partial(host.confine, list(argv),
                                                           env=dict(env)))
        if confined is None:
            raise GitFailed(" ".join(argv[1:3]), "its member runs on another host")
        return confined
    return confine


class Land:
    """The merge queue of every team (see the module's doc)."""

    def __init__(self, store: AsyncStore, board: Board, teams: Teams, supervisor: Supervisor,
                 tg: TaskGroup, *, root: Path, on_change: Callable[[], None],
                 environ: Environ = minimal_environ,
                 clock: Callable[[], float] = time.time,
                 on_landed: Callable[[str], None] = lambda team: None,
                 on_checked: Callable[[CheckRan], None] = lambda ran: None) -> None:
        """``on_landed``: a task of the team landed (the forge's pull requests);
        ``on_checked``: an integration check ran (telemetry: a span of the turn that
        completed the task)."""
        self._journal = LandJournal(store)
        self._on_landed = on_landed
        self._on_checked = on_checked
        self._store = store
        self._board = board
        self._teams = teams
        self._supervisor = supervisor
        self._tg = tg
        self._root = root
        self._on_change = on_change
        self._environ = environ
        self._clock = clock
        self._workers: set[str] = set()
        self._dirty: set[str] = set()

    # -- entering the queue -------------------------------------------------------------------

    async def task_done(self, task: TaskDoc) -> QueueEntryDoc | None:
        """A task became done: its commits queued when its team integrates and its owner
        works in a worktree (anything else is a note in its events, or nothing)."""
        config = self._teams.running(task.team)
        if config is None or config.team.integrate is None or task.owner is None:
            return None
        try:
            return await self._enqueue(task, config)
        except IntegrateRefused as exc:
            await self._note(task, "integration", exc.message)
        except TeamctlError as exc:  # the journal refused: the task stays done, not queued
            log.error("task_not_queued", team=task.team, task=task.id, code=exc.code,
                      error=exc.message)
            await self._note(task, "integration", f"not queued ({exc.code}): 'teamctl "
                             f"integrate T{task.id}' queues it")
        except Exception:  # a bug: the task is done all the same, its completion not failed
            log.exception("task_not_queued", team=task.team, task=task.id)
        return None

    async def task_reviewed(self, task: TaskDoc) -> None:
        """A task went to review (its check passed): what its owner has now is what lands
        once it is approved — snapshot now, so work the owner does meanwhile (on its next
        task) is not committed under this one's title."""
        config = self._teams.running(task.team)
        if config is None or config.team.integrate is None or task.owner is None:
            return
        try:
            commit, committed = await self._snapshot(task, await self._tree(task))
        except IntegrateRefused as exc:  # said again when it is done
            log.info("task_not_snapshot", team=task.team, task=task.id, reason=exc.message)
            return
        await self._journal.keep_snapshot(task.id, commit, committed, self._clock())

    async def integrate(self, team: str | None, task_id: int) -> QueueEntryDoc:
        """``teamctl integrate T3``: a done task queued now (the one queued or running for it,
        if any)."""
        task = (await self._board.get(task_id, team)).task
        config = self._teams.running(task.team)
        if config is None:
            raise IntegrateRefused(task_id, f"team {task.team} is not running",
                                   "launch it first")
        if config.team.integrate is None:
            raise IntegrateRefused(task_id, f"team {task.team} has no [team] integrate",
                                   "add integrate = { check = \"make test\" } to its [team]")
        if task.state != "done":
            raise IntegrateRefused(task_id, f"it is {task.state}, not done",
                                   f"finish it first ('teamctl task done T{task_id}')")
        return await self._enqueue(task, config)

    async def _enqueue(self, task: TaskDoc, config: TeamConfig) -> QueueEntryDoc:
        assert config.team.integrate is not None
        tree = await self._tree(task)
        kept = await self._journal.take_snapshot(task.id)  # what was reviewed, if it was
        commit, committed = kept or await self._snapshot(task, tree)
        branch = config.team.integrate.branch_of(task.team)
        entry, new = await self._journal.enqueue(NewEntry(
            task.team, task.id, task.title, tree.member, tree.branch, commit, branch,
            str(tree.repository().common_dir), tree.base_commit), self._clock())
        if new:
            await self._note(task, "queued", queued_note(entry, branch, committed))
            log.info("task_queued", team=task.team, task=task.id, entry=entry.id,
                     owner=entry.owner, commit=commit[:12], attempt=entry.attempt)
            self._on_change()
        self.wake(task.team)
        return entry

    async def _tree(self, task: TaskDoc) -> Worktree:
        found = [t for t in await self._store.worktrees(task.team) if t.member == task.owner]
        if not found or found[0].common_dir is None:
            raise IntegrateRefused(task.id, f"its owner {task.owner} works in no worktree "
                                   "(worktree = true): it has no branch to land",
                                   "give the member worktree = true, or merge by hand")
        return found[0]

    async def _snapshot(self, task: TaskDoc, tree: Worktree) -> tuple[str, bool]:
        """The owner's worktree's commit, after what it left uncommitted is committed with
        the task's title — by the owner's own git, inside its boundary."""
        try:
            state = self._supervisor.member(task.team, tree.member)
            git = Git(tree.place(), confine=_confine_as(state.host))
            committed = await _thread(land_git.commit_leftovers, git, f"T{task.id}: {task.title}",
                                      (tree.member, f"{tree.member}@{task.team}.teamctl"))
            return await _thread(land_git.head_of, git), committed
        except TeamctlError as exc:
            raise IntegrateRefused(task.id, f"its owner's worktree could not be read or "
                                   f"committed ({exc.message})",
                                   f"commit in {tree.path}, then 'teamctl integrate "
                                   f"T{task.id}'") from exc

    # -- what the forge's pull requests read (docs/forge.md) ----------------------------------

    async def last_entry(self) -> int:
        """The newest entry's id (0: none yet)."""
        return await self._journal.last_id()

    async def landed_after(self, team: str, after: int) -> list[tuple[int, int, str, str]]:
        """The team's entries after ``after`` that landed: id, task, the owner's commit and
        the repository's common dir."""
        return await self._journal.landed_after(team, after)

    async def worktree_commit(self, task: TaskDoc) -> tuple[str, str]:
        """A done task's commit in its owner's worktree (what it left uncommitted committed
        first, inside its boundary) and the repository's common dir; IntegrateRefused when
        its owner works in no worktree."""
        tree = await self._tree(task)
        commit, _ = await self._snapshot(task, tree)
        return commit, str(tree.repository().common_dir)

    # -- the operator's view ------------------------------------------------------------------

    async def queue(self, team: str | None, *, pause: bool = False,
                    resume: bool = False) -> QueueDoc:
        """The team's queue (``teamctl queue``), paused or resumed first when asked."""
        name = self._teams.resolve(team).name
        if pause or resume:
            await self._journal.set_paused(name, pause)
            log.info("queue_paused" if pause else "queue_resumed", team=name)
            self._on_change()
            if resume:
                self.wake(name)
        waiting, running, recent, paused = await self._journal.listing(name)
        config = self._teams.running(name)
        integrate = None if config is None else config.team.integrate
        return QueueDoc(team=name, branch=None if integrate is None else integrate.branch_of(name),
                        mode=None if integrate is None else integrate.mode,
                        check=None if integrate is None else integrate.check, paused=paused,
                        waiting=waiting, running=running, recent=recent)

    async def needs_you(self, team: str) -> list[QueueEntryDoc]:
        """What waits on the operator: tasks that could not land after their retries (or
        that their owner cannot fix) and that are still failed — assigning one back or
        cancelling it settles it."""
        waiting = []
        for entry in await self._journal.needs_you(team):
            try:
                task = (await self._board.get(entry.task, team)).task
            except TeamctlError:
                continue
            if task.state == "failed":
                waiting.append(entry)
        return waiting

    async def entries(self, task_id: int) -> list[QueueEntryDoc]:
        """The task's entries, newest first (its page)."""
        return await self._journal.of_task(task_id)

    # -- the workers --------------------------------------------------------------------------

    async def start(self) -> None:
        """What a killed daemon left: each running entry landed (the branch holds its
        result) or queued again; every scratch worktree removed."""
        for entry, repo in await self._journal.running():
            git = land_git.repository(GitPlace(Path(repo), Path(repo)))
            landed = False
            if entry.result is not None and entry.phase == "landing":
                try:
                    tip = await _thread(land_git.branch_tip, git, entry.branch)
                    landed = tip is not None and await _thread(land_git.contains, git, tip,
                                                               entry.result)
                except TeamctlError:
                    landed = False
            await self._discard(git, entry)
            if landed:
                assert entry.result is not None
                await self._landed(entry, _Landed(entry.result, f"landed on {entry.branch} as "
                                                  f"{entry.result[:12]} (recorded after a "
                                                  "daemon restart)"))
            else:
                await self._journal.move(entry.id, "queued", phase=None, onto=None,
                                         result=None, started_at=None,
                                         note="queued again: the daemon stopped while it ran")
                log.info("queue_entry_requeued", team=entry.team, entry=entry.id,
                         task=entry.task)
        for team in await self._journal.teams_waiting():
            self.wake(team)

    async def launched(self, state: MemberState) -> None:
        """A member's launch came up (the supervisor's observer): its team's queue goes on."""
        self.wake(state.team)

    def wake(self, team: str) -> None:
        """The team's worker looks at its queue again (started if none runs)."""
        self._dirty.add(team)
        if team not in self._workers:
            self._workers.add(team)
            self._tg.start_soon(self._work, team, name=f"merge queue {team}")

    async def _work(self, team: str) -> None:
        try:
            while True:
                self._dirty.discard(team)
                config = self._teams.running(team)
                found = None
                if config is not None and config.team.integrate is not None:
                    found = await self._journal.next(team)
                if found is None:
                    if team in self._dirty:
                        continue
                    return
                entry, repo, base = found
                await self._land(config, entry, GitPlace(Path(repo), Path(repo)), base)
        finally:
            self._workers.discard(team)

    async def _land(self, config: TeamConfig | None, entry: QueueEntryDoc, place: GitPlace,
                    base: str) -> None:
        assert config is not None and config.team.integrate is not None
        entry = await self._journal.move(entry.id, "running", phase="merging",
                                         started_at=self._clock(), note=None)
        self._on_change()
        log.info("task_integrating", team=entry.team, task=entry.task, entry=entry.id,
                 attempt=entry.attempt)
        try:
            outcome = await self._attempt(config, entry, place, base)
        except TeamctlError as exc:
            outcome = _Failed(f"{exc.code}: {exc.message}", to_operator=True)
        except Exception as exc:  # a bug: this entry's, never the queue's end
            log.exception("queue_entry_crashed", team=entry.team, entry=entry.id)
            outcome = _Failed(f"internal error: {type(exc).__name__}; see 'teamctl logs'",
                              to_operator=True)
        await self._settle(config, entry, outcome)

    async def _attempt(self, config: TeamConfig, entry: QueueEntryDoc, place: GitPlace,
                       base: str) -> _Outcome:
        integrate = config.team.integrate
        assert integrate is not None
        branch = entry.branch
        repo = land_git.repository(place)
        where = await _thread(land_git.checked_out, repo, branch)
        if where is not None:
            return _Failed(f"the integration branch {branch} is checked out in {where}: "
                           "teamctl moves it only where nobody has it checked out; check out "
                           f"another branch there, then 'teamctl integrate T{entry.task}'",
                           to_operator=True)
        tip = await _thread(land_git.make_branch, repo, branch, base)
        if await _thread(land_git.contains, repo, tip, entry.commit):
            return _Landed(tip, f"already on {branch} ({tip[:12]}): nothing new to land")
        scratch = self._root / entry.team / str(entry.id)
        try:
            tree = await _thread(land_git.open_scratch, repo, scratch, tip)
            merged = await _thread(
                land_git.integrate, tree, mode=integrate.mode, commit=entry.commit, onto=tip,
                message=f"T{entry.task}: {entry.title} ({entry.owner})",
                author=(entry.owner, f"{entry.owner}@{entry.team}.teamctl"))
            if isinstance(merged, land_git.Conflict):
                return _Failed(conflict_note(merged, branch, tip))
            if merged.empty:
                return _Landed(tip, f"nothing new to land on {branch} ({tip[:12]})")
            await self._journal.move(entry.id, "running", phase="checking", onto=tip,
                                     result=merged.commit)
            self._on_change()
            seconds = None
            if integrate.check is not None:
                state = self._supervisor.member(entry.team, entry.owner)
                started = self._clock()
                checked = await integration_check(state, integrate.check, scratch,
                                                  timeout=integrate.check_timeout,
                                                  environ=self._environ)
                self._on_checked(CheckRan(
                    entry.team, entry.task, "integration", started, self._clock(),
                    "refused" if checked.refused else "passed" if checked.passed
                    else "failed"))
                seconds = round(checked.seconds, 4)
                log.info("integration_check", team=entry.team, task=entry.task,
                         entry=entry.id, passed=checked.passed, seconds=seconds)
                if not checked.passed:
                    return _Failed(checked.note, to_operator=checked.refused,
                                   result=merged.commit, seconds=seconds)
            await self._journal.move(entry.id, "running", phase="landing",
                                     check_seconds=seconds)
            if not await _thread(land_git.move_branch, repo, branch, merged.commit, tip):
                return _Requeued(f"{branch} moved while this ran; queued again")
            return _Landed(merged.commit, f"landed on {branch} as {merged.commit[:12]}",
                           seconds)
        finally:
            with anyio.CancelScope(shield=True):
                await self._discard(repo, entry)

    async def _discard(self, repo: Git, entry: QueueEntryDoc) -> None:
        try:
            await _thread(land_git.close_scratch, repo, self._root / entry.team / str(entry.id))
        except (OSError, TeamctlError) as exc:
            log.warning("scratch_not_removed", team=entry.team, entry=entry.id,
                        error=str(exc)[:200])

    # -- what an attempt ends in --------------------------------------------------------------

    async def _settle(self, config: TeamConfig, entry: QueueEntryDoc,
                      outcome: _Outcome) -> None:
        if isinstance(outcome, _Landed):
            await self._landed(entry, outcome)
        elif isinstance(outcome, _Requeued):
            await self._journal.move(entry.id, "queued", phase=None, onto=None, result=None,
                                     note=outcome.note)
            self.wake(entry.team)
        else:
            await self._failed(config, entry, outcome)
        self._on_change()

    async def _landed(self, entry: QueueEntryDoc, outcome: _Landed) -> None:
        await self._journal.move(entry.id, "landed", phase=None, result=outcome.result,
                                 note=outcome.note, finished_at=self._clock(),
                                 check_seconds=outcome.seconds)
        log.info("task_landed", team=entry.team, task=entry.task, entry=entry.id,
                 attempt=entry.attempt, commit=outcome.result[:12])
        self._on_landed(entry.team)
        await self._note_id(entry, "landed", outcome.note)

    async def _failed(self, config: TeamConfig, entry: QueueEntryDoc, outcome: _Failed) -> None:
        operator = outcome.to_operator or entry.attempt >= config.team.integrate_retries
        state: EntryState = "needs_you" if operator else "sent_back"
        await self._journal.move(entry.id, state, phase=None, note=outcome.note,
                                 result=outcome.result, finished_at=self._clock(),
                                 check_seconds=outcome.seconds)
        log.info("task_not_landed", team=entry.team, task=entry.task, entry=entry.id,
                 to=state, attempt=entry.attempt)
        text = needs_you_text(entry, entry.branch, outcome.note) if operator else \
            sent_back_text(entry, entry.branch, outcome.note, config.team.integrate_retries)
        notice = None if operator else Notice(f"land:{entry.id}", "integration", text)
        try:
            await self._board.send_back(entry.task, fail=operator, epoch=self._epoch(entry),
                                        note=text, notice=notice)
        except TeamctlError as exc:  # no longer done: the operator moved it meanwhile
            log.warning("task_not_sent_back", team=entry.team, task=entry.task,
                        code=exc.code)
            return
        if notice is not None:
            log.info("task_owner_told", team=entry.team, member=entry.owner, task=entry.task,
                     source=notice.source)

    def _epoch(self, entry: QueueEntryDoc) -> int | None:
        try:
            state = self._supervisor.member(entry.team, entry.owner)
        except TeamctlError:
            return None
        return state.epoch if state.launch == "running" else None

    async def _note(self, task: TaskDoc, kind: str, note: str) -> None:
        try:
            await self._board.note(task.id, task.team, kind=kind, note=note)
        except (TaskRefused, TeamctlError) as exc:
            log.warning("task_note_failed", team=task.team, task=task.id, code=exc.code)

    async def _note_id(self, entry: QueueEntryDoc, kind: str, note: str) -> None:
        try:
            await self._board.note(entry.task, entry.team, kind=kind, note=note)
        except TeamctlError as exc:
            log.warning("task_note_failed", team=entry.team, task=entry.task, code=exc.code)
