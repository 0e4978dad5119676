"""What needs the operator now, as one list (docs/notify.md): the pending permission requests
and questions (``Approvals``), members that are fatal (the supervisor gave up) or held by a
budget, and board tasks in review that the operator reviews.

The live view's "Needs you" panel reads the same sources (pending approvals, members whose
launch is fatal or whose queue is held, tasks in review); the notifier reads them through
``gather`` and publishes what is new. Every text here has passed the redactor (the
documents are redacted as the control socket answers them); the question's text and a task's
body are kept apart (``private``) — they are sent only with ``include_text = true``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.limits import MAX_PAGE_ROWS
from orchestrator.redaction import redact, redact_value

if TYPE_CHECKING:
    from orchestrator.daemon.approvals import Approvals
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.notify_tokens import Decision
    from orchestrator.daemon.teams import Teams
    from orchestrator.notify_config import Event
    from orchestrator.wire import ApprovalDoc, MemberStatus, TaskDoc

__all__ = ["MAX_ITEMS", "NeedsYou", "gather"]

MAX_ITEMS = 5000  # items read in one pass, at most (the approvals queue holds ≤ 100 a member)
_SHORT = 200


@dataclass(frozen=True)
class NeedsYou:
    """One thing that waits on the operator. ``key``: stable while it waits (a new fatal
    launch, a new hold is a new key); ``item``: what an action names (``team/apv_…``,
    ``team/T12``); ``decisions``: what a phone may answer (none: an alert only)."""

    key: str
    kind: Event
    team: str
    title: str
    detail: str
    private: str = ""
    item: str = ""
    decisions: tuple[Decision, ...] = ()


def _short(text: str, limit: int = _SHORT) -> str:
    text = " ".join(redact(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _approval(row: ApprovalDoc) -> NeedsYou:
    item = f"{row.team}/{row.id}"
    if row.kind == "question":
        return NeedsYou(item, "question", row.team, f"{row.member} asks a question",
                        f"{row.team}/{row.member} ({row.runtime}) waits for your answer",
                        private=_short(" | ".join(row.questions) or row.summary, 1000),
                        item=item, decisions=("answer", "deny"))
    return NeedsYou(item, "approval", row.team, f"{row.member} asks: {_short(row.tool, 60)}",
                    f"{row.team}/{row.member} ({row.runtime}): {_short(row.summary)}",
                    item=item, decisions=("approve", "deny"))


def _member(team: str, member: MemberStatus) -> NeedsYou | None:
    if member.launch == "fatal":
        return NeedsYou(f"{team}/fatal/{member.name}/{member.restarts}", "fatal", team,
                        f"{member.name} stopped (fatal)",
                        f"{team}/{member.name}: {_short(member.error or 'it kept failing')}; "
                        f"'teamctl restart {member.name}' once fixed")
    if member.hold and "budget" in member.hold:
        digest = hashlib.sha256(member.hold.encode()).hexdigest()[:8]
        return NeedsYou(f"{team}/budget/{member.name}/{digest}", "budget", team,
                        f"{member.name} is paused: budget",
                        f"{team}/{member.name}: {_short(member.hold)}, {member.queued} queued; "
                        f"'teamctl budget {member.name} --add USD'")
    return None


def _review(team: str, task: TaskDoc) -> NeedsYou:
    item = f"{team}/T{task.id}"
    return NeedsYou(item, "review", team, f"T{task.id} waits for your review",
                    f"{team}: T{task.id} {_short(task.title, 120)} (by {task.owner or '-'})",
                    private=_short(task.summary or task.body, 1000), item=item,
                    decisions=("approve", "deny"))


async def _approvals(approvals: Approvals, team: str) -> list[NeedsYou]:
    found: list[NeedsYou] = []
    while len(found) < MAX_ITEMS:
        page = await approvals.query(team, limit=MAX_PAGE_ROWS, offset=len(found))
        found += [_approval(r) for r in page.approvals]
        if not page.approvals or len(found) >= page.total:
            break
    return found


async def _reviews(board: Board, team: str) -> list[NeedsYou]:
    if board.reviewer(team) not in (None, "operator"):
        return []  # a member reviews this team's tasks
    found: list[NeedsYou] = []
    after = 0
    while len(found) < MAX_ITEMS:
        page = await board.listing(team, state="review", after_id=after, limit=MAX_PAGE_ROWS)
        found += [_review(team, t) for t in page.tasks]
        if page.next_after is None:
            break
        after = page.next_after
    return found


async def gather(team: str, *, teams: Teams, approvals: Approvals,
                 board: Board | None) -> list[NeedsYou]:
    """What needs the operator in ``team`` now, oldest approval first (at most MAX_ITEMS)."""
    found = await _approvals(approvals, team)
    doc = await teams.status(team)
    status = type(doc).model_validate(redact_value(doc.model_dump(mode="json")))
    for shown in status.teams:
        found += [i for m in shown.members if (i := _member(team, m)) is not None]
    if board is not None:
        found += await _reviews(board, team)
    return found[:MAX_ITEMS]
