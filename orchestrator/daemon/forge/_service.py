"""The forge's service (docs/forge.md): for each running team whose file has ``[forge]`` with
``intake``, one poll loop — started when a member of the team comes up (the supervisor's
observer), gone when the team no longer runs or has no forge. Each round is intake's; a rate
limit is waited out until its reset; any other forge failure is kept for ``status`` and
tried again at the next round: the forge's trouble is the team's forge's, never the daemon's
end."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.forge._intake import Intake
from orchestrator.daemon.forge._write_back import WriteBack
from orchestrator.errors import ForgeError, TeamctlError
from orchestrator.protocol.teams import ForgeStatusDoc

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from anyio.abc import TaskGroup

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.members.state import MemberState
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.forge.protocol import Forge, RateLimit
    from orchestrator.forge_config import ForgeSection

__all__ = ["ForgeStatus", "Forges"]

log = structlog.get_logger("teamctl.forge")


@dataclass(frozen=True)
class ForgeStatus:
    """A team's forge as ``status`` shows it: the last round's error (code and message, no
    token), the rate limit, and until when polling waits (a spent window's reset)."""

    error: str | None
    rate: RateLimit | None
    waiting_until: float | None
    rounds: int


class Forges:
    """Every running team's forge loop."""

    def __init__(self, store: AsyncStore, board: Board, running: Callable[[str], TeamConfig | None],
                 tg: TaskGroup, *, open_forge: Callable[[ForgeSection, Mapping[str, str]], Forge],
                 environ: Mapping[str, str] = os.environ,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> None:
        self._store = store
        self._board = board
        self._running = running
        self._tg = tg
        self._open = open_forge
        self._environ = environ
        self._clock = clock
        self._sleep = sleep
        self._loops: set[str] = set()
        self._status: dict[str, ForgeStatus] = {}

    def status(self, team: str) -> ForgeStatus | None:
        """The team's forge as it stands (None: no forge loop ran for it)."""
        return self._status.get(team)

    def doc(self, team: str) -> ForgeStatusDoc | None:
        """The team's forge as ``status`` shows it (None: it has none, or no round yet)."""
        config, now = self._running(team), self._status.get(team)
        if config is None or config.forge is None or now is None:
            return None
        rate = now.rate
        return ForgeStatusDoc(repo=config.forge.github.repo, rounds=now.rounds,
                              error=now.error, remaining=None if rate is None else rate.remaining,
                              reset=None if rate is None else rate.reset,
                              waiting_until=now.waiting_until)

    async def launched(self, state: MemberState) -> None:
        """A member came up (the supervisor's observer): its team's forge loop runs."""
        config = self._running(state.team)
        if (state.team in self._loops or config is None or config.forge is None
                or config.forge.intake is None):
            return
        self._loops.add(state.team)
        self._tg.start_soon(self._loop, state.team, name=f"forge {state.team}")

    async def _loop(self, team: str) -> None:
        forge: Forge | None = None
        rounds = 0
        try:
            while True:
                config = self._running(team)
                section = None if config is None else config.forge
                wanted = None if section is None else section.intake
                if section is None or wanted is None:
                    return
                wait, error, until = section.poll_interval, None, None
                try:
                    if forge is None:
                        forge = self._open(section, self._environ)
                    intake = Intake(team=team, repo=section.github.repo,
                                    label=wanted.label, state=wanted.state,
                                    forge=forge, board=self._board, journal=self._store,
                                    clock=self._clock)
                    done = await intake.poll()
                    if section.write_back:
                        await WriteBack(team=team, repo=section.github.repo, forge=forge,
                                        board=self._board, journal=self._store).round()
                    rounds += 1
                    if done.created or done.edited or done.cancelled:
                        log.info("forge_round", team=team, created=len(done.created),
                                 edited=len(done.edited), cancelled=len(done.cancelled))
                except ForgeError as exc:
                    error = f"{exc.code}: {exc.message}"
                    if exc.until is not None:
                        until = exc.until
                        wait = max(wait, exc.until - self._clock())
                    log.warning("forge_failed", team=team, code=exc.code, retryable=exc.retryable)
                except TeamctlError as exc:  # the board's refusal, the journal's: said, tried
                    error = f"{exc.code}: {exc.message}"  # again — never the daemon's end
                    log.warning("forge_round_failed", team=team, code=exc.code)
                self._status[team] = ForgeStatus(
                    error, None if forge is None else forge.rate_limit, until, rounds)
                await self._sleep(wait)
        finally:
            self._loops.discard(team)
            if forge is not None:
                with anyio.CancelScope(shield=True):
                    await forge.aclose()
