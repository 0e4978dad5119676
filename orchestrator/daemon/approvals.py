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

Rules: the team file's ``allow`` patterns and what ``approve --always`` kept (table
``kept_rules``, per member, revocable) approve a matching request at once, recorded with
``by: rule``. What a rule matches — argv for a command, a path inside the member's worktree for
anything else — is ``approval_rules``; what is kept, and its table, ``kept_rules``.

The journal may refuse a write (a full disk): a request's row is retried for up to
``WRITE_DEADLINE`` seconds (``TEAMCTL_APPROVAL_WRITE_DEADLINE``), then that one request is
denied with the reason — the member's runtime goes on, and asks again on its next turn.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.contracts import ApprovalAnswer
from orchestrator.daemon import kept_rules
from orchestrator.daemon.approval_rules import Rule, Target, kept_rule, parse_rule, target_of
from orchestrator.errors import (
    ApprovalExpired,
    ApprovalSettled,
    NotFound,
    StoreError,
    UsageError,
)
from orchestrator.ids import new_ulid
from orchestrator.redaction import redact
from orchestrator.wire import (
    ApprovalDoc,
    ApprovalsDoc,
    DecisionDoc,
    KeptRulesDoc,
    RulePreviewDoc,
)

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Awaitable, Callable, Iterable

    from orchestrator.contracts import ApprovalRequest
    from orchestrator.daemon.store import AsyncStore, Store

__all__ = ["Approvals", "MemberApprover", "Rule", "parse_rule"]

log = structlog.get_logger("teamctl.approvals")

MAX_PENDING_PER_MEMBER = 100
CONFIRM_WAIT = 10.0
PAGE = 1000  # rows in one answer, at most
# how long a request's row waits for the journal before it is denied (a test shortens it
# with TEAMCTL_APPROVAL_WRITE_DEADLINE)
WRITE_DEADLINE = 30.0
WRITE_RETRY_FIRST, WRITE_RETRY_MAX = 0.05, 2.0
_COLUMNS = ("id, team, member, runtime, kind, tool, summary, questions, message_id, state, "
            "answer, reason, asked_at, settled_at, confirmed_at, seq")


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


def _insert(store: Store, values: dict[str, Any]) -> str:
    """Journal a request; a pending one only while fewer than ``MAX_PENDING_PER_MEMBER`` of
    its member wait (counted in the same transaction: a burst cannot overrun the bound), else
    it is denied at once. Returns the state it was journaled in."""
    with store.transaction() as db:
        if values["state"] == "pending" and _count_pending(db, values["team"],
                                                           values["member"]) >= \
                MAX_PENDING_PER_MEMBER:
            values = {**values, "state": "denied", "settled_at": time.time(),
                      "answer": json.dumps({"decision": "deny", "by": "teamctl",
                                            "message": _flood_reason()})}
        db.execute(
            "INSERT INTO approvals (id, team, member, runtime, kind, tool, summary, questions, "
            "message_id, state, answer, reason, asked_at, settled_at) VALUES (:id, :team, "
            ":member, :runtime, :kind, :tool, :summary, :questions, :message_id, :state, "
            ":answer, :reason, :asked_at, :settled_at)", values)
        return str(values["state"])


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


