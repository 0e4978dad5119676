"""Self-claim, done by teamctl (docs/board.md): a member with ``claims = true`` that is idle —
ready or asleep, not held, nothing queued (its mailbox queue says so: ``Mailbox.on_idle``) — is
handed the next ready task of its role (priority, then age); the hand-over's message wakes an
asleep one.

Handed, not offered: the claim and the message that tells the member ("you now own T3: …; when
done call task_complete") are one journal transaction, so the task is the member's exactly
when the message is in its queue — durable, delivered at least once like any message — and
two idle members can never be offered the same task. A task the member released itself is not
handed to it again within ``[board] offer_cooldown``; one it holds counts against its
``max_tasks``, so an idle member is never handed a second task while it holds one (no offer
storms). A board change (a task created, released, lapsed, or a dependency done) pokes the
team's idle claimers (``poke``), so the dependent of a task just done reaches the next idle
claimer at once.
"""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.board._claims import Claimant, take
from orchestrator.daemon.queue import NewMessage, Origin
from orchestrator.errors import TaskRefused

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from orchestrator.daemon.board._service import Board
    from orchestrator.daemon.journal import Journal
    from orchestrator.daemon.members import Supervisor
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.daemon.teams import Teams
    from orchestrator.protocol.board import TaskDoc

__all__ = ["Offers", "hand_over", "offer_text"]

log = structlog.get_logger("teamctl.board")

_NOTHING = ("task_none_ready", "task_limit")  # refusals that mean: no offer now
_LONGEST_COOLDOWN = 86400.0  # [board] offer_cooldown's bound (config.py)
_LONGEST_SLEEP = 60.0  # the wall clock may jump: a far cooldown end is looked at again this often


def offer_text(task: TaskDoc) -> str:
    """What the member reads: the task, and the tools to finish or give it back."""
    body = f"\n\n{task.body}" if task.body else ""
    role = f" (role {task.role})" if task.role else ""
    return (f"teamctl: you now own task T{task.id}{role}: {task.title}{body}\n\n"
            f"Work on it now. When it is done, call task_complete(id={task.id}, summary=...) "
            f"(the team's check may run first). If you cannot do it, call "
            f"task_release(id={task.id}, reason=...) so a teammate takes it.")


async def hand_over(store: AsyncStore, who: Claimant, now: float,
                    cooled_since: float) -> TaskDoc | None:
    """In one transaction: claim the next ready task of ``who``'s role (not one it released
    after ``cooled_since``) and journal the message that tells it; None when there is none
    (or it holds its ``max_tasks``)."""
    def tell(task: TaskDoc) -> NewMessage:
        return NewMessage(who.team, offer_text(task), [who.member], Origin(task_id=task.id))

    return await store.add_message_after(partial(_offer, who, now, cooled_since), tell)


def _offer(who: Claimant, now: float, cooled_since: float,
           db: sqlite3.Connection) -> TaskDoc | None:
    try:
        return take(db, who, None, now, cooled_since=cooled_since, kind="offered")
    except TaskRefused as exc:
        if exc.code in _NOTHING:
            return None
        raise


def cooled_teams(journal: Journal, since: float) -> list[tuple[str, float]]:
    """(team, release time) of each self-release after ``since`` whose task still waits for an
    owner: the releases whose cooldown may end next."""
    rows = journal.connection.execute(
        "SELECT DISTINCT t.team, e.at FROM task_events e JOIN tasks t ON t.id = e.task "
        "WHERE e.kind = 'released' AND e.at > ? AND t.status = 'pending' AND t.owner IS NULL",
        (since,)).fetchall()
    return [(str(row[0]), float(row[1])) for row in rows]


