"""What needs the operator now (docs/notify.md), read in one place for the live view's "Needs
you" panel and the notifier: the pending permission requests and questions (``Approvals``),
members that are fatal or in backoff (the supervisor gave up, or waits to restart them) or
held (a budget, a stop; an account's window spent or past its reserve: one item per account
and window), and board tasks in review that the operator reviews.

``waiting`` reads the sources once, redacted as the control socket answers them; the page
renders that (``web.app``), and ``gather`` turns it into the notifier's items — a fatal
member, a budget hold, a question, a request, a review (a backoff or another hold is shown on
the page, never pushed). The question's text and a task's body are kept apart (``private``):
they are sent only with ``include_text = true``.

What an item says is shown visibly and never cut silently (orchestrator/visible.py): a
request's command is its first part, ``… N more characters`` and the short sha256 of the exact
request; the whole one is in the live view (the notification's link) and in ``teamctl approvals
ID --full``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from orchestrator.limits import APPROVAL_SHA256_SHOWN, APPROVAL_SHOWN_CHARS, MAX_PAGE_ROWS
from orchestrator.redaction import redact, redact_value
from orchestrator.visible import clipped

if TYPE_CHECKING:
    from pydantic import BaseModel

    from orchestrator.daemon.approvals import Approvals
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.notify._tokens import Decision
    from orchestrator.daemon.teams import Teams
    from orchestrator.notify_config import Event
    from orchestrator.protocol.approvals import ApprovalDoc
    from orchestrator.protocol.board import TaskDoc
    from orchestrator.protocol.land import QueueEntryDoc
    from orchestrator.protocol.teams import MemberStatus, PullDoc

    _Doc = TypeVar("_Doc", bound=BaseModel)

__all__ = ["MAX_ITEMS", "Landings", "NeedsYou", "Pulls", "Waiting", "gather", "waiting"]

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
    """``text`` redacted, on one line, shown visibly; past ``limit`` characters its first
    part and ``… N more characters``."""
    return clipped(redact(text), limit)


def _approval(row: ApprovalDoc) -> NeedsYou:
    item = f"{row.team}/{row.id}"
    if row.kind == "question":
        return NeedsYou(item, "question", row.team, f"{row.member} asks a question",
                        f"{row.team}/{row.member} ({row.runtime}) waits for your answer",
                        private=_short(" | ".join(row.questions) or row.summary, 1000),
                        item=item, decisions=("answer", "deny"))
    sha = f" (sha256 {row.sha256[:APPROVAL_SHA256_SHOWN]})" if row.sha256 else ""
    whole = (f"\nthe whole request: 'teamctl approvals {row.id} --full' or the live view"
             if len(row.summary) > APPROVAL_SHOWN_CHARS else "")
    return NeedsYou(item, "approval", row.team, f"{row.member} asks: {_short(row.tool, 60)}",
                    f"{row.team}/{row.member} ({row.runtime}): "
                    f"{_short(row.summary, APPROVAL_SHOWN_CHARS)}{sha}{whole}",
                    item=item, decisions=("approve", "deny"))


def _quota(team: str, member: MemberStatus) -> NeedsYou | None:
    """An account held or past its reserve (docs/costs.md, "Quota windows"): one item per
    account per window — every member of it says the same, and its key is the account and
    the window's reset."""
    hold = member.hold or ""
    if member.account is None or not hold.startswith(("held: ", "paused: ")):
        return None
    until = hold.rpartition(" until ")[2][:5] if " until " in hold else "-"
    title = (f"{member.account} is held: its window is spent" if hold.startswith("held: ")
             else f"{member.account} is past its reserve")
    return NeedsYou(f"{team}/quota/{member.account}/{until}", "quota", team, title,
                    f"{team}: {_short(hold)}; its members resume by themselves at the reset "
                    "('teamctl accounts')")


def _member(team: str, member: MemberStatus) -> NeedsYou | None:
    if member.launch != "fatal" and (quota := _quota(team, member)) is not None:
        return quota
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


def _landing(team: str, entry: QueueEntryDoc) -> NeedsYou:
    """A task the merge queue gave up on (docs/land.md): the operator sends it back or
    cancels it."""
    task_ref = f"T{entry.task}"
    return NeedsYou(f"{team}/land/{entry.id}", "integrate", team, f"{task_ref} could not land",
                    f"{team}: {task_ref} {_short(entry.title, 120)} by {entry.owner} did not "
                    f"land on {entry.branch} (attempt {entry.attempt}): "
                    f"{_short(entry.note or 'see teamctl queue', 300)}; 'teamctl task assign "
                    f"{task_ref} {entry.owner}' sends it back, 'teamctl task cancel {task_ref}' "
                    "drops it", item=f"{team}/{task_ref}")


