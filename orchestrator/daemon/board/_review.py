"""A task in review, settled: the team's reviewer (``[board] review_by``) or the operator
approves it (→ done) or rejects it (→ in progress again under its owner, with the reason).
One transaction that re-reads the task; the owner never reviews its own task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.daemon.board._journal import add_event, current, load
from orchestrator.daemon.board._writes import OPERATOR, refuse_unless

if TYPE_CHECKING:
    from orchestrator.daemon.board._writes import Actor
    from orchestrator.daemon.journal import Journal
    from orchestrator.protocol.board import TaskDoc

__all__ = ["review"]


def review(journal: Journal, task_id: int, team: str | None, by: Actor,
           reviewer: str | None, *, approve: bool, note: str, now: float) -> TaskDoc:
    """Approve (done) or reject (in progress) the task in review; only ``reviewer`` or the
    operator may, never its owner."""
    with journal.transaction() as db:
        row = load(db, task_id, team)
        refuse_unless(row["status"] == "review", "task_state",
                      f"T{task_id} is {row['status']}: only a task in review is reviewed",
                      task_id)
        allowed = by == OPERATOR or (by.name == reviewer and by.name != row["owner"])
        who = "the operator" if reviewer in (None, "operator") else f"{reviewer} or the operator"
        refuse_unless(allowed, "task_forbidden",
                      f"T{task_id} is reviewed by {who}, not {by.name}", task_id,
                      reviewer=reviewer)
        status = "done" if approve else "in_progress"
        db.execute("UPDATE tasks SET status = ?, updated_at = ? WHERE id = ?",
                   (status, now, task_id))
        add_event(db, task_id, now, by.name, "approved" if approve else "rejected", note)
        return current(db, task_id)
