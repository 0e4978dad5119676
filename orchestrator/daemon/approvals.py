"""What waits on the operator: the ``ask`` profile's permission requests and questions.

One durable queue in the journal (tables ``approvals`` and ``approval_rules``, migration 7).
A member's runtime asks through its launch's ``MemberApprover`` (the contracts' ``Approver``):
the request is journaled ``pending`` — its summary redacted — and the runtime waits as long as
it takes; no timer approves or denies anything. ``teamctl approve|deny|answer`` settles it
through ``Approvals.decide``, which hands the answer to the waiting runtime and then waits
(bounded) for the runtime to confirm it applied it.

A request is only ever answered by the process that asked: when that process goes (a member
crash, a recycle, a stop) its pending requests become ``expired``, and so does everything
pending when the daemon starts. The turn is delivered again as usual, its runtime asks again,
and a new row appears — a stale answer is never applied to a new request.

Rules: the team file's ``allow`` patterns and what ``approve --always`` left (kept in the
journal, per member) approve a matching request at once, recorded with ``by: rule``. A rule is
``TOOL`` or ``TOOL(GLOB)``: the tool's name as its runtime names it (case-insensitive), and a
shell-style pattern over the request's summary (a command, a path).
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.contracts import ApprovalAnswer, ApprovalRequest
from orchestrator.errors import ApprovalExpired, ApprovalSettled, NotFound, UsageError
from orchestrator.ids import new_ulid
from orchestrator.redaction import redact
from orchestrator.wire import ApprovalDoc, ApprovalsDoc, DecisionDoc

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from orchestrator.daemon.store import AsyncStore, Store

__all__ = ["Approvals", "MemberApprover", "Rule", "parse_rule"]

log = structlog.get_logger("teamctl.approvals")

MAX_PENDING_PER_MEMBER = 100
CONFIRM_WAIT = 10.0
_RULE = re.compile(r"^(?P<tool>[A-Za-z_][\w.-]{0,80})(?:\((?P<pattern>[^()]{1,500})\))?$")
_COLUMNS = ("id, team, member, runtime, kind, tool, summary, questions, message_id, state, "
            "answer, reason, asked_at, settled_at, confirmed_at, seq")


@dataclass(frozen=True)
class Rule:
    tool: str
    pattern: str = "*"

    def matches(self, request: ApprovalRequest) -> bool:
        return request.kind == "permission" and request.tool.lower() == self.tool.lower() \
            and fnmatch.fnmatchcase(request.summary, self.pattern)

    def __str__(self) -> str:
        return self.tool if self.pattern == "*" else f"{self.tool}({self.pattern})"


def parse_rule(text: str) -> Rule:
    """``TOOL`` or ``TOOL(GLOB)``; UsageError naming the form otherwise."""
    match = _RULE.match(text.strip())
    if match is None:
        raise UsageError(f"allow rule {text!r}: write TOOL or TOOL(PATTERN), e.g. \"Write\" or "
                         "\"Bash(npm test*)\"")
    return Rule(match["tool"], match["pattern"] or "*")


def _always_rule(request: ApprovalRequest) -> Rule:
    """What ``--always`` keeps: a command's program and anything after it; any path."""
    words = request.summary.split()
    if len(words) > 1 and "/" not in words[0]:
        return Rule(request.tool, f"{words[0]} *")
    return Rule(request.tool)


def _doc(row: Any) -> ApprovalDoc:
    return ApprovalDoc(
        id=row["id"], team=row["team"], member=row["member"], runtime=row["runtime"],
        kind=row["kind"], tool=row["tool"], summary=row["summary"],
        questions=json.loads(row["questions"]) if row["questions"] else [],
        message_id=row["message_id"], state=row["state"],
        answer=json.loads(row["answer"]) if row["answer"] else None, reason=row["reason"],
        asked_at=row["asked_at"], settled_at=row["settled_at"],
        confirmed_at=row["confirmed_at"])


# -- the journal side (runs in the store's writer thread) -------------------------------------

