"""Messages and their deliveries, in the journal: the daemon's queue.

Tables: ``messages`` (the text, who sent it, the chain it belongs to), ``deliveries`` (one per
message × member, with its state ``queued → prepared → sent → answered | failed``, attempts,
reply and typed error), ``message_attachments`` (the variant each member gets) and
``refusals`` (what the router's guards refused). FIFO order is the ``seq`` column, not the id.

``Store`` is the journal file (``journal.Journal``: its connection, transactions and
migrations) with these tables' synchronous calls; ``AsyncStore`` is the one way in for the
daemon: typed async methods, each run in the journal's writer thread with group commit. The
other tables' owners add theirs (``journal``'s team records, ``worktrees``) or wrap it (the
approvals', the ledger's, the board's, the notifier's, ``describe``'s); the composition root
(``daemon.migrations``) gives it every owner's migrations in their fixed order.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from orchestrator.daemon.journal import Journal, TeamJournal, TeamRecord
from orchestrator.daemon.queue._delivery import (
    ATTACHMENT_COLUMNS,
    DELIVERY_COLUMNS,
    MAX_ATTEMPTS,
    TERMINAL_STATES,
    AttemptStamp,
    Delivery,
    DeliveryState,
    Origin,
    attachment_of,
    attachment_row,
    delivery_of,
)
from orchestrator.daemon.worktrees import WorktreeJournal
from orchestrator.errors import StoreError
from orchestrator.ids import new_ulid

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from orchestrator.attachments.variants import PlannedAttachment

__all__ = [
    "MAX_ATTEMPTS",
    "AsyncStore",
    "AttemptStamp",
    "Delivery",
    "NewMessage",
    "Origin",
    "Store",
    "TeamRecord",
]


T = TypeVar("T")


@dataclass(frozen=True)
class NewMessage:
    """A message another owner's write makes (the board's hand-over): its team, text,
    recipients and where it came from."""

    team: str
    text: str
    members: list[str]
    origin: Origin
    message_id: str | None = None  # the id the write chose (recorded with its own rows)


class Store(Journal):
    """The journal file, with the messages' and deliveries' calls (synchronous: the writer
    thread runs them; the daemon calls them through ``AsyncStore``)."""

    def add_message(self, message_id: str, team: str, text: str, members: list[str],
                    attachments: dict[str, list[PlannedAttachment]] | None = None,
                    origin: Origin | None = None, planned_at: float | None = None) -> None:
        """Journal a message, its deliveries (state ``queued``) and, per member, the attachment
        variants it carries, in one transaction; ``planned_at``: when planning them began."""
        with self._tx() as db:
            _insert_message(db, message_id, team, text, members, attachments, origin,
                            planned_at)

    def add_message_after(self, write: Callable[[sqlite3.Connection], T | None],
                          message: Callable[[T], NewMessage]) -> T | None:
        """``write`` — another owner's rows, on the connection — and the message it makes,
        in one transaction: the message is queued exactly when the write is made. None from
        ``write``: nothing to tell, no message."""
        with self._tx() as db:
            written = write(db)
            if written is not None:
                new = message(written)
                _insert_message(db, new.message_id or new_ulid(), new.team, new.text,
                                new.members, None, new.origin)
            return written

    def sent_from(self, team: str, delivery: str, sender: str, recipient: str,
                  text: str) -> str | None:
        """The message ``sender`` already sent to ``recipient`` with ``text`` from its turn on
        message ``delivery`` (an earlier attempt of a redelivered turn), if any."""
        row = self._db.execute(
            "SELECT m.id FROM messages m JOIN deliveries d ON d.message_id = m.id "
            "WHERE m.origin_delivery = ? AND m.sender = ? AND m.team = ? AND m.text = ? "
            "AND m.kind = 'message' AND d.member = ? ORDER BY m.seq LIMIT 1",
            (delivery, sender, team, text, recipient)).fetchone()
        return None if row is None else str(row["id"])

    def owed_replies(self, team: str, message_id: str | None = None) -> list[Delivery]:
        """Teammates' messages answered whose reply was never journaled (the daemon died
        between the answer and its reply), in journal order; ``message_id``: that one only."""
        rows = self._db.execute(
            f"SELECT {DELIVERY_COLUMNS} FROM deliveries d JOIN messages m ON m.id = d.message_id"
            " WHERE d.team = ? AND d.state = 'answered' AND m.sender IS NOT NULL"
            " AND m.kind = 'message' AND (? IS NULL OR d.message_id = ?)"
            " AND (d.message_id, d.member) NOT IN (SELECT reply_to, sender FROM messages"
            " WHERE kind = 'reply' AND reply_to IS NOT NULL) ORDER BY m.seq",
            (team, message_id, message_id)).fetchall()
        return [delivery_of(r) for r in rows]

    def chain(self, message_id: str) -> list[Delivery]:
        """Every delivery of the chain ``message_id`` belongs to, in journal order."""
        rows = self._db.execute(
            f"SELECT {DELIVERY_COLUMNS} FROM deliveries d JOIN messages m ON m.id = d.message_id"
            " WHERE m.chain_id = (SELECT chain_id FROM messages WHERE id = ?) ORDER BY m.seq",
            (message_id,)).fetchall()
        return [delivery_of(r) for r in rows]

    def add_refusal(self, team: str, sender: str, recipient: str | None, code: str,
                    message: str, chain_id: str | None) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO refusals (team, sender, recipient, code, message, chain_id, "
                       "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (team, sender, recipient, code, message, chain_id, time.time()))

    def refusals(self, team: str) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT sender, recipient, code, message, chain_id FROM "
                                "refusals WHERE team = ? ORDER BY seq", (team,)).fetchall()
        return [dict(r) for r in rows]

    def attachments(self, message_id: str, member: str) -> list[PlannedAttachment]:
        rows = self._db.execute(
            f"SELECT {ATTACHMENT_COLUMNS} FROM message_attachments "
            "WHERE message_id = ? AND member = ? ORDER BY position", (message_id, member),
        ).fetchall()
        return [attachment_of(row) for row in rows]

    def next_queued(self, team: str, member: str, *,
                    operator_only: bool = False) -> Delivery | None:
        """The oldest queued delivery of a member (FIFO by journal order); ``operator_only``:
        the oldest of the operator's own messages (no sender, no board task)."""
        own = " AND m.sender IS NULL AND m.task_id IS NULL" if operator_only else ""
        row = self._db.execute(
            f"SELECT {DELIVERY_COLUMNS} FROM deliveries d JOIN messages m ON m.id = d.message_id"
            f" WHERE d.team = ? AND d.member = ? AND d.state = 'queued'{own} ORDER BY m.seq "
            "LIMIT 1", (team, member),
        ).fetchone()
        return None if row is None else delivery_of(row)

    def delivery(self, message_id: str, member: str | None = None) -> Delivery | None:
        sql = (f"SELECT {DELIVERY_COLUMNS} FROM deliveries d JOIN messages m "
               "ON m.id = d.message_id WHERE d.message_id = ?")
        args: tuple[Any, ...] = (message_id,)
        if member is not None:
            sql, args = sql + " AND d.member = ?", (*args, member)
        row = self._db.execute(sql, args).fetchone()
        return None if row is None else delivery_of(row)

    def history(self, team: str, member: str, *, limit: int | None = None,
                before: str | None = None) -> tuple[list[Delivery], bool]:
        """A member's deliveries, oldest first: the newest ``limit`` (all when None) of those
        journaled before message ``before``; and whether older ones remain."""
        sql = (f"SELECT {DELIVERY_COLUMNS} FROM deliveries d JOIN messages m "
               "ON m.id = d.message_id WHERE d.team = ? AND d.member = ?")
        args: list[Any] = [team, member]
        if before is not None:
            sql += " AND m.seq < COALESCE((SELECT seq FROM messages WHERE id = ?), -1)"
            args.append(before)
        sql += " ORDER BY m.seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit + 1)
        rows = self._db.execute(sql, args).fetchall()
        more = limit is not None and len(rows) > limit
        return [delivery_of(r) for r in reversed(rows[:limit])], more

    def attachments_of(self, message_ids: list[str], member: str
                       ) -> dict[str, list[PlannedAttachment]]:
        """The attachments of several messages to one member, in one query."""
        found: dict[str, list[PlannedAttachment]] = {m: [] for m in message_ids}
        for start in range(0, len(message_ids), 500):
            chunk = message_ids[start:start + 500]
            rows = self._db.execute(
                f"SELECT {ATTACHMENT_COLUMNS} FROM message_attachments WHERE member = ? AND "
                f"message_id IN ({','.join('?' * len(chunk))}) ORDER BY position",
                (member, *chunk),
            ).fetchall()
            for row in rows:
                found[row["message_id"]].append(attachment_of(row))
        return found

    def queued_counts(self, team: str) -> dict[str, int]:
        rows = self._db.execute(
            "SELECT member, COUNT(*) AS n FROM deliveries WHERE team = ? "
            "AND state IN ('queued', 'prepared', 'sent') GROUP BY member", (team,),
        ).fetchall()
        return {r["member"]: r["n"] for r in rows}

    def claim_next(self, team: str, member: str, *, operator_only: bool = False,
                   stamp: AttemptStamp | None = None
                   ) -> tuple[Delivery, list[PlannedAttachment]] | None:
        """The oldest queued delivery of a member (``operator_only``: of the operator's own
        messages), moved to ``prepared`` (an attempt counted), with its attachments — one
        call, not fsynced (see ``claim``); None: the queue is empty."""
        delivery = self.next_queued(team, member, operator_only=operator_only)
        if delivery is None:
            return None
        return delivery, self.claim(delivery.message_id, member, stamp)

    def claim(self, message_id: str, member: str,
              stamp: AttemptStamp | None = None) -> list[PlannedAttachment]:
        """``queued → prepared`` (an attempt counted; its row in ``turn_attempts``, with what
        it runs on) and the delivery's attachments, in one call. Not fsynced: after a power
        loss it is at worst queued again, which recovery does to every prepared row anyway."""
        now, s = time.time(), stamp or AttemptStamp()
        with self._tx(durable=False) as db:
            cur = db.execute(
                "UPDATE deliveries SET state='prepared', attempts=attempts+1, updated_at=? "
                "WHERE message_id=? AND member=? AND state='queued'",
                (now, message_id, member),
            )
            self._expect_one(cur, message_id, member, "prepared")
            db.execute(
                "INSERT INTO turn_attempts (message_id, member, ordinal, team, epoch, runtime, "
                "model, claimed_at) SELECT ?, ?, COALESCE(MAX(ordinal), 0) + 1, "
                "(SELECT team FROM deliveries WHERE message_id = ? AND member = ?), ?, ?, ?, ? "
                "FROM turn_attempts WHERE message_id = ? AND member = ?",
                (message_id, member, message_id, member, s.epoch, s.runtime, s.model, now,
                 message_id, member))
        return self.attachments(message_id, member)

    def mark_handed(self, message_id: str, member: str, session: str) -> None:
        """A ``prepared`` delivery is about to be written to the runtime's ``session``: the
        session is journaled now, ``sent`` once the write is done. A daemon killed between
        the two finds the session and continues the turn there rather than handing the message
        again whole (the member may already be working on it). Not fsynced (see ``claim``)."""
        with self._tx(durable=False) as db:
            cur = db.execute(
                "UPDATE deliveries SET sent_session=?, updated_at=? "
                "WHERE message_id=? AND member=? AND state='prepared'",
                (session, time.time(), message_id, member),
            )
            self._expect_one(cur, message_id, member, "handed")

    def mark_sent(self, message_id: str, member: str, session: str | None = None) -> None:
        """``prepared → sent``, with the runtime session the turn went to (None: unknown yet,
        the one it last went to is kept). Not fsynced (see ``claim``)."""
        now = time.time()
        with self._tx(durable=False) as db:
            cur = db.execute(
                "UPDATE deliveries SET state='sent', sent_session=COALESCE(?, sent_session), "
                "updated_at=? WHERE message_id=? AND member=? AND state='prepared'",
                (session, now, message_id, member),
            )
            self._expect_one(cur, message_id, member, "sent")
            db.execute(f"UPDATE turn_attempts SET sent_at=?, session_id=? {_LAST_ATTEMPT}",
                       (now, session, message_id, member, message_id, member))

    def mark_answered(self, message_id: str, member: str, reply: str,
                      notes: tuple[str, ...] = ()) -> None:
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "UPDATE deliveries SET state='answered', reply=?, error_code=NULL, "
                "error_message=NULL, retryable=NULL, notes=?, updated_at=? "
                "WHERE message_id=? AND member=? AND state IN ('prepared', 'sent')",
                (reply, json.dumps(list(notes)) if notes else None, now,
                 message_id, member),
            )
            self._expect_one(cur, message_id, member, "answered")
            _end_attempt(db, message_id, member, now, "answered", None)

    def mark_failed(self, message_id: str, member: str, *, code: str, message: str,
                    retryable: bool, requeue: bool, held: bool = False,
                    session: str | None = None) -> DeliveryState | Literal["missing"]:
        """Record a failed attempt. With ``requeue`` and attempts left, the delivery goes back
        to ``queued`` (keeping the error as its last one); otherwise it ends ``failed``.
        ``held``: the member was paused (a budget, a rate limit): back to ``queued`` and the
        attempt given back — a held message is never failed. ``session``: the runtime session
        an attempt that reached the runtime was cut on, if it learnt it only during the turn
        (Codex's first ``thread.started``). Returns the new state."""
        with self._tx() as db:
            row = db.execute(
                "SELECT attempts, state FROM deliveries WHERE message_id=? AND member=?",
                (message_id, member),
            ).fetchone()
            if row is None:
                return "missing"
            state: DeliveryState = row["state"]
            if state in TERMINAL_STATES:
                return state
            state = "queued" if held or (requeue and row["attempts"] < MAX_ATTEMPTS) else "failed"
            now = time.time()
            outcome = "held" if held else ("requeued" if state == "queued" else "failed")
            _end_attempt(db, message_id, member, now, outcome, code)
            db.execute(
                "UPDATE deliveries SET state=?, error_code=?, error_message=?, retryable=?, "
                "attempts=MAX(attempts - ?, 0), updated_at=?, sent_session=CASE WHEN "
                "state = 'sent' THEN COALESCE(?, sent_session) ELSE sent_session END "
                "WHERE message_id=? AND member=?",
                (state, code, message, int(retryable), int(held), now, session,
                 message_id, member),
            )
            return state

    def recover_in_flight(self) -> list[tuple[str, str, DeliveryState]]:
        """On daemon start: deliveries left ``prepared``/``sent`` go back to ``queued``, or to
        ``failed`` (retryable) once their attempts are used up. Returns (id, member, state)."""
        changed = []
        with self._tx() as db:
            rows = db.execute(
                "SELECT message_id, member, attempts FROM deliveries "
                "WHERE state IN ('prepared', 'sent')"
            ).fetchall()
            for row in rows:
                state: DeliveryState = "queued" if row["attempts"] < MAX_ATTEMPTS else "failed"
                _end_attempt(db, row["message_id"], row["member"], None, "daemon_restarted",
                             "daemon_restarted")
                db.execute(
                    "UPDATE deliveries SET state=?, error_code='daemon_restarted', "
                    "error_message='the daemon stopped during this delivery', retryable=1, "
                    "updated_at=? WHERE message_id=? AND member=?",
                    (state, time.time(), row["message_id"], row["member"]),
                )
                changed.append((row["message_id"], row["member"], state))
        return changed

    @staticmethod
    def _expect_one(cur: sqlite3.Cursor, message_id: str, member: str, new: str) -> None:
        if cur.rowcount != 1:
            raise StoreError(f"delivery {message_id} to {member} cannot move to {new}")


