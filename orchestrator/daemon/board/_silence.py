"""No silent completions (docs/board.md, "No silent completions"): a member's turn that was
handed a task — teamctl's message about a task it holds (the hand-over, a check's result, the
merge queue's) — and ended without a word on the board (no ``task_update``, ``task_complete``
or ``task_release`` by it since that message came) has its final text forwarded to whoever
waits on the task: journaled in the task's lifetime as ``auto_forwarded`` (the operator reads
it in ``task show`` and the live view) and, when a teammate created the task, told to that
teammate (a task the operator or teamctl made — the forge's intake, a merge queue's — tells
nobody more). The member is reminded once that it holds the task; a member whose turn after the
reminder is silent too is marked (``reminder_ignored``): ``teamctl status`` and the live view
show it beside its task until it speaks on the board again.

A teammate's question needs nothing here: its answer — the turn's final text — is routed back
to the asker as the reply (daemon/router.py), whatever the turn did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from orchestrator.daemon.board._journal import add_event, load
from orchestrator.daemon.board._notices import Notice
from orchestrator.daemon.board._writes import OPERATOR, TEAMCTL
from orchestrator.errors import TeamctlError

if TYPE_CHECKING:
    from orchestrator.daemon.board._service import Board
    from orchestrator.daemon.journal import AsyncJournal, Journal
    from orchestrator.daemon.queue import Delivery

__all__ = ["FORWARDED_CHARS", "Silence", "silent_turn"]

log = structlog.get_logger("teamctl.board")

FORWARDED_CHARS = 4000  # of the turn's final text, in the event and the message


def silent_turn(journal: Journal, task_id: int, member: str, since: float) -> bool:
    """Whether ``task_id`` is in progress under ``member`` and it said nothing on the board
    (no event of its own) since ``since``."""
    db = journal.connection
    row = load(db, task_id, None)
    if row["status"] != "in_progress" or row["owner"] != member:
        return False
    spoke = db.execute("SELECT 1 FROM task_events WHERE task = ? AND actor = ? AND at >= ? "
                       "LIMIT 1", (task_id, member, since)).fetchone()
    return spoke is None


def _was_reminder(journal: Journal, message_id: str) -> bool:
    return journal.connection.execute(
        "SELECT 1 FROM task_notices WHERE message_id = ? AND kind = 'reminder'",
        (message_id,)).fetchone() is not None


def _mark(journal: Journal, task_id: int, kind: str, note: str, now: float) -> None:
    """teamctl's event in the task's lifetime (never the member's: it did not speak)."""
    with journal.transaction() as db:
        add_event(db, task_id, now, "teamctl", kind, note)


class Silence:
    """``on_answered`` (the mailbox's): a silent turn on a held task forwarded, the member
    reminded once, an ignored reminder marked."""

    def __init__(self, board: Board, journal: AsyncJournal) -> None:
        self._board = board
        self._journal = journal

    async def on_answered(self, delivery: Delivery, reply: str) -> None:
        origin = delivery.origin
        if origin.task_id is None or origin.sender is not None or origin.kind != "message":
            return  # not teamctl's (or the operator's) words about a task
        try:
            await self._look(delivery, origin.task_id, reply)
        except TeamctlError as exc:  # the task went meanwhile: nothing to forward
            log.warning("silence_not_checked", team=delivery.team, task=origin.task_id,
                        code=exc.code)

    async def _look(self, delivery: Delivery, task_id: int, reply: str) -> None:
        board, journal, member = self._board, self._journal, delivery.member
        since = delivery.created_at or 0.0
        if not await journal.run(silent_turn, task_id, member, since):
            return
        text = reply.strip()[:FORWARDED_CHARS] or "(its turn ended with no text)"
        shown = await board.get(task_id, delivery.team)
        await journal.run(_mark, task_id, "auto_forwarded", f"{member}'s turn: {text}",
                          board.clock())
        log.info("turn_auto_forwarded", team=delivery.team, member=member, task=task_id,
                 message_id=delivery.message_id)
        creator = shown.task.created_by
        if creator not in (OPERATOR.name, TEAMCTL.name, member):  # a teammate made it
            await board.tell(task_id, Notice(
                f"forward:{delivery.message_id}", "auto_forwarded",
                f"teamctl: auto-forwarded from {member}'s turn on task T{task_id} "
                f"({shown.task.title}), which ended without a task_update: {text}",
                to=creator))
        if await journal.run(_was_reminder, delivery.message_id):
            await journal.run(_mark, task_id, "reminder_ignored", f"{member}'s turn after the "
                              "reminder said nothing on the board", board.clock())
            log.warning("task_reminder_ignored", team=delivery.team, member=member,
                        task=task_id)
            board.changed(delivery.team)
            return
        await board.tell(task_id, Notice(
            f"reminder:T{task_id}:{member}", "reminder",
            f"teamctl: you hold task T{task_id} ({shown.task.title}), and your last turn on "
            "it ended without a word on the board. Say where it stands with "
            f"task_update(id={task_id}, note=...), finish it with task_complete(id={task_id}, "
            f"summary=...), or give it back with task_release(id={task_id}, reason=...)."))
