"""The team's board (docs/board.md): tasks with dependencies, claimed in one transaction, held
by a member's launch and released when it does not come back.

``Board`` is the one way in — the operator's control API now, the members' MCP tools and the
supervisor's lifecycle next — typed async methods over the journal's writer
(``_journal``: tables and reads; ``_writes``: create, dependencies, transitions;
``_claims``: claims and leases). Text is checked here, whoever sends it: a title is one
line of at most 200 characters, a body (summary, evidence, note) at most 64 KiB, and neither
holds control characters (a tab and, outside the title, a newline aside).

The gate seam: ``complete`` asks ``gate`` (a coroutine given the task) where a completed task
goes — ``done`` (the default: no gate), ``review`` (a reviewer or the operator decides) or
``in_progress`` (the check failed; its output is the note sent back to the owner); then
``on_gated`` hears where it went (the daemon tells the owner or the reviewer: ``_gate``).
``review`` settles a task in review (``reviewer``: who may, by team). ``on_change(team)``
hears every write (None: any team — a lapse): the change feed, and idle claimers looked at
again (``_offers``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from orchestrator.daemon.board import _claims as board_claims
from orchestrator.daemon.board import _journal as board_journal
from orchestrator.daemon.board import _notices as board_notices
from orchestrator.daemon.board import _review as board_review
from orchestrator.daemon.board import _writes as board_writes
from orchestrator.daemon.board._claims import Claimant
from orchestrator.daemon.board._writes import OPERATOR, Actor, Assignee, NewTask, Outcome, Verdict
from orchestrator.daemon.queue import NewMessage, Origin
from orchestrator.daemon.telemetry import CheckRan
from orchestrator.errors import TaskInvalid
from orchestrator.limits import MAX_TASK_DEPS, MAX_TASK_TEXT_BYTES, MAX_TASK_TITLE_CHARS

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Collection, Sequence

    from orchestrator.daemon.board._notices import Notice, Told
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.protocol.board import TaskDoc, TaskListDoc, TaskShowDoc

__all__ = ["DEFAULT_GRACE", "OPERATOR", "Actor", "Assignee", "Board", "Claimant", "GateResult",
           "check_text", "check_title"]

DEFAULT_GRACE = 60.0  # seconds a dead owner's task is kept for its next launch
_CHECK_CHARS = 2000  # a gate command, one line


@dataclass(frozen=True)
class GateResult:
    """Where a completed task goes, and what to tell its owner (a check's output)."""

    status: Verdict
    note: str | None = None
    by: str | None = None  # who settled it: a reviewer (None: the gate)


Gate = Callable[["TaskDoc"], Awaitable[GateResult]]
Gated = Callable[["TaskDoc", GateResult], Awaitable[None]]


async def no_gate(task: TaskDoc) -> GateResult:
    """Phase 1: nothing stands between a completed task and done."""
    return GateResult("done", task.summary)


def check_title(title: str, what: str = "title", *,
                limit_chars: int = MAX_TASK_TITLE_CHARS) -> str:
    """A title (or a check command): one line of 1..200 characters, no control character."""
    _plain(title, what, allowed="")
    if not (title.strip() and len(title) <= limit_chars):
        raise TaskInvalid(f"a task's {what} is 1 to {limit_chars} characters on one line "
                          f"(this one has {len(title)})")
    return title.strip()


def check_text(text: str, what: str, *, limit_bytes: int = MAX_TASK_TEXT_BYTES) -> str:
    """A body, summary, evidence, note or reason: at most 64 KiB, no control character
    other than a tab or a newline."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit_bytes:
        raise TaskInvalid(f"a task's {what} is at most {limit_bytes} bytes (this one has "
                          f"{size}); put the rest in a file and name it")
    _plain(text, what, allowed="\t\n")
    return text


# control characters (Unicode Cc) and lone surrogates (JSON can carry them; UTF-8 cannot)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _plain(text: str, what: str, *, allowed: str) -> None:
    for found in _CONTROL.finditer(text):
        char = found.group()
        if char not in allowed:
            raise TaskInvalid(f"a task's {what} holds a control character (U+{ord(char):04X} "
                              f"at {found.start()}); remove it")


def _sendable(told: Told | None) -> Told | None:
    """``told`` when it has a member to message (None: nothing to send now)."""
    return told if told is not None and told.member is not None else None


def _message(told: Told | None) -> NewMessage:
    assert told is not None and told.member is not None
    return NewMessage(told.team, told.text, [told.member], Origin(task_id=told.task),
                      message_id=told.message_id)


class Board:
    """The board's typed async methods, over the daemon's journal. ``clock``: wall time for
    the journal's records; ``grace``: how long a task is kept for a dead owner's next launch
    (the lease methods take ``now`` and ``grace`` from their caller)."""

    def __init__(self, journal: AsyncStore, *, on_gated: Gated,
                 on_change: Callable[[str | None], None], reviewer: Callable[[str], str | None],
                 on_told: Callable[[str, str], None],
                 clock: Callable[[], float] = time.time, grace: float = DEFAULT_GRACE,
                 gate: Gate = no_gate,
                 on_checked: Callable[[CheckRan], None] = lambda ran: None) -> None:
        """``on_checked``: a completed task's gate ran (telemetry: a span of the turn)."""
        self._journal = journal
        self._on_checked = on_checked
        self.clock = clock
        self.grace = grace
        self.gate = gate
        self._on_gated = on_gated
        self._on_change = on_change
        self.reviewer = reviewer  # who may settle a review, by team (None: the operator)
        self._on_told = on_told  # a notice's message journaled for (team, member): poke it

    def changed(self, team: str | None) -> None:
        """Tell ``on_change`` of a write to ``team``'s board (None: any team's)."""
        self._on_change(team)

    def _changed(self, doc: TaskDoc) -> TaskDoc:
        self._on_change(doc.team)
        return doc

    async def create(self, team: str, title: str, body: str = "", *, role: str | None = None,
                     priority: int = 0, blocked_by: Sequence[int] = (), created_by: Actor,
                     assignee: Assignee | None = None, check: str | None = None,
                     then: Callable[[sqlite3.Connection, TaskDoc], None] | None = None
                     ) -> TaskDoc:
        """A new task; ``then``: the caller's own rows about it, in the same transaction."""
        if len(set(blocked_by)) > MAX_TASK_DEPS:
            raise TaskInvalid(f"a task waits on at most {MAX_TASK_DEPS} tasks")
        task = NewTask(team, check_title(title), check_text(body, "body"), role, priority,
                       tuple(dict.fromkeys(blocked_by)),
                       None if check is None else
                       check_title(check, "check", limit_chars=_CHECK_CHARS))
        return self._changed(await self._journal.run(
            board_writes.create, task, created_by, self.clock(), assignee, self.grace, then))

    async def rewrite(self, task_id: int, *, body: str, note: str, notice: Notice,
                      then: Callable[[sqlite3.Connection], None]) -> TaskDoc:
        """The task's body replaced by teamctl (its issue was edited: docs/forge.md), its
        owner told (``notice``, once per source id) and the caller's rows (``then``) — one
        transaction."""
        now, found = self.clock(), []
        body, checked = check_text(body, "body"), check_text(note, "note")

        def write(db: sqlite3.Connection) -> Told | None:
            found.append(board_writes.rewrite(db, task_id, body=body, note=checked, now=now))
            then(db)
            return _sendable(board_notices.tell(db, task_id, notice, now))

        self._poke(await self._journal.add_message_after(write, _message))
        return self._changed(found[0])

    async def get(self, task_id: int, team: str | None = None) -> TaskShowDoc:
        return await self._journal.run(board_notices.shown, task_id, team)

    async def held(self, team: str) -> dict[str, str]:
        """Each member's current tasks, by member (``teamctl status``)."""
        return await self._journal.run(board_journal.held, team)

    async def listing(self, team: str, *, state: str | None = None, owner: str | None = None,
                   role: str | None = None, after_id: int = 0, limit: int = 100
                   ) -> TaskListDoc:
        """One page (id order) of the team's tasks; ``state``: a status, ready or blocked."""
        return await self._journal.run(board_journal.listing, team, state=state, owner=owner,
                                       role=role, after_id=after_id, limit=limit)

    async def claim(self, team: str, member: str, *, epoch: int, roles: Collection[str] = (),
                    max_tasks: int = 1, task_id: int | None = None) -> TaskDoc:
        who = Claimant(team, member, epoch, frozenset(roles), max_tasks)
        doc = self._changed(await self._journal.run(board_claims.claim, who, task_id,
                                                    self.clock()))
        await self.deliver_waiting(doc)
        return doc

    async def assign(self, task_id: int, assignee: Assignee, *, by: Actor,
                     team: str | None = None) -> TaskDoc:
        doc = self._changed(await self._journal.run(
            board_writes.assign, task_id, team, assignee, by, self.clock(), self.grace))
        await self.deliver_waiting(doc)
        return doc

    async def deps(self, task_id: int, *, by: Actor, add: Sequence[int] = (),
                   remove: Sequence[int] = (), team: str | None = None) -> TaskDoc:
        return self._changed(await self._journal.run(
            board_writes.change_deps, task_id, team, by, tuple(dict.fromkeys(add)),
            tuple(remove), self.clock()))

    async def update(self, task_id: int, *, by: Actor, note: str,
                     team: str | None = None) -> TaskDoc:
        return self._changed(await self._journal.run(
            board_writes.update, task_id, team, by, check_text(note, "note"), self.clock()))

    async def release(self, task_id: int, *, by: Actor, reason: str | None = None,
                      team: str | None = None) -> TaskDoc:
        reason = None if reason is None else check_text(reason, "reason")
        return self._changed(await self._journal.run(
            board_writes.release, task_id, team, by, reason, self.clock()))

    async def complete(self, task_id: int, *, by: Actor, summary: str,
                       evidence: str | None = None, team: str | None = None) -> TaskDoc:
        """The owner says it is done: the gate decides where it goes (done, review, or back
        in progress with the gate's output). The gate runs only for the owner (or the
        operator, a lead), outside any transaction; the transition re-checks the owner."""
        summary = check_text(summary, "summary")
        evidence = None if evidence is None else check_text(evidence, "evidence")
        task = await self._journal.run(board_writes.completable, task_id, team, by)
        started = self.clock()
        verdict = await self.gate(task.model_copy(update={"summary": summary,
                                                          "evidence": evidence}))
        self._on_checked(CheckRan(task.team, task_id, "gate", started, self.clock(),
                                  "failed" if verdict.status == "in_progress" else "passed",
                                  None if by == OPERATOR else by.name))
        if by.name != task.owner and verdict.status == "done":  # the owner is told it is
            verdict = replace(verdict, by=by.name)  # done: it may still be working on it
        done = await self._finish(task_id, team, by, verdict.status, verdict.note,
                                  summary=summary, evidence=evidence)
        await self._on_gated(done, verdict)
        return done

    async def review(self, task_id: int, *, by: Actor, approve: bool, note: str,
                     team: str | None = None) -> TaskDoc:
        """The reviewer's (or the operator's) verdict on a task in review: approved → done,
        rejected → back in progress under its owner, who is told why (``on_gated``)."""
        note = check_text(note, "note")
        row = await self.get(task_id, team)
        reviewer = self.reviewer(row.task.team)
        done = self._changed(await self._journal.run(
            board_review.review, task_id, team, by, reviewer, approve=approve, note=note,
            now=self.clock()))
        await self._on_gated(done, GateResult("done" if approve else "in_progress",
                                              f"{'approved' if approve else 'rejected'} "
                                              f"by {by.name}: {note}", by=by.name))
        return done

    async def send_back(self, task_id: int, *, fail: bool, epoch: int | None,
                        note: str, notice: Notice | None = None) -> TaskDoc:
        """A done task that did not land: back in progress under its owner (``epoch``: its
        launch now), or (``fail``) failed for the operator (docs/land.md); ``notice``: told
        to its owner in the same transaction (once per source id)."""
        now, found = self.clock(), []
        checked = check_text(note, "note")

        def write(db: sqlite3.Connection) -> Told | None:
            found.append(board_writes.reopen(
                db, task_id, to="failed" if fail else "in_progress", epoch=epoch,
                note=checked, now=now, grace=self.grace))
            return None if notice is None else _sendable(
                board_notices.tell(db, task_id, notice, now))

        self._poke(await self._journal.add_message_after(write, _message))
        return self._changed(found[0])

    async def tell(self, task_id: int, notice: Notice) -> Told | None:
        """An event about the task told to its current owner (or ``notice.to``) and journaled
        against the task, in one transaction with its message; None when it was told before
        (its source id) or waits for the task's next owner."""
        now = self.clock()
        told = await self._journal.add_message_after(
            lambda db: _sendable(board_notices.tell(db, task_id, notice, now)), _message)
        self._poke(told)
        return told

    async def known(self, source: str) -> bool:
        """Whether the event with this source id was told (or waits for an owner) already."""
        return await self._journal.run(board_notices.known, source)

    async def deliver_waiting(self, task: TaskDoc) -> Told | None:
        """What came about ``task`` while nobody held it, told to its owner now."""
        if task.owner is None:
            return None
        now = self.clock()
        told = await self._journal.add_message_after(
            lambda db: board_notices.waiting(db, task.id, now), _message)
        self._poke(told)
        return told

    def _poke(self, told: Told | None) -> None:
        if told is not None and told.member is not None:
            self._on_told(told.team, told.member)
            self._on_change(told.team)

    async def note(self, task_id: int, team: str, *, kind: str, note: str) -> None:
        """One of teamctl's events in the task's lifetime (``task show``)."""
        await self._journal.run(board_writes.note, task_id, kind=kind,
                                note=check_text(note, "note"), now=self.clock())
        self._on_change(team)

    async def fail(self, task_id: int, *, by: Actor, reason: str,
                   team: str | None = None) -> TaskDoc:
        return await self._finish(task_id, team, by, "failed", check_text(reason, "reason"))

    async def cancel(self, task_id: int, *, by: Actor, reason: str | None = None,
                     team: str | None = None) -> TaskDoc:
        note = None if reason is None else check_text(reason, "reason")
        return await self._finish(task_id, team, by, "cancelled", note)

    async def _finish(self, task_id: int, team: str | None, by: Actor, status: Outcome,
                      note: str | None, **texts: str | None) -> TaskDoc:
        return self._changed(await self._journal.run(
            board_writes.finish, task_id, team, by, status=status, note=note, now=self.clock(),
            **texts))

    # -- leases: the supervisor's lifecycle calls these (board_leases) ------------------------

    async def owner_exited(self, team: str, member: str, epoch: int, *, grace: float,
                           now: float) -> list[int]:
        return await self._journal.run(board_claims.owner_exited, team, member, epoch,
                                       grace=grace, now=now)

    async def owner_started(self, team: str, member: str, epoch: int, *,
                            now: float) -> list[int]:
        adopted = await self._journal.run(board_claims.owner_started, team, member, epoch,
                                          now=now)
        self._on_change(team)  # it may have released a lapsed task of the team
        return adopted

    async def expire(self, now: float) -> list[int]:
        """Release the tasks whose lease ran out (a read first: nothing due, nothing
        written)."""
        if not await self._journal.run(board_claims.lease_due, now):
            return []
        lapsed = await self._journal.run(board_claims.expire, now)
        if lapsed:
            self._on_change(None)
        return lapsed

    async def next_lease(self) -> float | None:
        """When the first lease runs out (None: none is held)."""
        return await self._journal.run(board_claims.next_lease)

    async def daemon_started(self, *, now: float, grace: float) -> list[int]:
        return await self._journal.run(board_claims.daemon_started, grace=grace, now=now)
