"""The forge's service (docs/forge.md): for each running team whose file has ``[forge]`` with
``intake`` or ``pull_requests``, one poll loop — started when a member of the team comes up
(the supervisor's observer), gone when the team no longer runs or has no forge. Each round is
intake's, the pull requests' (``_pulls``), then write-back's; a landing or a task done in a
worktree pokes the loop for a round at once. A rate limit is waited out until its reset, pokes
or not; any other forge failure is kept for ``status`` and tried again at the next round: the
forge's trouble is the team's forge's, never the daemon's end."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.forge import _pull_journal as pj
from orchestrator.daemon.forge._intake import Intake
from orchestrator.daemon.forge._pulls import Pulls, branch_of, start_mark
from orchestrator.daemon.forge._write_back import WriteBack
from orchestrator.errors import ForgeError, TeamctlError
from orchestrator.protocol.teams import ForgeStatusDoc, PullDoc

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from anyio.abc import TaskGroup

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.forge._pulls import Landings
    from orchestrator.daemon.members.state import MemberState
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.forge.protocol import Forge, RateLimit
    from orchestrator.forge_config import ForgeSection
    from orchestrator.protocol.board import TaskDoc

__all__ = ["ForgeStatus", "Forges"]

log = structlog.get_logger("teamctl.forge")


@dataclass(frozen=True)
class ForgeStatus:
    """A team's forge loop as ``status`` shows it: the last round's error (code and message,
    no token), the rate limit, and until when polling waits (a spent window's reset). Its pull
    requests are read from the journal when asked (``Forges.doc``), not kept here."""

    error: str | None
    rate: RateLimit | None
    waiting_until: float | None
    rounds: int


def _pull_doc(row: pj.PullRow) -> PullDoc:
    return PullDoc(task=row.task, number=row.number, url=row.url, branch=row.branch,
                   state=row.state, failed_heads=row.failed_heads, note=row.note)


def _follows(section: ForgeSection | None) -> bool:
    """Whether a team's forge has anything for a loop to do."""
    return section is not None and (section.intake is not None or section.pull_requests)


class Forges:
    """Every running team's forge loop."""

    def __init__(self, store: AsyncStore, board: Board, running: Callable[[str], TeamConfig | None],
                 tg: TaskGroup, *, open_forge: Callable[[ForgeSection, Mapping[str, str]], Forge],
                 environ: Mapping[str, str] = os.environ,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 landings: Landings | None = None,
                 epoch_of: Callable[[str, str], int | None] = lambda team, member: None
                 ) -> None:
        self._store = store
        self._board = board
        self._running = running
        self._tg = tg
        self._open = open_forge
        self._environ = environ
        self._clock = clock
        self._sleep = sleep
        self._landings = landings
        self._epoch_of = epoch_of  # a member's running launch (a task sent back is held by it)
        self._loops: set[str] = set()
        self._status: dict[str, ForgeStatus] = {}
        self._wakes: dict[str, anyio.Event] = {}

    def status(self, team: str) -> ForgeStatus | None:
        """The team's forge as it stands (None: no forge loop ran for it)."""
        return self._status.get(team)

    async def doc(self, team: str) -> ForgeStatusDoc | None:
        """The team's forge as ``status`` shows it (None: it has none, or no round yet): the
        loop's last round, and its pull requests as the journal holds them now — a merge
        shows the moment it is journaled, not once the round that made it has ended."""
        config, now = self._running(team), self._status.get(team)
        if config is None or config.forge is None or now is None:
            return None
        repo, rate = config.forge.github.repo, now.rate
        shown = await self._store.run(pj.of_team, team, repo)
        return ForgeStatusDoc(repo=repo, rounds=now.rounds,
                              error=now.error, remaining=None if rate is None else rate.remaining,
                              reset=None if rate is None else rate.reset,
                              waiting_until=now.waiting_until,
                              pulls=[_pull_doc(r) for r in shown])

    async def needs_you(self, team: str) -> list[PullDoc]:
        """The team's pull requests that wait on the operator: CI failed past
        ``ci_retries`` (their task still failed), or a push refused for lack of rights."""
        return [_pull_doc(r) for r in await self._store.run(pj.needing_you, team)]

    async def launched(self, state: MemberState) -> None:
        """A member came up (the supervisor's observer): its team's forge loop runs."""
        config = self._running(state.team)
        if state.team in self._loops or config is None or not _follows(config.forge):
            return
        self._loops.add(state.team)
        self._tg.start_soon(self._loop, state.team, name=f"forge {state.team}")

    def poke(self, team: str) -> None:
        """The team's loop does a round now (a task landed), not at its next poll."""
        self._wakes.setdefault(team, anyio.Event()).set()

    async def task_done(self, task: TaskDoc) -> None:
        """A task became done (the board's ``on_gated``): where its team has pull requests
        and does not integrate, its owner's worktree commit is to be pushed (a landing is
        taken from the merge queue's journal instead)."""
        config = self._running(task.team)
        section = None if config is None else config.forge
        if (config is None or section is None or not section.pull_requests
                or config.team.integrate is not None or self._landings is None
                or task.owner is None):
            return
        try:
            commit, source = await self._landings.worktree_commit(task)
            await self._store.run(pj.want, task.team, section.github.repo, task=task.id,
                                  branch=branch_of(task.team, task.id), source=source,
                                  commit=commit, now=self._clock())
        except TeamctlError as exc:  # no worktree, or it could not be read: said on the task
            log.info("forge_pull_not_wanted", team=task.team, task=task.id, code=exc.code)
            await self._board.note(task.id, task.team, kind="pull_request",
                                   note=f"no pull request: {exc.message}")
            return
        self.poke(task.team)

    async def _pause(self, team: str, seconds: float, *, pokes: bool) -> None:
        """Until the next round: ``seconds``, or less when the loop is poked (``pokes``)."""
        wake = self._wakes.setdefault(team, anyio.Event())
        if not pokes:
            await self._sleep(seconds)
        elif not wake.is_set():
            async with anyio.create_task_group() as tg:
                async def sleep() -> None:
                    await self._sleep(seconds)
                    tg.cancel_scope.cancel()
                tg.start_soon(sleep)
                await wake.wait()
                tg.cancel_scope.cancel()
        self._wakes[team] = anyio.Event()

    def _pulls_of(self, team: str, section: ForgeSection, forge: Forge,
                  kept: Pulls | None) -> Pulls | None:
        if not section.pull_requests or self._landings is None:
            return None
        if kept is not None and kept.section is section and kept.forge is forge:
            return kept
        return Pulls(team=team, section=section, forge=forge, board=self._board,
                     journal=self._store, landings=self._landings, epoch_of=self._epoch_of,
                     clock=self._clock, environ=self._environ)

    async def _loop(self, team: str) -> None:
        forge: Forge | None = None
        pulls: Pulls | None = None
        rounds = 0
        try:
            while True:
                config = self._running(team)
                section = None if config is None else config.forge
                if section is None or not _follows(section):
                    return
                wait, until, failed = section.poll_interval, None, None
                try:
                    if section.pull_requests and self._landings is not None:
                        # before GitHub is asked: a landing while it cannot be (the token
                        # unset, the forge down, the window spent) is taken once it can
                        await start_mark(self._store, self._landings, team,
                                         section.github.repo)
                    if forge is None:
                        forge = self._open(section, self._environ)
                    pulls = self._pulls_of(team, section, forge, pulls)
                    await self._round(team, section, forge, pulls)
                    rounds += 1
                except TeamctlError as exc:  # the forge's, the board's, the journal's: said,
                    failed = exc             # tried again — never the daemon's end
                    if isinstance(exc, ForgeError) and exc.until is not None:
                        until = exc.until
                        wait = max(wait, exc.until - self._clock())
                self._status[team] = ForgeStatus(
                    None if failed is None else f"{failed.code}: {failed.message}",
                    None if forge is None else forge.rate_limit, until, rounds)
                if failed is not None:  # logged once status shows it
                    log.warning("forge_failed" if isinstance(failed, ForgeError)
                                else "forge_round_failed", team=team, code=failed.code,
                                retryable=failed.retryable, until=until)
                # a spent window is waited out whole: a landing's poke does not ask GitHub
                # before its reset (each request would be refused, and counted against it)
                await self._pause(team, wait, pokes=until is None)
        finally:
            self._loops.discard(team)
            if forge is not None:
                with anyio.CancelScope(shield=True):
                    await forge.aclose()

    async def _round(self, team: str, section: ForgeSection, forge: Forge,
                     pulls: Pulls | None) -> None:
        """One round: intake (when ``intake``), the pull requests, then write-back (after
        them: a "done" comment names the pull request opened in the same round; a pull
        request's trouble does not hold the issue's comments back — a spent window does)."""
        wanted = section.intake
        if wanted is not None:
            intake = Intake(team=team, repo=section.github.repo, label=wanted.label,
                            state=wanted.state, forge=forge, board=self._board,
                            journal=self._store, clock=self._clock)
            done = await intake.poll()
            if done.created or done.edited or done.cancelled:
                log.info("forge_round", team=team, created=len(done.created),
                         edited=len(done.edited), cancelled=len(done.cancelled))
        failed: TeamctlError | None = None
        if pulls is not None:
            try:
                await pulls.round()
            except TeamctlError as exc:
                if isinstance(exc, ForgeError) and exc.until is not None:
                    raise
                failed = exc
        if wanted is not None and section.write_back:
            running = self._running(team)
            await WriteBack(team=team, repo=section.github.repo, forge=forge,
                            board=self._board, journal=self._store,
                            pulls=section.pull_requests,
                            integrates=running is not None
                            and running.team.integrate is not None).round()
        if failed is not None:
            raise failed