def expire_pending(store: Store, reason: str, ids: Iterable[str] | None = None) -> list[str]:
    """Mark pending requests (all, or ``ids``) expired with ``reason``; the ids it changed."""
    with store.transaction() as db:
        if ids is None:
            rows = db.execute("SELECT id FROM approvals WHERE state = 'pending'").fetchall()
            wanted = [r["id"] for r in rows]
        else:
            wanted = list(ids)
        changed = []
        for approval_id in wanted:
            cur = db.execute("UPDATE approvals SET state = 'expired', reason = ?, settled_at = ? "
                             "WHERE id = ? AND state = 'pending'",
                             (reason, time.time(), approval_id))
            if cur.rowcount:
                changed.append(approval_id)
    return changed


def _insert(store: Store, values: dict[str, Any]) -> int:
    with store.transaction() as db:
        cur = db.execute(
            "INSERT INTO approvals (id, team, member, runtime, kind, tool, summary, questions, "
            "message_id, state, answer, reason, asked_at, settled_at) VALUES (:id, :team, "
            ":member, :runtime, :kind, :tool, :summary, :questions, :message_id, :state, "
            ":answer, :reason, :asked_at, :settled_at)", values)
        return int(cur.lastrowid or 0)


def _settle(store: Store, approval_id: str, state: str, answer: dict[str, Any]) -> None:
    with store.transaction() as db:
        cur = db.execute("UPDATE approvals SET state = ?, answer = ?, settled_at = ? "
                         "WHERE id = ? AND state = 'pending'",
                         (state, json.dumps(answer, sort_keys=True), time.time(), approval_id))
        if not cur.rowcount:
            row = db.execute("SELECT state, reason FROM approvals WHERE id = ?",
                             (approval_id,)).fetchone()
            raise ApprovalSettled(approval_id, row["state"] if row else "gone",
                                  row["reason"] if row else None)


def _confirm(store: Store, approval_id: str) -> None:
    with store.transaction(durable=False) as db:
        db.execute("UPDATE approvals SET confirmed_at = ? WHERE id = ? AND confirmed_at IS NULL",
                   (time.time(), approval_id))


def _get(store: Store, approval_id: str) -> Any:
    return store.connection.execute(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?",
                                      (approval_id,)).fetchone()


def _list(store: Store, team: str | None, everything: bool, after: int) -> list[Any]:
    sql = f"SELECT {_COLUMNS} FROM approvals WHERE seq > ?"
    args: list[Any] = [after]
    if not everything:
        sql += " AND state = 'pending'"
    if team is not None:
        sql += " AND team = ?"
        args.append(team)
    return store.connection.execute(sql + " ORDER BY seq LIMIT 1000", args).fetchall()


def _count_pending(store: Store, team: str, member: str) -> int:
    row = store.connection.execute(
        "SELECT COUNT(*) AS n FROM approvals WHERE team = ? AND member = ? AND state = 'pending'",
        (team, member)).fetchone()
    return int(row["n"])


def _rules(store: Store, team: str, member: str) -> list[Rule]:
    rows = store.connection.execute(
        "SELECT tool, pattern FROM approval_rules WHERE team = ? AND member = ? "
        "ORDER BY created_at", (team, member)).fetchall()
    return [Rule(r["tool"], r["pattern"]) for r in rows]