class Offers:
    """``on_idle`` (the mailbox's hook) and ``poke`` (the board's change hook)."""

    def __init__(self, journal: AsyncStore, board: Board, teams: Teams,
                 supervisor: Supervisor, poke: Callable[[str, str], None], *,
                 held: Callable[[str, str], bool]) -> None:
        """``poke(team, member)``: look at its queue again; ``held(team, member)``: the
        ledger holds it (a budget, a rate limit)."""
        self._journal = journal
        self._held = held
        self._board = board
        self._teams = teams
        self._supervisor = supervisor
        self._poke = poke
        # the earliest cooldown end after the last look (None: nothing cools); the loop
        # sleeps until then, or until the board changes — an idle board is never read
        self.next_cooled: float | None = None
        self._changed = anyio.Event()

    def claimers(self, team: str) -> list[str]:
        """The team's members with ``claims = true``."""
        config = self._teams.running(team)
        if config is None:
            return []
        return [m.name for m in config.members if config.resolved(m).claims]

    async def wake_cooled(self, last: float, now: float) -> list[str]:
        """The teams where a released task's ``offer_cooldown`` ended in ``(last, now]``:
        their idle claimers are poked — else a member that released the only ready task
        would never be handed it again (nothing else changes on the board). The teams;
        ``next_cooled`` is the next cooldown end after ``now``."""
        released = await self._journal.run(cooled_teams, now - _LONGEST_COOLDOWN)
        ends = [(team, at + config.board.offer_cooldown) for team, at in released
                if (config := self._teams.running(team)) is not None]
        woken = sorted({team for team, end in ends if last < end <= now})
        self.next_cooled = min((end for _, end in ends if end > now), default=None)
        for team in woken:  # not a board change: the loop sleeps on until the next end
            self._poke_claimers(team)
        return woken

    async def cooldown_loop(self, interval: float) -> None:
        """Wake the claimers whose cooldown just ended: at the next cooldown end, and within
        ``interval`` of a board change (a release starts a cooldown); a board that does not
        change is not read."""
        last = self._board.clock()
        due: float | None = last  # one look at the start: a daemon restarted mid-cooldown
        while True:
            wait = math.inf if due is None else min(max(due - self._board.clock(), 0.0),
                                                    _LONGEST_SLEEP)
            with anyio.move_on_after(wait):
                await self._changed.wait()
            if self._changed.is_set():
                self._changed = anyio.Event()
                soon = self._board.clock() + interval
                due = soon if due is None else min(due, soon)
                continue
            now = self._board.clock()
            try:
                await self.wake_cooled(last, now)
                last, due = now, self.next_cooled
            except Exception:  # the journal may refuse a read for a while: try again later
                log.exception("cooldown_check_failed")
                due = now + interval

    def poke(self, team: str | None) -> None:
        """The board changed: the team's claimers (None: every running team's) look again;
        a busy one looks after its turn, as it always does."""
        self._changed.set()
        self._poke_claimers(team)

    def _poke_claimers(self, team: str | None) -> None:
        teams = [team] if team is not None else self._teams.names()
        for name in teams:
            for member in self.claimers(name):
                self._poke(name, member)

    async def on_idle(self, team: str, member: str) -> bool:
        """The member is idle: hand it the next ready task of its role, if it claims (and
        is ready or asleep — the task's message wakes it —, and not held)."""
        config = self._teams.running(team)
        spec = None if config is None else config.member(member)
        if config is None or spec is None or not config.resolved(spec).claims:
            return False
        state = self._supervisor.member(team, member)
        idle = state.readiness == "ready" or state.launch == "asleep"
        if not idle or self._held(team, member):
            return False  # the queue asks only then; never to a held or starting member
        who = Claimant(team, member, state.epoch,
                       frozenset(() if spec.role is None else (spec.role,)), spec.max_tasks)
        now = self._board.clock()
        try:
            task = await hand_over(self._journal, who, now, now - config.board.offer_cooldown)
        except Exception:  # the journal refused it: the member stays idle, asked again later
            log.exception("task_offer_failed", team=team, member=member)
            return False
        if task is None:
            return False
        log.info("task_offered", team=team, member=member, task=task.id, epoch=state.epoch)
        self._board.changed(team)
        await self._board.deliver_waiting(task)  # what came while nobody held it
        return True
