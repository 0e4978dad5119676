"""The team's board (docs/board.md): tasks with dependencies, claimed in one transaction, held
by a member's launch and released when it does not come back.

``Board`` is the one way in — the operator's control API now, the members' MCP tools and the
supervisor's lifecycle next — typed async methods over the journal's writer
(``board_journal``: tables and reads; ``board_writes``: create, dependencies, transitions;
``board_claims``: claims and leases). Text is checked here, whoever sends it: a title is one
line of at most 200 characters, a body (summary, evidence, note) at most 64 KiB, and neither
holds control characters (a tab and, outside the title, a newline aside).

The gate seam: ``complete`` asks ``gate`` (a coroutine given the task) where a completed task
goes — ``done`` (the default: no gate), ``review`` (a reviewer or the operator decides) or
``in_progress`` (the check failed; its output is the note sent back to the owner); then
``on_gated`` hears where it went (the daemon tells the owner or the reviewer: ``board_gate``).
``review`` settles a task in review (``reviewer``: who may, by team). ``on_change(team)``
hears every write (None: any team — a lapse): the change feed, and idle claimers looked at
again (``board_offers``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from orchestrator.daemon import board_claims, board_journal, board_review, board_writes
from orchestrator.daemon.board_claims import Claimant
from orchestrator.daemon.board_writes import (
    OPERATOR,
    Actor,
    Assignee,
    NewTask,
    Outcome,
    Verdict,
)
from orchestrator.errors import TaskInvalid
from orchestrator.limits import MAX_TASK_DEPS, MAX_TASK_TEXT_BYTES, MAX_TASK_TITLE_CHARS

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from orchestrator.daemon.journal import AsyncJournal
    from orchestrator.wire import TaskDoc, TaskListDoc, TaskShowDoc

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


class Board:
    """The board's typed async methods, over the daemon's journal. ``clock``: wall time for
    the journal's records; ``grace``: how long a task is kept for a dead owner's next launch
    (the lease methods take ``now`` and ``grace`` from their caller)."""

    def __init__(self, journal: AsyncJournal, *, clock: Callable[[], float] = time.time,
                 grace: float = DEFAULT_GRACE, gate: Gate = no_gate) -> None:
        self._journal = journal
        self.clock = clock
        self.grace = grace
        self.gate = gate
        self.on_gated: Gated | None = None
        self.on_change: Callable[[str | None], None] | None = None
        self.reviewer: Callable[[str], str | None] = lambda team: None

    def _changed(self, doc: TaskDoc) -> TaskDoc:
        if self.on_change is not None:
            self.on_change(doc.team)
        return doc

    async def create(self, team: str, title: str, body: str = "", *, role: str | None = None,
                     priority: int = 0, blocked_by: Sequence[int] = (), created_by: Actor,
                     assignee: Assignee | None = None, check: str | None = None) -> TaskDoc:
        if len(set(blocked_by)) > MAX_TASK_DEPS:
            raise TaskInvalid(f"a task waits on at most {MAX_TASK_DEPS} tasks")
        task = NewTask(team, check_title(title), check_text(body, "body"), role, priority,
                       tuple(dict.fromkeys(blocked_by)),
                       None if check is None else
                       check_title(check, "check", limit_chars=_CHECK_CHARS))
        return self._changed(await self._journal.run(
            board_writes.create, task, created_by, self.clock(), assignee, self.grace))

    async def get(self, task_id: int, team: str | None = None) -> TaskShowDoc:
        return await self._journal.run(board_journal.details, task_id, team)

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
        return self._changed(await self._journal.run(board_claims.claim, who, task_id,
                                                     self.clock()))

    async def assign(self, task_id: int, assignee: Assignee, *, by: Actor,
                     team: str | None = None) -> TaskDoc:
        return self._changed(await self._journal.run(
            board_writes.assign, task_id, team, assignee, by, self.clock(), self.grace))

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
        verdict = await self.gate(task.model_copy(update={"summary": summary,
                                                          "evidence": evidence}))
        if by.name != task.owner and verdict.status == "done":  # the owner is told it is
            verdict = replace(verdict, by=by.name)  # done: it may still be working on it
        done = await self._finish(task_id, team, by, verdict.status, verdict.note,
                                  summary=summary, evidence=evidence)
        if self.on_gated is not None:
            await self.on_gated(done, verdict)
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
        if self.on_gated is not None:
            await self.on_gated(done, GateResult("done" if approve else "in_progress",
                                                 f"{'approved' if approve else 'rejected'} "
                                                 f"by {by.name}: {note}", by=by.name))
        return done

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
        if self.on_change is not None:  # it may have released a lapsed task of the team
            self.on_change(team)
        return adopted

    async def expire(self, now: float) -> list[int]:
        """Release the tasks whose lease ran out (a read first: nothing due, nothing
        written)."""
        if not await self._journal.run(board_claims.lease_due, now):
            return []
        lapsed = await self._journal.run(board_claims.expire, now)
        if lapsed and self.on_change is not None:
            self.on_change(None)
        return lapsed

    async def next_lease(self) -> float | None:
        """When the first lease runs out (None: none is held)."""
        return await self._journal.run(board_claims.next_lease)

    async def daemon_started(self, *, now: float, grace: float) -> list[int]:
        return await self._journal.run(board_claims.daemon_started, grace=grace, now=now)
