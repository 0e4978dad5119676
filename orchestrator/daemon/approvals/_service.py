"""What waits on the operator: the ``ask`` profile's permission requests and questions.

One durable queue in the journal (table ``approvals``: ``_journal``).
A member's runtime asks through its launch's ``MemberApprover`` (the contracts' ``Approver``):
the request is journaled ``pending`` — its summary redacted and whole, with the sha256 of the
exact request the runtime asked — and the runtime waits as long as it takes; no timer approves
or denies anything. ``teamctl approve|deny|answer`` settles it
through ``Approvals.decide``, which hands the answer to the waiting runtime and then waits
(bounded) for the runtime to confirm it applied it.

What the operator reads is what runs: the summary is never cut (a request too long to be read
whole — over ``MAX_APPROVAL_TEXT_CHARS`` — is denied at once, with the reason), and a decision
applies to one request only. Its id is made for one ``ask`` of one runtime request; the waiter
the answer goes to holds that request (frozen), and its row's columns are only ever inserted;
``decide`` checks the request it answers still has the sha256 journaled for the id, and the
sha256 the operator read when one is given (``--sha256``; the live view sends the one it
showed) — a mismatch applies nothing (``approval_mismatch``).

A request is only ever answered by the process that asked: when that process goes (a member
crash, a recycle, a stop) its pending requests become ``expired``, and so does everything
pending when the daemon starts. The turn is delivered again as usual, its runtime asks again,
and a new row appears — a stale answer is never applied to a new request.

Rules: the team file's ``allow`` patterns and what ``approve --always`` kept (table
``_kept_rules``, per member, revocable) approve a matching request at once, recorded with
``by: rule``. What a rule matches — argv for a command, a path inside the member's worktree for
anything else — is ``_rules``; what is kept, and its table, ``_kept_rules``.

The journal may refuse a write (a full disk): a request's row is retried for up to
``WRITE_DEADLINE`` seconds (``TEAMCTL_APPROVAL_WRITE_DEADLINE``), then that one request is
denied with the reason — the member's runtime goes on, and asks again on its next turn.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.contracts import ApprovalAnswer
from orchestrator.daemon.approvals._journal import ApprovalJournal, expire_pending, flood_reason
from orchestrator.daemon.approvals._kept_rules import KeptRules
from orchestrator.daemon.approvals._rules import Rule, Target, kept_rule, parse_rule, target_of
from orchestrator.errors import (
    ApprovalExpired,
    ApprovalMismatch,
    ApprovalSettled,
    NotFound,
    StoreError,
    UsageError,
)
from orchestrator.ids import new_ulid
from orchestrator.limits import MAX_APPROVAL_TEXT_CHARS, MAX_PAGE_ROWS
from orchestrator.protocol.approvals import (
    ApprovalDoc,
    ApprovalsDoc,
    DecisionDoc,
    KeptRulesDoc,
    RulePreviewDoc,
)
from orchestrator.redaction import redact
from orchestrator.visible import clipped

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from orchestrator.contracts import ApprovalRequest
    from orchestrator.daemon.journal import AsyncJournal, Journal
    from orchestrator.protocol.approvals import ApprovalState

__all__ = ["Approvals", "MemberApprover", "Rule", "parse_rule", "request_sha256"]

log = structlog.get_logger("teamctl.approvals")

CONFIRM_WAIT = 10.0
LOGGED_CHARS = 500  # of a summary in the log line, then "… N more characters"
PAGE = MAX_PAGE_ROWS  # rows in one answer, at most
# how long a request's row waits for the journal before it is denied (a test shortens it
# with TEAMCTL_APPROVAL_WRITE_DEADLINE)
WRITE_DEADLINE = 30.0
WRITE_RETRY_FIRST, WRITE_RETRY_MAX = 0.05, 2.0


def _doc(row: Any) -> ApprovalDoc:
    return ApprovalDoc(
        id=row["id"], team=row["team"], member=row["member"], runtime=row["runtime"],
        kind=row["kind"], tool=row["tool"], summary=row["summary"],
        questions=json.loads(row["questions"]) if row["questions"] else [],
        message_id=row["message_id"], state=row["state"],
        answer=json.loads(row["answer"]) if row["answer"] else None, reason=row["reason"],
        asked_at=row["asked_at"], settled_at=row["settled_at"],
        confirmed_at=row["confirmed_at"], sha256=row["sha256"])


def request_sha256(request: ApprovalRequest) -> str:
    """The sha256 (hex) of the exact request: the runtime's own, as canonical JSON (keys
    sorted, no spaces, UTF-8) — a runtime can compute the same over what it sent — or, for
    a runtime that gave none, of the request's fields the same way."""
    exact = request.asked if request.asked is not None else {
        "kind": request.kind, "tool": request.tool, "summary": request.summary,
        "questions": list(request.questions)}
    text = json.dumps(exact, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _too_long(values: dict[str, Any]) -> str | None:
    """Why a request cannot be shown whole (then it is denied), or None. What is shown: the
    tool and the summary, or a question's questions (its summary repeats them)."""
    questions = json.loads(values["questions"] or "[]")
    size = len(values["tool"]) + (sum(map(len, questions)) if questions
                                  else len(values["summary"]))
    if size <= MAX_APPROVAL_TEXT_CHARS:
        return None
    return (f"teamctl: this request is {size} characters long, more than the "
            f"{MAX_APPROVAL_TEXT_CHARS} the operator is shown whole; it was denied unread. "
            "Split it into smaller steps (a script in a file, then a short command to run it)")


# -- the service ------------------------------------------------------------------------------

@dataclass(eq=False)
class _Waiter:
    team: str
    member: str
    request: ApprovalRequest
    target: Target
    sha256: str
    answered: anyio.Event = field(default_factory=anyio.Event)
    confirmed: anyio.Event = field(default_factory=anyio.Event)
    answer: ApprovalAnswer | None = None


class Approvals:
    """The queue: what the daemon's API and the members' approvers share."""

    def __init__(self, db: AsyncJournal, *, on_change: Callable[[], None]) -> None:
        """``on_change``: the live view's change feed (a request asked or settled)."""
        self._journal = ApprovalJournal(db)
        self._kept = KeptRules(db)
        self.write_deadline = _write_deadline()
        self._waiters: dict[str, _Waiter] = {}
        self._changed = anyio.Event()
        self._on_change = on_change

    @staticmethod
    def recover(journal: Journal) -> list[str]:
        """At daemon start: nothing that was pending can still be answered."""
        expired = expire_pending(journal, "the daemon restarted; the runtime asks again")
        for approval_id in expired:
            log.warning("approval_expired", approval_id=approval_id, reason="daemon restarted")
        return expired

    def approver(self, team: str, member: str, runtime: str, *, allow: Iterable[Rule] = (),
                 current_message: Callable[[], str | None] = lambda: None,
                 workdir: str | None = None) -> MemberApprover:
        """``workdir``: the member's worktree (or workdir) on this machine, where path rules
        apply (None: no path rule ever matches, e.g. a member on another host)."""
        return MemberApprover(self, team, member, runtime, tuple(allow), current_message,
                              workdir)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
        self._on_change()

    # -- what the operator calls --------------------------------------------------------------

    async def query(self, team: str | None = None, *, everything: bool = False,
                    after: int = 0, wait: float = 0.0, limit: int = PAGE,
                    offset: int = 0) -> ApprovalsDoc:
        """A page of the requests after ``after`` (a cursor) and how many there are in all;
        with ``wait``, block until there is one or ``wait`` seconds passed (``approvals -f``: a
        long poll, not a busy loop). ``cursor`` is the newest request when the page holds
        everything that matched — ``-f`` goes on from there, never replaying the settled
        history — else the page's last."""
        rows, total, head = await self._journal.page(team, everything, after, limit, offset)
        with anyio.move_on_after(wait):
            while not rows and wait > 0:
                changed = self._changed
                rows, total, head = await self._journal.page(team, everything, after, limit,
                                                             offset)
                if not rows:
                    await changed.wait()
        complete = offset + len(rows) >= total
        cursor = max([after, *(int(r["seq"]) for r in rows), *([head] if complete else [])])
        return ApprovalsDoc(approvals=[_doc(r) for r in rows], total=total, cursor=cursor)

    async def one(self, approval_id: str) -> ApprovalsDoc:
        """The request ``approval_id`` in any state (``approvals ID [--full]``), as a page of
        one."""
        row = await self._journal.get(approval_id)
        if row is None:
            raise NotFound("approval", approval_id, [])
        return ApprovalsDoc(approvals=[_doc(row)], total=1, cursor=int(row["seq"]))

    async def rules(self, team: str | None, member: str | None, *,
                    everything: bool = False) -> KeptRulesDoc:
        """The rules ``--always`` kept (``everything``: the revoked ones too)."""
        docs = await self._kept.listing(team, member, everything)
        return KeptRulesDoc(rules=docs)

    async def revoke(self, rule: str, team: str | None, member: str | None) -> KeptRulesDoc:
        docs = await self._kept.revoke(rule, team, member)
        for doc in docs:
            log.info("approval_rule_revoked", team=doc.team, member=doc.member, rule=doc.rule)
        self._notify()
        return KeptRulesDoc(rules=docs)

    async def preview(self, approval_id: str) -> RulePreviewDoc:
        """What ``approve --always`` would keep for a pending request; nothing is settled."""
        waiter = await self._pending(approval_id, "approve")
        kept = kept_rule(waiter.request, waiter.target, waiter.member)
        return RulePreviewDoc(rule=str(kept.rule), scope=kept.scope)

    async def _check_bound(self, approval_id: str, waiter: _Waiter, given: str | None) -> None:
        """The decision goes to the request the id was journaled for, and the one the operator
        read: the waiter's request must still hash to the journaled sha256 (it cannot change:
        this proves it), and to ``given`` when the operator named one."""
        actual = request_sha256(waiter.request)
        row = await self._journal.get(approval_id)
        journaled = row["sha256"] if row is not None else None
        if journaled != actual or waiter.sha256 != actual:
            raise ApprovalMismatch(approval_id, journaled or "-", actual)
        if given is not None and not actual.startswith(given.lower()):
            log.warning("approval_mismatch", approval_id=approval_id, team=waiter.team,
                        member=waiter.member, given=given, sha256=actual)
            raise ApprovalMismatch(approval_id, given, actual)

    async def _pending(self, approval_id: str, decision: str) -> _Waiter:
        """The waiter of a request that can still take ``decision``, or the typed refusal."""
        row = await self._journal.get(approval_id)
        if row is None:
            raise NotFound("approval", approval_id, [])
        if row["state"] == "expired":
            raise ApprovalExpired(approval_id, row["reason"] or "its runtime process is gone")
        if row["state"] != "pending":
            raise ApprovalSettled(approval_id, row["state"], row["reason"])
        waiter = self._waiters.get(approval_id)
        if waiter is None:
            reason = "the member process that asked is gone"
            await self._journal.expire(reason, [approval_id])
            self._notify()
            raise ApprovalExpired(approval_id, reason)
        if decision == "answer" and waiter.request.kind != "question":
            raise UsageError(f"approval {approval_id} is a permission request, not a question: "
                             f"'teamctl approve {approval_id}' or 'teamctl deny {approval_id}'")
        if decision == "approve" and waiter.request.kind == "question":
            raise UsageError(f"approval {approval_id} is a question: "
                             f"'teamctl answer {approval_id} TEXT'")
        return waiter

    async def decide(self, approval_id: str, decision: str, *, always: bool = False,
                     message: str | None = None, text: str | None = None,
                     rule: str | None = None, sha256: str | None = None) -> DecisionDoc:
        """Settle a pending request. ``always``: also keep the narrowest rule for it (refused,
        nothing settled, when none can be that narrow); ``rule``: the rule the operator was
        shown, refused if it is not the one that would be kept; ``sha256``: the request's
        sha256 (or its start) as the operator read it, refused if it is another's."""
        waiter = await self._pending(approval_id, decision)
        await self._check_bound(approval_id, waiter, sha256)
        kept = kept_rule(waiter.request, waiter.target, waiter.member) \
            if always and decision == "approve" else None
        if kept is not None and rule is not None and rule != str(kept.rule):
            raise UsageError(f"approve --always would keep {kept.rule}, not {rule}: see "
                             f"'teamctl approve --always {approval_id}'")
        answer = ApprovalAnswer(approval_id, decision,  # type: ignore[arg-type]
                                always=kept is not None, message=message, text=text)
        states: dict[str, ApprovalState] = {"approve": "approved", "deny": "denied",
                                            "answer": "answered"}
        state = states[decision]
        record = {"decision": decision, "always": kept is not None, "by": "operator",
                  **({"message": redact(message)} if message else {}),
                  **({"text": redact(text)} if text else {}),
                  **({"rule": str(kept.rule)} if kept else {})}
        await self._journal.settle(approval_id, state, record)
        if kept is not None:
            await self._kept.keep(waiter.team, waiter.member, kept, approval_id)
        waiter.answer = answer
        waiter.answered.set()
        log.info("approval_settled", approval_id=approval_id, team=waiter.team,
                 member=waiter.member, state=state, rule=str(kept.rule) if kept else None)
        self._notify()
        with anyio.move_on_after(CONFIRM_WAIT):
            await waiter.confirmed.wait()
        self._waiters.pop(approval_id, None)
        fresh = await self._journal.get(approval_id)
        return DecisionDoc(approval=_doc(fresh), confirmed=waiter.confirmed.is_set(),
                           rule=str(kept.rule) if kept else None,
                           scope=kept.scope if kept else None)


class MemberApprover:
    """One launch of one member: what its runtime calls (the ``Approver`` protocol). Nothing
    the journal refuses reaches the runtime as an exception: that would end the member."""

    def __init__(self, queue: Approvals, team: str, member: str, runtime: str,
                 allow: tuple[Rule, ...], current_message: Callable[[], str | None],
                 workdir: str | None = None) -> None:
        self._queue = queue
        self.team, self.member, self.runtime = team, member, runtime
        self._allow = allow
        self._current_message = current_message
        self._workdir = workdir
        self._mine: set[str] = set()

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        queue = self._queue
        approval_id = "apv_" + new_ulid()
        summary, sha256 = redact(request.summary), request_sha256(request)
        values = {"id": approval_id, "team": self.team, "member": self.member,
                  "runtime": self.runtime, "kind": request.kind, "tool": request.tool,
                  "summary": summary,
                  "questions": json.dumps([redact(q) for q in request.questions])
                  if request.questions else None,
                  "message_id": self._current_message(), "state": "pending", "answer": None,
                  "reason": None, "asked_at": time.time(), "settled_at": None,
                  "sha256": sha256}
        if (too_long := _too_long(values)) is not None:
            return await self._deny_unread(values, too_long)
        target = await anyio.to_thread.run_sync(target_of, request, self._workdir)
        rule = await self._matching_rule(request, target)
        if rule is not None:
            values.update(state="approved", settled_at=time.time(), answer=json.dumps(
                {"decision": "approve", "by": "rule", "rule": str(rule)}))
            if (unrecorded := await self._journal(values)) is not None:
                return unrecorded
            log.info("approval_by_rule", approval_id=approval_id, team=self.team,
                     member=self.member, tool=request.tool, rule=str(rule))
            queue._notify()
            return ApprovalAnswer(approval_id, "approve")
        waiter = _Waiter(self.team, self.member, request, target, sha256)
        queue._waiters[approval_id] = waiter
        self._mine.add(approval_id)
        try:
            if (refused := await self._journal(values)) is not None:
                return refused
            log.info("approval_requested", approval_id=approval_id, team=self.team,
                     member=self.member, kind=request.kind, tool=request.tool[:100],
                     summary=clipped(summary, LOGGED_CHARS), sha256=sha256)
            queue._notify()
            await waiter.answered.wait()  # as long as it takes: no timer
            assert waiter.answer is not None
            return waiter.answer
        finally:
            if not waiter.answered.is_set():  # cancelled: the process that asked is gone
                with anyio.CancelScope(shield=True):
                    await self._expire([approval_id], "the member process that asked is gone")

    async def _deny_unread(self, values: dict[str, Any], reason: str) -> ApprovalAnswer:
        """A request too long to be read whole: journaled denied (``approvals --all`` shows
        it, its first part and how much more), and the runtime told why."""
        values = {**values, "state": "denied", "settled_at": time.time(),
                  "answer": json.dumps({"decision": "deny", "by": "teamctl", "message": reason})}
        if (unrecorded := await self._journal(values)) is not None:
            return unrecorded
        log.warning("approval_too_long", approval_id=values["id"], team=self.team,
                    member=self.member, tool=values["tool"][:100],
                    summary_chars=len(values["summary"]))
        self._queue._notify()
        return ApprovalAnswer(values["id"], "deny", message=reason)

    async def _journal(self, values: dict[str, Any]) -> ApprovalAnswer | None:
        """Journal the request (retried while the journal refuses, up to ``WRITE_DEADLINE``);
        the denial to give instead when it was refused: the flood bound, or a journal that
        would not take it."""
        journal, approval_id = self._queue._journal, values["id"]
        try:
            state = await _retrying(lambda: journal.insert(values), self._queue.write_deadline)
        except StoreError as exc:
            self._forget(approval_id)
            log.error("approval_unrecorded", approval_id=approval_id, team=self.team,
                      member=self.member, tool=values["tool"], code=exc.code,
                      error=exc.message)
            return ApprovalAnswer(approval_id, "deny", message=(
                f"teamctl: this request was denied because the journal could not record it "
                f"({exc.code}: {exc.message}); ask again once it can (free some disk space)"))
        if state == "denied" and values["state"] == "pending":  # refused by the flood bound
            self._forget(approval_id)
            log.warning("approval_flood_denied", approval_id=approval_id, team=self.team,
                        member=self.member)
            self._queue._notify()
            return ApprovalAnswer(approval_id, "deny", message=f"teamctl: {flood_reason()}")
        return None

    def _forget(self, approval_id: str) -> None:
        """A request that never waited: no waiter, nothing of this launch's."""
        waiter = self._queue._waiters.pop(approval_id, None)
        self._mine.discard(approval_id)
        if waiter is not None:
            waiter.answered.set()

    @property
    def waiting_on(self) -> str | None:
        """The request this launch's runtime waits on, if any."""
        return next((i for i in sorted(self._mine)
                     if (w := self._queue._waiters.get(i)) is not None
                     and not w.answered.is_set()), None)

    async def confirmed(self, request_id: str) -> None:
        waiter = self._queue._waiters.pop(request_id, None)
        self._mine.discard(request_id)
        try:
            await self._queue._journal.confirm(request_id)
        except StoreError as exc:  # the answer was applied; only its time is not recorded
            log.error("approval_confirm_unrecorded", approval_id=request_id, team=self.team,
                      member=self.member, code=exc.code, error=exc.message)
        if waiter is not None:
            waiter.confirmed.set()
        log.info("approval_confirmed", approval_id=request_id, team=self.team,
                 member=self.member)
        self._queue._notify()

    async def close(self, reason: str) -> None:
        """The launch ended: whatever it still waits on expires."""
        await self._expire(list(self._mine), reason)

    async def _expire(self, ids: list[str], reason: str) -> None:
        for approval_id in ids:
            waiter = self._queue._waiters.pop(approval_id, None)
            self._mine.discard(approval_id)
            if waiter is not None and not waiter.answered.is_set():  # nothing waits forever
                waiter.answer = ApprovalAnswer(approval_id, "deny",
                                               message=f"teamctl: this request expired ({reason})")
                waiter.answered.set()
        try:
            expired = await self._queue._journal.expire(reason, ids)
        except StoreError as exc:  # left pending: the daemon's next start expires them
            log.error("approval_expiry_unrecorded", team=self.team, member=self.member,
                      ids=ids, code=exc.code, error=exc.message)
            expired = []
        for approval_id in expired:
            log.warning("approval_expired", approval_id=approval_id, team=self.team,
                        member=self.member, reason=reason)
        self._queue._notify()

    async def _matching_rule(self, request: ApprovalRequest, target: Target) -> Rule | None:
        try:
            kept = await self._queue._kept.live(self.team, self.member)
        except StoreError as exc:  # then only the team file's rules apply; the operator asks
            log.error("approval_rules_unread", team=self.team, member=self.member,
                      code=exc.code, error=exc.message)
            kept = []
        return next((r for r in (*self._allow, *kept) if r.matches(request, target)), None)


def _write_deadline() -> float:
    raw = os.environ.get("TEAMCTL_APPROVAL_WRITE_DEADLINE")
    if raw is None:
        return WRITE_DEADLINE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise UsageError(f"TEAMCTL_APPROVAL_WRITE_DEADLINE={raw!r} is not a positive number of "
                         "seconds; fix or unset it and start the daemon again")
    return value


async def _retrying(write: Callable[[], Awaitable[ApprovalState]],
                    within: float) -> ApprovalState:
    """``write()``, again after a growing pause while the journal refuses it (StoreError),
    until ``within`` seconds have passed; then its last StoreError."""
    deadline = time.monotonic() + within
    delay = WRITE_RETRY_FIRST
    while True:
        try:
            return await write()
        except StoreError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            log.warning("approval_write_retry", retry_in=min(delay, left))
            await anyio.sleep(min(delay, left))
            delay = min(delay * 2, WRITE_RETRY_MAX)