def _add_rule(store: Store, team: str, member: str, rule: Rule, source: str) -> None:
    with store.transaction() as db:
        db.execute("INSERT OR IGNORE INTO approval_rules (team, member, tool, pattern, source, "
                   "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                   (team, member, rule.tool, rule.pattern, source, time.time()))


# -- the service ------------------------------------------------------------------------------

@dataclass(eq=False)
class _Waiter:
    team: str
    member: str
    request: ApprovalRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    confirmed: anyio.Event = field(default_factory=anyio.Event)
    answer: ApprovalAnswer | None = None


class Approvals:
    """The queue: what the daemon's API and the members' approvers share."""

    def __init__(self, db: AsyncStore) -> None:
        self._db = db
        self._waiters: dict[str, _Waiter] = {}
        self._changed = anyio.Event()
        self.on_change: Callable[[], None] | None = None  # the live view's change feed

    @staticmethod
    def recover(store: Store) -> list[str]:
        """At daemon start: nothing that was pending can still be answered."""
        expired = expire_pending(store, "the daemon restarted; the runtime asks again")
        for approval_id in expired:
            log.warning("approval_expired", approval_id=approval_id, reason="daemon restarted")
        return expired

    def approver(self, team: str, member: str, runtime: str, *, allow: Iterable[Rule] = (),
                 current_message: Callable[[], str | None] = lambda: None) -> MemberApprover:
        return MemberApprover(self, team, member, runtime, tuple(allow), current_message)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
        if self.on_change is not None:
            self.on_change()

    # -- what the operator calls --------------------------------------------------------------

    async def query(self, team: str | None = None, *, everything: bool = False,
                   after: int = 0, wait: float = 0.0) -> ApprovalsDoc:
        """Requests after ``after`` (a cursor); with ``wait``, block until there is a change or
        ``wait`` seconds passed (``approvals -f``: a long poll, not a busy loop)."""
        rows: list[Any] = await self._db.call(_list, self._db.sync, team, everything, after)
        with anyio.move_on_after(wait):
            while not rows and wait > 0:
                changed = self._changed
                rows = await self._db.call(_list, self._db.sync, team, everything, after)
                if not rows:
                    await changed.wait()
        docs = [_doc(r) for r in rows]
        cursor = max([after, *(int(r["seq"]) for r in rows)])
        return ApprovalsDoc(approvals=docs, cursor=cursor)

    async def decide(self, approval_id: str, decision: str, *, always: bool = False,
                     message: str | None = None, text: str | None = None) -> DecisionDoc:
        row = await self._db.call(_get, self._db.sync, approval_id)
        if row is None:
            raise NotFound("approval", approval_id, [])
        if row["state"] == "expired":
            raise ApprovalExpired(approval_id, row["reason"] or "its runtime process is gone")
        if row["state"] != "pending":
            raise ApprovalSettled(approval_id, row["state"], row["reason"])
        waiter = self._waiters.get(approval_id)
        if waiter is None:
            reason = "the member process that asked is gone"
            await self._db.call(expire_pending, self._db.sync, reason, [approval_id])
            self._notify()
            raise ApprovalExpired(approval_id, reason)
        if decision == "answer" and waiter.request.kind != "question":
            raise UsageError(f"approval {approval_id} is a permission request, not a question: "
                             f"'teamctl approve {approval_id}' or 'teamctl deny {approval_id}'")
        if decision == "approve" and waiter.request.kind == "question":
            raise UsageError(f"approval {approval_id} is a question: "
                             f"'teamctl answer {approval_id} TEXT'")
        rule = _always_rule(waiter.request) if always and decision == "approve" else None
        answer = ApprovalAnswer(approval_id, decision,  # type: ignore[arg-type]
                                always=rule is not None, message=message, text=text)
        state = {"approve": "approved", "deny": "denied", "answer": "answered"}[decision]
        record = {"decision": decision, "always": rule is not None, "by": "operator",
                  **({"message": redact(message)} if message else {}),
                  **({"text": redact(text)} if text else {}),
                  **({"rule": str(rule)} if rule else {})}
        await self._db.call(_settle, self._db.sync, approval_id, state, record)
        if rule is not None:
            await self._db.call(_add_rule, self._db.sync, waiter.team, waiter.member, rule,
                                "always")
        waiter.answer = answer
        waiter.answered.set()
        log.info("approval_settled", approval_id=approval_id, team=waiter.team,
                 member=waiter.member, state=state, rule=str(rule) if rule else None)
        self._notify()
        with anyio.move_on_after(CONFIRM_WAIT):
            await waiter.confirmed.wait()
        self._waiters.pop(approval_id, None)
        fresh = await self._db.call(_get, self._db.sync, approval_id)
        return DecisionDoc(approval=_doc(fresh), confirmed=waiter.confirmed.is_set(),
                           rule=str(rule) if rule else None)


class MemberApprover:
    """One launch of one member: what its runtime calls (the ``Approver`` protocol)."""

    def __init__(self, queue: Approvals, team: str, member: str, runtime: str,
                 allow: tuple[Rule, ...], current_message: Callable[[], str | None]) -> None:
        self._queue = queue
        self.team, self.member, self.runtime = team, member, runtime
        self._allow = allow
        self._current_message = current_message
        self._mine: set[str] = set()

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        queue, db = self._queue, self._queue._db
        approval_id = "apv_" + new_ulid()
        summary = redact(request.summary)[:500]
        values = {"id": approval_id, "team": self.team, "member": self.member,
                  "runtime": self.runtime, "kind": request.kind, "tool": request.tool[:100],
                  "summary": summary,
                  "questions": json.dumps([redact(q)[:1000] for q in request.questions])
                  if request.questions else None,
                  "message_id": self._current_message(), "state": "pending", "answer": None,
                  "reason": None, "asked_at": time.time(), "settled_at": None}
        rule = await self._matching_rule(request)
        if rule is not None:
            values.update(state="approved", settled_at=time.time(), answer=json.dumps(
                {"decision": "approve", "by": "rule", "rule": str(rule)}))
            await db.call(_insert, db.sync, values)
            log.info("approval_by_rule", approval_id=approval_id, team=self.team,
                     member=self.member, tool=request.tool, rule=str(rule))
            queue._notify()
            return ApprovalAnswer(approval_id, "approve")
        if await db.call(_count_pending, db.sync, self.team, self.member) >= \
                MAX_PENDING_PER_MEMBER:
            reason = (f"more than {MAX_PENDING_PER_MEMBER} requests of this member wait "
                      "already; answer those first")
            values.update(state="denied", settled_at=time.time(), answer=json.dumps(
                {"decision": "deny", "by": "teamctl", "message": reason}))
            await db.call(_insert, db.sync, values)
            log.warning("approval_flood_denied", approval_id=approval_id, team=self.team,
                        member=self.member)
            queue._notify()
            return ApprovalAnswer(approval_id, "deny", message=f"teamctl: {reason}")
        waiter = _Waiter(self.team, self.member, request)
        queue._waiters[approval_id] = waiter
        self._mine.add(approval_id)
        try:
            await db.call(_insert, db.sync, values)
            log.info("approval_requested", approval_id=approval_id, team=self.team,
                     member=self.member, kind=request.kind, tool=request.tool, summary=summary)
            queue._notify()
            await waiter.answered.wait()  # as long as it takes: no timer
            assert waiter.answer is not None
            return waiter.answer
        finally:
            if not waiter.answered.is_set():  # cancelled: the process that asked is gone
                with anyio.CancelScope(shield=True):
                    await self._expire([approval_id], "the member process that asked is gone")

    @property
    def waiting_on(self) -> str | None:
        """The request this launch's runtime waits on, if any."""
        return next((i for i in sorted(self._mine)
                     if (w := self._queue._waiters.get(i)) is not None
                     and not w.answered.is_set()), None)

    async def confirmed(self, request_id: str) -> None:
        waiter = self._queue._waiters.pop(request_id, None)
        self._mine.discard(request_id)
        db = self._queue._db
        await db.call(_confirm, db.sync, request_id)
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
        db = self._queue._db
        for approval_id in await db.call(expire_pending, db.sync, reason, ids):
            log.warning("approval_expired", approval_id=approval_id, team=self.team,
                        member=self.member, reason=reason)
        self._queue._notify()

    async def _matching_rule(self, request: ApprovalRequest) -> Rule | None:
        db = self._queue._db
        kept = await db.call(_rules, db.sync, self.team, self.member)
        return next((r for r in (*self._allow, *kept) if r.matches(request)), None)