def _list(store: Store, team: str | None, everything: bool, after: int, limit: int,
          offset: int) -> tuple[list[Any], int, int]:
    """One page of the requests after ``after`` (oldest first), how many match in all, and
    the newest request's seq (where ``-f`` goes on from)."""
    where = "seq > ?"
    args: list[Any] = [after]
    if not everything:
        where += " AND state = 'pending'"
    if team is not None:
        where += " AND team = ?"
        args.append(team)
    db = store.connection
    rows = db.execute(f"SELECT {_COLUMNS} FROM approvals WHERE {where} ORDER BY seq "
                      "LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
    total = db.execute(f"SELECT COUNT(*) FROM approvals WHERE {where}", args).fetchone()[0]
    head = db.execute("SELECT COALESCE(MAX(seq), 0) FROM approvals").fetchone()[0]
    return rows, int(total), int(head)


def _flood_reason() -> str:
    return (f"more than {MAX_PENDING_PER_MEMBER} requests of this member wait already; "
            "answer those first")


def _count_pending(db: sqlite3.Connection, team: str, member: str) -> int:
    row = db.execute(
        "SELECT COUNT(*) AS n FROM approvals WHERE team = ? AND member = ? AND state = 'pending'",
        (team, member)).fetchone()
    return int(row["n"])


# -- the service ------------------------------------------------------------------------------

@dataclass(eq=False)
class _Waiter:
    team: str
    member: str
    request: ApprovalRequest
    target: Target
    answered: anyio.Event = field(default_factory=anyio.Event)
    confirmed: anyio.Event = field(default_factory=anyio.Event)
    answer: ApprovalAnswer | None = None


class Approvals:
    """The queue: what the daemon's API and the members' approvers share."""

    def __init__(self, db: AsyncStore) -> None:
        self._db = db
        self.write_deadline = _write_deadline()
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
                 current_message: Callable[[], str | None] = lambda: None,
                 workdir: str | None = None) -> MemberApprover:
        """``workdir``: the member's worktree (or workdir) on this machine, where path rules
        apply (None: no path rule ever matches, e.g. a member on another host)."""
        return MemberApprover(self, team, member, runtime, tuple(allow), current_message,
                              workdir)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
        if self.on_change is not None:
            self.on_change()

    # -- what the operator calls --------------------------------------------------------------

    async def query(self, team: str | None = None, *, everything: bool = False,
                    after: int = 0, wait: float = 0.0, limit: int = PAGE,
                    offset: int = 0) -> ApprovalsDoc:
        """A page of the requests after ``after`` (a cursor) and how many there are in all;
        with ``wait``, block until there is one or ``wait`` seconds passed (``approvals -f``: a
        long poll, not a busy loop). ``cursor`` is the newest request when the page holds
        everything that matched — ``-f`` goes on from there, never replaying the settled
        history — else the page's last."""
        rows, total, head = await self._db.call(_list, self._db.sync, team, everything, after,
                                                limit, offset)
        with anyio.move_on_after(wait):
            while not rows and wait > 0:
                changed = self._changed
                rows, total, head = await self._db.call(_list, self._db.sync, team, everything,
                                                        after, limit, offset)
                if not rows:
                    await changed.wait()
        complete = offset + len(rows) >= total
        cursor = max([after, *(int(r["seq"]) for r in rows), *([head] if complete else [])])
        return ApprovalsDoc(approvals=[_doc(r) for r in rows], total=total, cursor=cursor)

    async def rules(self, team: str | None, member: str | None, *,
                    everything: bool = False) -> KeptRulesDoc:
        """The rules ``--always`` kept (``everything``: the revoked ones too)."""
        docs = await self._db.call(kept_rules.listing, self._db.sync, team, member, everything)
        return KeptRulesDoc(rules=docs)

    async def revoke(self, rule: str, team: str | None, member: str | None) -> KeptRulesDoc:
        docs = await self._db.call(kept_rules.revoke, self._db.sync, rule, team, member)
        for doc in docs:
            log.info("approval_rule_revoked", team=doc.team, member=doc.member, rule=doc.rule)
        self._notify()
        return KeptRulesDoc(rules=docs)

    async def preview(self, approval_id: str) -> RulePreviewDoc:
        """What ``approve --always`` would keep for a pending request; nothing is settled."""
        waiter = await self._pending(approval_id, "approve")
        kept = kept_rule(waiter.request, waiter.target, waiter.member)
        return RulePreviewDoc(rule=str(kept.rule), scope=kept.scope)

    async def _pending(self, approval_id: str, decision: str) -> _Waiter:
        """The waiter of a request that can still take ``decision``, or the typed refusal."""
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
        return waiter

    async def decide(self, approval_id: str, decision: str, *, always: bool = False,
                     message: str | None = None, text: str | None = None,
                     rule: str | None = None) -> DecisionDoc:
        """Settle a pending request. ``always``: also keep the narrowest rule for it (refused,
        nothing settled, when none can be that narrow); ``rule``: the rule the operator was
        shown, refused if it is not the one that would be kept."""
        waiter = await self._pending(approval_id, decision)
        kept = kept_rule(waiter.request, waiter.target, waiter.member) \
            if always and decision == "approve" else None
        if kept is not None and rule is not None and rule != str(kept.rule):
            raise UsageError(f"approve --always would keep {kept.rule}, not {rule}: see "
                             f"'teamctl approve --always {approval_id}'")
        answer = ApprovalAnswer(approval_id, decision,  # type: ignore[arg-type]
                                always=kept is not None, message=message, text=text)
        state = {"approve": "approved", "deny": "denied", "answer": "answered"}[decision]
        record = {"decision": decision, "always": kept is not None, "by": "operator",
                  **({"message": redact(message)} if message else {}),
                  **({"text": redact(text)} if text else {}),
                  **({"rule": str(kept.rule)} if kept else {})}
        await self._db.call(_settle, self._db.sync, approval_id, state, record)
        if kept is not None:
            await self._db.call(kept_rules.keep, self._db.sync, waiter.team, waiter.member,
                                kept, approval_id)
        waiter.answer = answer
        waiter.answered.set()
        log.info("approval_settled", approval_id=approval_id, team=waiter.team,
                 member=waiter.member, state=state, rule=str(kept.rule) if kept else None)
        self._notify()
        with anyio.move_on_after(CONFIRM_WAIT):
            await waiter.confirmed.wait()
        self._waiters.pop(approval_id, None)
        fresh = await self._db.call(_get, self._db.sync, approval_id)
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
        summary = redact(request.summary)[:500]
        values = {"id": approval_id, "team": self.team, "member": self.member,
                  "runtime": self.runtime, "kind": request.kind, "tool": request.tool[:100],
                  "summary": summary,
                  "questions": json.dumps([redact(q)[:1000] for q in request.questions])
                  if request.questions else None,
                  "message_id": self._current_message(), "state": "pending", "answer": None,
                  "reason": None, "asked_at": time.time(), "settled_at": None}
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
        waiter = _Waiter(self.team, self.member, request, target)
        queue._waiters[approval_id] = waiter
        self._mine.add(approval_id)
        try:
            if (refused := await self._journal(values)) is not None:
                return refused
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

    async def _journal(self, values: dict[str, Any]) -> ApprovalAnswer | None:
        """Journal the request (retried while the journal refuses, up to ``WRITE_DEADLINE``);
        the denial to give instead when it was refused: the flood bound, or a journal that
        would not take it."""
        db, approval_id = self._queue._db, values["id"]
        try:
            state = await _retrying(lambda: db.call(_insert, db.sync, values),
                                    self._queue.write_deadline)
        except StoreError as exc:
            self._forget(approval_id)
            log.error("approval_unrecorded", approval_id=approval_id, team=self.team,
                      member=self.member, tool=values["tool"], code=exc.code,
                      error=exc.message)
            return ApprovalAnswer(approval_id, "deny", message=(
                f"teamctl: this request was denied because the journal could not record it "
                f"({exc.code}: {exc.message}); ask again once it can (free some disk space)"))
        if state == "denied":
            self._forget(approval_id)
            log.warning("approval_flood_denied", approval_id=approval_id, team=self.team,
                        member=self.member)
            self._queue._notify()
            return ApprovalAnswer(approval_id, "deny", message=f"teamctl: {_flood_reason()}")
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
        db = self._queue._db
        try:
            await db.call(_confirm, db.sync, request_id)
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
        db = self._queue._db
        try:
            expired = await db.call(expire_pending, db.sync, reason, ids)
        except StoreError as exc:  # left pending: the daemon's next start expires them
            log.error("approval_expiry_unrecorded", team=self.team, member=self.member,
                      ids=ids, code=exc.code, error=exc.message)
            expired = []
        for approval_id in expired:
            log.warning("approval_expired", approval_id=approval_id, team=self.team,
                        member=self.member, reason=reason)
        self._queue._notify()

    async def _matching_rule(self, request: ApprovalRequest, target: Target) -> Rule | None:
        db = self._queue._db
        try:
            kept = await db.call(kept_rules.live, db.sync, self.team, self.member)
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


async def _retrying(write: Callable[[], Awaitable[str]], within: float) -> str:
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