class AsyncStore(TeamJournal, WorktreeJournal):
    """The daemon's journal: messages and deliveries (here), teams and members
    (``TeamJournal``), worktrees (``WorktreeJournal``) — typed async methods, each run in the
    writer thread with group commit (``journal.AsyncJournal``); the claim, ``sent`` and a
    delivery's row, which need no fsync, at once when the writer is idle (``quick``)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._store = store

    async def add_message(self, message_id: str, team: str, text: str, members: list[str],
                          attachments: dict[str, list[PlannedAttachment]] | None = None,
                          origin: Origin | None = None, planned_at: float | None = None
                          ) -> None:
        await self.call(self._store.add_message, message_id, team, text, members, attachments,
                        origin, planned_at)

    async def add_message_after(self, write: Callable[[sqlite3.Connection], T | None],
                                message: Callable[[T], NewMessage]) -> T | None:
        """``Store.add_message_after``, in the writer thread."""
        return await self.call(self._store.add_message_after, write, message)

    async def sent_from(self, team: str, delivery: str, sender: str, recipient: str,
                        text: str) -> str | None:
        return await self.call(self._store.sent_from, team, delivery, sender, recipient, text)

    async def owed_replies(self, team: str, message_id: str | None = None) -> list[Delivery]:
        return await self.call(self._store.owed_replies, team, message_id)

    async def chain(self, message_id: str) -> list[Delivery]:
        return await self.call(self._store.chain, message_id)

    async def add_refusal(self, team: str, sender: str, recipient: str | None, code: str,
                          message: str, chain_id: str | None) -> None:
        await self.call(self._store.add_refusal, team, sender, recipient, code, message,
                        chain_id)

    async def delivery(self, message_id: str, member: str | None = None) -> Delivery | None:
        return await self.quick(self._store.delivery, message_id, member)

    async def history(self, team: str, member: str, *, limit: int | None = None,
                      before: str | None = None) -> tuple[list[Delivery], bool]:
        return await self.call(self._store.history, team, member, limit=limit, before=before)

    async def attachments_of(self, message_ids: list[str], member: str
                             ) -> dict[str, list[PlannedAttachment]]:
        return await self.call(self._store.attachments_of, message_ids, member)

    async def queued_counts(self, team: str) -> dict[str, int]:
        return await self.call(self._store.queued_counts, team)

    async def claim_next(self, team: str, member: str, *, operator_only: bool = False,
                         stamp: AttemptStamp | None = None
                         ) -> tuple[Delivery, list[PlannedAttachment]] | None:
        return await self.quick(partial(self._store.claim_next, team, member,
                                        operator_only=operator_only, stamp=stamp))

    async def mark_handed(self, message_id: str, member: str, session: str) -> None:
        await self.quick(self._store.mark_handed, message_id, member, session)

    async def mark_sent(self, message_id: str, member: str, session: str | None = None) -> None:
        await self.quick(self._store.mark_sent, message_id, member, session)

    async def mark_answered(self, message_id: str, member: str, reply: str,
                            notes: tuple[str, ...] = ()) -> None:
        await self.call(self._store.mark_answered, message_id, member, reply, notes)

    async def mark_failed(self, message_id: str, member: str, *, code: str, message: str,
                          retryable: bool, requeue: bool, held: bool = False,
                          session: str | None = None) -> DeliveryState | Literal["missing"]:
        return await self.call(self._store.mark_failed, message_id, member, code=code,
                               message=message, retryable=retryable, requeue=requeue,
                               held=held, session=session)


def _insert_message(db: sqlite3.Connection, message_id: str, team: str, text: str,
                    members: list[str],
                    attachments: dict[str, list[PlannedAttachment]] | None,
                    origin: Origin | None, planned_at: float | None = None) -> None:
    """A message's rows (``Store.add_message``), inside the caller's transaction."""
    now = time.time()
    o = origin or Origin()
    # the sender's attempt in flight is the last one journaled for its turn's delivery
    db.execute("INSERT INTO messages (id, team, text, created_at, sender, kind, "
               "chain_id, depth, reply_to, origin_delivery, task_id, planned_at, "
               "origin_attempt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT "
               "MAX(ordinal) FROM turn_attempts WHERE message_id = ? AND member = ?))",
               (message_id, team, text, now, o.sender, o.kind, o.chain_id or message_id,
                o.depth, o.reply_to, o.delivery, o.task_id, planned_at, o.delivery,
                o.sender))
    db.executemany(
        "INSERT INTO deliveries (message_id, team, member, state, updated_at) "
        "VALUES (?, ?, ?, 'queued', ?)",
        [(message_id, team, member, now) for member in members],
    )
    for member, planned in (attachments or {}).items():
        db.executemany(
            f"INSERT INTO message_attachments ({ATTACHMENT_COLUMNS}) "
            f"VALUES ({','.join('?' * ATTACHMENT_COLUMNS.count(','))},?)",
            [attachment_row(message_id, member, p) for p in planned],
        )


# the newest attempt row of a delivery (``?``: message id and member, twice)
_LAST_ATTEMPT = ("WHERE message_id = ? AND member = ? AND ordinal = (SELECT MAX(ordinal) "
                 "FROM turn_attempts WHERE message_id = ? AND member = ?)")


def _end_attempt(db: sqlite3.Connection, message_id: str, member: str, at: float | None,
                 outcome: str, error_code: str | None) -> None:
    """The delivery's newest attempt ended (``at`` None: when is unknown — the daemon died
    during it), inside the caller's transaction; an attempt already ended keeps its end."""
    db.execute(f"UPDATE turn_attempts SET ended_at=?, outcome=?, error_code=? "
               f"{_LAST_ATTEMPT} AND outcome IS NULL",
               (at, outcome, error_code, message_id, member, message_id, member))