def _pull(team: str, pull: PullDoc) -> NeedsYou:
    """A pull request whose CI failed past ``ci_retries``, or whose push was refused
    (docs/forge.md): the operator decides."""
    task_ref = f"T{pull.task}"
    what = f"#{pull.number}" if pull.number is not None else pull.branch
    return NeedsYou(f"{team}/pull/{pull.task}/{pull.state}/{pull.failed_heads}", "integrate",
                    team, f"{task_ref}'s pull request needs you",
                    f"{team}: {task_ref} pull request {_short(what, 120)}: "
                    f"{_short(pull.note or 'see teamctl status', 300)}",
                    item=f"{team}/{task_ref}")


class Pulls(Protocol):
    """The forge's pull requests, as needs-you reads them (daemon/forge)."""

    async def needs_you(self, team: str) -> list[PullDoc]:
        ...


class Landings(Protocol):
    """The merge queue, as needs-you reads it (daemon/land)."""

    async def needs_you(self, team: str) -> list[QueueEntryDoc]:
        ...


@dataclass(frozen=True)
class Waiting:
    """The sources as read once, redacted: the pending requests, every member of the teams read
    (with its team), and the tasks in review the operator reviews."""

    approvals: list[ApprovalDoc]
    members: list[tuple[str, MemberStatus]]
    reviews: list[tuple[str, TaskDoc]] = field(default_factory=list)
    landings: list[tuple[str, QueueEntryDoc]] = field(default_factory=list)
    pulls: list[tuple[str, PullDoc]] = field(default_factory=list)

    @property
    def alarms(self) -> list[tuple[str, MemberStatus]]:
        """Members that need the operator: fatal, in backoff, or held."""
        return [(team, m) for team, m in self.members
                if m.launch in ("fatal", "backoff") or m.hold]


def _redacted(doc: _Doc) -> _Doc:
    """``doc`` as the control socket would answer it: through the one redactor."""
    return type(doc).model_validate(redact_value(doc.model_dump(mode="json")))


async def _approvals(approvals: Approvals, team: str | None, most: int) -> list[ApprovalDoc]:
    found: list[ApprovalDoc] = []
    while len(found) < most:
        page = _redacted(await approvals.query(
            team=team, limit=min(MAX_PAGE_ROWS, most - len(found)), offset=len(found)))
        found += page.approvals
        if not page.approvals or len(found) >= page.total:
            break
    return found


async def _reviews(board: Board, team: str) -> list[tuple[str, TaskDoc]]:
    if board.reviewer(team) not in (None, "operator"):
        return []  # a member reviews this team's tasks
    found: list[tuple[str, TaskDoc]] = []
    after = 0
    while len(found) < MAX_ITEMS:
        page = _redacted(await board.listing(team, state="review", after_id=after,
                                             limit=MAX_PAGE_ROWS))
        found += [(team, t) for t in page.tasks]
        if page.next_after is None:
            break
        after = page.next_after
    return found


async def waiting(team: str | None, *, teams: Teams, approvals: Approvals,
                  board: Board | None, most: int = MAX_ITEMS,
                  land: Landings | None = None, pulls: Pulls | None = None) -> Waiting:
    """What waits on the operator in ``team`` (None: every team): at most ``most`` requests,
    oldest first; the reviews only with a ``board``, the tasks that could not land only with
    the merge queue (``land``), the pull requests only with the forge (``pulls``)."""
    found = await _approvals(approvals, team, most)
    status = _redacted(await teams.status(team))
    members = [(shown.name, m) for shown in status.teams for m in shown.members]
    reviews: list[tuple[str, TaskDoc]] = []
    landings: list[tuple[str, QueueEntryDoc]] = []
    waiting_pulls: list[tuple[str, PullDoc]] = []
    for name in [team] if team is not None else [t.name for t in status.teams]:
        if board is not None:
            reviews += await _reviews(board, name)
        if land is not None:
            landings += [(name, _redacted(e)) for e in await land.needs_you(name)]
        if pulls is not None:
            waiting_pulls += [(name, _redacted(p)) for p in await pulls.needs_you(name)]
    return Waiting(found, members, reviews, landings, waiting_pulls)


def items(now: Waiting) -> list[NeedsYou]:
    """The notifier's items of what waits (at most MAX_ITEMS)."""
    found = [_approval(row) for row in now.approvals]
    members = {i.key: i for team, m in now.alarms if (i := _member(team, m)) is not None}
    found += members.values()  # an account's members share one item
    found += [_review(team, task) for team, task in now.reviews]
    found += [_landing(team, entry) for team, entry in now.landings]
    found += [_pull(team, pull) for team, pull in now.pulls]
    return found[:MAX_ITEMS]


async def gather(team: str, *, teams: Teams, approvals: Approvals,
                 board: Board | None, land: Landings | None = None,
                 pulls: Pulls | None = None) -> list[NeedsYou]:
    """What needs the operator in ``team`` now, oldest approval first (at most MAX_ITEMS)."""
    return items(await waiting(team, teams=teams, approvals=approvals, board=board,
                               land=land, pulls=pulls))
