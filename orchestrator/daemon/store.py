"""The journal: one SQLite file (WAL), one writer connection.

Durability: the connection runs ``synchronous=NORMAL`` and a durable commit is followed by an
fsync of the WAL file — what ``synchronous=FULL`` does, but decided per commit, so a group of
calls (``AsyncStore``'s group commit) pays one fsync, and transitions that recovery undoes anyway
(prepared, sent) pay none. SQLite syncs the WAL before each checkpoint itself.

(The variant cache keeps its table in the same file: ``variant_cache``.)

Tables: ``teams`` (the launched config and whether it should run), ``members`` (per-member
runtime session ids), ``messages`` and ``deliveries`` (one per message × member, with its state
``queued → prepared → sent → answered | failed``, attempts, reply and typed error). FIFO order is
the ``seq`` column, not the id. The schema is versioned (``PRAGMA user_version``); migrations run
in order, each in its own transaction.

All methods are synchronous and short; the daemon calls them through ``AsyncStore``, which runs
them one at a time in a worker thread, so the event loop never waits on an fsync.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio

from orchestrator.attachments.normalize import Limits
from orchestrator.attachments.variants import PlannedAttachment, PlannedVariant
from orchestrator.daemon.kept_rules import SCHEMA as KEPT_RULES_SCHEMA
from orchestrator.daemon.worktrees import Worktree
from orchestrator.errors import StoreError, map_exceptions
from orchestrator.wire import DeliveryError, MessageDoc

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = [
    "MAX_ATTEMPTS",
    "SCHEMA_VERSION",
    "AsyncStore",
    "Delivery",
    "Origin",
    "Store",
    "TeamRecord",
]

P = ParamSpec("P")
T = TypeVar("T")

MAX_ATTEMPTS = 3
TERMINAL_STATES = frozenset({"answered", "failed", "blocked"})

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE teams (
        name TEXT PRIMARY KEY,
        file TEXT NOT NULL,
        config_json TEXT NOT NULL,
        desired TEXT NOT NULL CHECK (desired IN ('running', 'stopped')),
        launched_at REAL NOT NULL,
        launch_seq INTEGER NOT NULL
    );
    CREATE TABLE members (
        team TEXT NOT NULL REFERENCES teams(name) ON DELETE CASCADE,
        name TEXT NOT NULL,
        runtime TEXT NOT NULL,
        session_id TEXT,
        PRIMARY KEY (team, name)
    );
    CREATE TABLE messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        team TEXT NOT NULL,
        text TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE deliveries (
        message_id TEXT NOT NULL REFERENCES messages(id),
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN
            ('queued', 'prepared', 'sent', 'answered', 'failed', 'blocked')),
        attempts INTEGER NOT NULL DEFAULT 0,
        reply TEXT,
        error_code TEXT,
        error_message TEXT,
        retryable INTEGER,
        updated_at REAL NOT NULL,
        PRIMARY KEY (message_id, member)
    );
    CREATE INDEX deliveries_by_member ON deliveries (team, member, state);
    """,
    # 2: attachments. Images are referenced by sha256 and MIME (the bytes live in the
    # artifact store), never as base64.
    """
    CREATE TABLE variants (
        original_sha256 TEXT NOT NULL,
        purpose TEXT NOT NULL,
        limits TEXT NOT NULL,
        optimizer TEXT NOT NULL,
        original_mime TEXT NOT NULL,
        variant_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        mime TEXT NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        warnings TEXT NOT NULL,
        PRIMARY KEY (original_sha256, purpose, limits, optimizer)
    );
    CREATE TABLE message_attachments (
        message_id TEXT NOT NULL REFERENCES messages(id),
        member TEXT NOT NULL,
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        original_sha256 TEXT NOT NULL,
        original_mime TEXT NOT NULL,
        original_bytes INTEGER NOT NULL,
        variant_id TEXT NOT NULL,
        purpose TEXT NOT NULL,
        limits TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        mime TEXT NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        PRIMARY KEY (message_id, member, position)
    );
    """,
)
_MIGRATIONS += (
    # 3: members' git worktrees, reused on relaunch
    """
    CREATE TABLE worktrees (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        path TEXT NOT NULL,
        branch TEXT NOT NULL,
        base TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        repo TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (team, member)
    );
    """,
)
_MIGRATIONS += (
    # 4: what the runtime refused during a delivery (permission denials), for history
    "ALTER TABLE deliveries ADD COLUMN notes TEXT",
    # 5: teammates' messages: who sent it (NULL: the operator), whether it is a routed reply,
    # the chain it belongs to and how deep in it; refusals of the router's guards
    """
    ALTER TABLE messages ADD COLUMN sender TEXT;
    ALTER TABLE messages ADD COLUMN kind TEXT NOT NULL DEFAULT 'message';
    ALTER TABLE messages ADD COLUMN chain_id TEXT;
    ALTER TABLE messages ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN reply_to TEXT;
    UPDATE messages SET chain_id = id WHERE chain_id IS NULL;
    CREATE INDEX messages_by_chain ON messages (chain_id);
    CREATE TABLE refusals (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        team TEXT NOT NULL,
        sender TEXT NOT NULL,
        recipient TEXT,
        code TEXT NOT NULL,
        message TEXT NOT NULL,
        chain_id TEXT,
        created_at REAL NOT NULL
    );
    """,
)
_MIGRATIONS += (
    # 6: what an answered turn used, as its runtime reported it (JSON: tokens, cost)
    "ALTER TABLE deliveries ADD COLUMN usage TEXT",
    # 7: what waits on the operator (the "ask" profile's requests and questions), and the
    # rules an "approve --always" left for later launches (orchestrator/daemon/approvals.py)
    """
    CREATE TABLE approvals (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        runtime TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('permission', 'question')),
        tool TEXT NOT NULL,
        summary TEXT NOT NULL,
        questions TEXT,
        message_id TEXT,
        state TEXT NOT NULL CHECK (state IN
            ('pending', 'approved', 'denied', 'answered', 'expired')),
        answer TEXT,
        reason TEXT,
        asked_at REAL NOT NULL,
        settled_at REAL,
        confirmed_at REAL
    );
    CREATE INDEX approvals_by_state ON approvals (state, seq);
    CREATE TABLE approval_rules (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        tool TEXT NOT NULL,
        pattern TEXT NOT NULL,
        source TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (team, member, tool, pattern)
    );
    """,
)
_MIGRATIONS += (
    # 8: what each turn cost (orchestrator/daemon/ledger.py): one row per settled turn attempt,
    # the running totals each runtime counter was last charged up to, and the budgets
    """
    CREATE TABLE usage (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        message_id TEXT,
        runtime TEXT NOT NULL,
        model TEXT,
        input_tokens INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        reasoning_output_tokens INTEGER NOT NULL,
        cost_usd REAL,
        estimated INTEGER NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX usage_by_member ON usage (team, member);
    CREATE INDEX usage_by_message ON usage (message_id, member);
    CREATE TABLE usage_counters (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        counter TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        reasoning_output_tokens INTEGER NOT NULL,
        cost_usd REAL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (team, member, counter)
    );
    CREATE TABLE budgets (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        usd REAL,
        tokens INTEGER,
        file_usd REAL,
        file_tokens INTEGER,
        updated_at REAL NOT NULL,
        PRIMARY KEY (team, member)
    );
    """,
)
_MIGRATIONS += (
    # 9: described images (issue 18): an attachment delivered as its description, journaled
    # with the message; the descriptions a describer made, by variant, reused
    """
    ALTER TABLE message_attachments ADD COLUMN described_by TEXT;
    ALTER TABLE message_attachments ADD COLUMN description TEXT;
    CREATE TABLE descriptions (
        variant_sha256 TEXT NOT NULL,
        describer TEXT NOT NULL,
        text TEXT NOT NULL,
        seconds REAL NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (variant_sha256, describer)
    );
    """,
)
_MIGRATIONS += (
    # 10: the rules "approve --always" keeps, scoped to the member's worktree, revocable; its
    # SQL is kept beside the code that uses it (orchestrator/daemon/kept_rules.py)
    KEPT_RULES_SCHEMA,
)
_MIGRATIONS += (
    # effects once (issue 26): the runtime session a delivery last reached its member on (a cut
    # turn continues there), and the sender's turn in flight a teammate's message was sent
    # from (a redelivered turn that sends it again gets the first receipt)
    """
    ALTER TABLE deliveries ADD COLUMN sent_session TEXT;
    ALTER TABLE messages ADD COLUMN origin_delivery TEXT;
    CREATE INDEX messages_by_origin_delivery ON messages (origin_delivery, sender)
        WHERE origin_delivery IS NOT NULL;
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)


@dataclass(frozen=True)
class TeamRecord:
    name: str
    file: str
    config: dict[str, Any]
    desired: str


@dataclass(frozen=True)
class Origin:
    """Where a message comes from: the operator (sender None, depth 0) or a teammate — a
    message it sent, or the reply routed back to it — and the chain it belongs to."""

    sender: str | None = None
    kind: str = "message"  # "message" | "reply"
    chain_id: str | None = None
    depth: int = 0
    reply_to: str | None = None
    # the sender's turn in flight when it sent this (its message id; None: the operator, a
    # routed reply, a message sent between turns): a redelivered turn's repeat is found by it
    delivery: str | None = None


@dataclass(frozen=True)
class Delivery:
    message_id: str
    team: str
    member: str
    text: str
    state: str
    attempts: int
    reply: str | None
    error_code: str | None
    error_message: str | None
    retryable: bool | None
    notes: tuple[str, ...] = ()
    origin: Origin = Origin()
    usage: dict[str, Any] | None = None
    created_at: float | None = None  # the message's, journaled by send
    updated_at: float | None = None  # the delivery's last change
    # the runtime session the message (or its continuation) last reached the member on; None:
    # no attempt reached the runtime yet (or it had no session then)
    sent_session: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_wire(self, attachments: list[PlannedAttachment] | None = None) -> MessageDoc:
        error = None
        if self.error_code:
            error = DeliveryError(code=self.error_code, message=self.error_message,
                                  retryable=bool(self.retryable))
        return MessageDoc(
            id=self.message_id, text=self.text, state=self.state,  # type: ignore[arg-type]
            reply=self.reply, attempts=self.attempts, error=error, notes=list(self.notes),
            attachments=[a.to_ref() for a in attachments or []],
            sender=self.origin.sender or "operator", to=self.member,
            kind=self.origin.kind,  # type: ignore[arg-type]
            chain_id=self.origin.chain_id, depth=self.origin.depth,
            reply_to=self.origin.reply_to, usage=self.usage,
            created_at=_iso(self.created_at), updated_at=_iso(self.updated_at))


def _iso(when: float | None) -> str | None:
    return None if when is None else (
        datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds"))


_DELIVERY_COLUMNS = (
    "d.message_id, d.team, d.member, m.text, d.state, d.attempts, d.reply, d.error_code, "
    "d.error_message, d.retryable, d.notes, m.sender, m.kind, m.chain_id, m.depth, m.reply_to, "
    "d.usage, m.created_at, d.updated_at, d.sent_session, m.origin_delivery"
)


_ATTACHMENT_COLUMNS = (
    "message_id, member, position, name, original_sha256, original_mime, original_bytes, "
    "variant_id, purpose, limits, sha256, mime, width, height, bytes, described_by, description"
)


def limits_json(limits: Limits) -> str:
    return limits.to_json()


def _attachment_row(message_id: str, member: str, p: PlannedAttachment) -> tuple[Any, ...]:
    v = p.variant
    return (message_id, member, p.position, p.name, p.original_sha256, p.original_mime,
            p.original_bytes, v.variant_id, v.purpose, limits_json(v.limits), v.sha256, v.mime,
            v.width, v.height, v.bytes, p.described_by, p.description)


def _planned(row: sqlite3.Row) -> PlannedAttachment:
    variant = PlannedVariant(row["variant_id"], row["purpose"], row["sha256"], row["mime"],
                             row["width"], row["height"], row["bytes"],
                             Limits.from_json(row["limits"]))
    return PlannedAttachment(row["position"], row["name"], row["original_sha256"],
                             row["original_mime"], row["original_bytes"], variant,
                             described_by=row["described_by"], description=row["description"])


def _delivery(row: sqlite3.Row) -> Delivery:
    retryable = row["retryable"]
    return Delivery(
        row["message_id"], row["team"], row["member"], row["text"], row["state"],
        row["attempts"], row["reply"], row["error_code"], row["error_message"],
        None if retryable is None else bool(retryable),
        tuple(json.loads(row["notes"])) if row["notes"] else (),
        Origin(row["sender"], row["kind"], row["chain_id"], row["depth"], row["reply_to"],
               row["origin_delivery"]),
        json.loads(row["usage"]) if row["usage"] else None,
        row["created_at"], row["updated_at"], row["sent_session"],
    )


class Store:
    """The journal's one connection (use from one thread at a time)."""

    def __init__(self, path: Path) -> None:
        try:
            # Created 0600 before SQLite opens it: the -wal and -shm files take its mode.
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            path.chmod(0o600)
        except OSError as exc:
            raise StoreError(f"cannot open the journal {path}: {exc.strerror}") from exc
        try:
            self._group: _Group | None = None  # set while run_group runs its calls
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # + an fsync per durable commit
            self._wal = f"{os.path.realpath(path)}-wal"  # SQLite keeps it beside the target
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the journal {path}: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    # -- group commit -------------------------------------------------------------------------

    def run_group(self, calls: Sequence[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        """Run ``calls`` in one transaction, each write a savepoint of it, then commit once:
        one fsync for every call that was waiting (group commit). Each call's outcome is
        ``(True, result)`` or ``(False, exception)``; a call that fails rolls back its own
        savepoint only. If the commit itself fails, every call that wrote fails with it
        (a call that only read keeps its result); nothing is reported written that is not."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:  # e.g. busy or full: each call on its own, as without a group
            return [_outcome(call) for call in calls]
        group = _Group()
        self._group = group
        outcomes, wrote = [], []
        try:
            for call in calls:
                before, group.savepoints = self._db.total_changes, 0
                outcomes.append(_outcome(call))
                changed = self._db.total_changes != before
                wrote.append(changed or group.savepoints > 0)
                group.durable |= changed and group.savepoints == 0  # a write outside _tx
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        finally:
            self._group = None
        try:
            self._commit(durable=group.durable)
        except StoreError as exc:
            return [(False, exc) if did else outcome for outcome, did in zip(outcomes, wrote,
                                                                              strict=True)]
        return outcomes

    def _commit(self, *, durable: bool) -> None:
        """COMMIT, then (durable) fsync the WAL that now holds the commit — the row is on disk
        before the caller hears it was written."""
        try:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"the journal could not be written: {exc}") from exc
        if durable:
            try:
                descriptor = os.open(self._wal, os.O_RDONLY)
                try:
                    os.fsync(descriptor)
                finally:
                    os.close(descriptor)
            except OSError as exc:
                raise StoreError("the journal could not be made durable: "
                                 f"{exc.strerror or exc}") from exc

    @contextmanager
    def _savepoint(self, group: _Group, *, durable: bool) -> Iterator[None]:
        try:
            self._db.execute("SAVEPOINT tc_call")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK TO tc_call")
                self._db.execute("RELEASE tc_call")
                raise
            self._db.execute("RELEASE tc_call")
        except sqlite3.Error as exc:
            raise StoreError(f"the journal could not be written: {exc}") from exc
        group.savepoints += 1
        group.durable |= durable

    @property
    def connection(self) -> sqlite3.Connection:
        """For the modules that keep their own tables in the journal file (variant_cache)."""
        return self._db

    def transaction(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (see ``_tx``), for those same modules."""
        return self._tx(durable=durable)

    @contextmanager
    def _tx(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction. ``durable=False`` commits without the fsync
        (``synchronous=NORMAL``): the row survives a crash of the daemon but may roll back on
        power loss — only used for transitions that recovery undoes anyway (prepared, sent).
        Inside a group (``run_group``) it is a savepoint, committed with the group."""
        if self._group is not None:
            with self._savepoint(self._group, durable=durable):
                yield self._db
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"the journal could not be written: {exc}") from exc
        self._commit(durable=durable)

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the journal has schema {version}, newer than this teamctl ({SCHEMA_VERSION})"
            )
        for number, script in enumerate(_MIGRATIONS[version:], start=version + 1):
            with self._tx() as db:
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # -- teams and members --------------------------------------------------------------------

    def save_team(self, name: str, file: str, config: dict[str, Any],
                  members: list[tuple[str, str]]) -> None:
        """Register (or re-register) a team as running; keep session ids of kept members."""
        now = time.time()
        with self._tx() as db:
            seq = db.execute("SELECT COALESCE(MAX(launch_seq), 0) + 1 FROM teams").fetchone()[0]
            db.execute(
                "INSERT INTO teams (name, file, config_json, desired, launched_at, launch_seq) "
                "VALUES (?, ?, ?, 'running', ?, ?) ON CONFLICT(name) DO UPDATE SET "
                "file=excluded.file, config_json=excluded.config_json, desired='running', "
                "launched_at=excluded.launched_at, launch_seq=excluded.launch_seq",
                (name, file, json.dumps(config), now, seq),
            )
            names = [m for m, _ in members]
            db.execute(
                f"DELETE FROM members WHERE team = ? AND name NOT IN "
                f"({','.join('?' * len(names))})", (name, *names),
            )
            for member, runtime in members:
                db.execute(
                    "INSERT INTO members (team, name, runtime) VALUES (?, ?, ?) "
                    "ON CONFLICT(team, name) DO UPDATE SET runtime=excluded.runtime, "
                    "session_id=CASE WHEN members.runtime = excluded.runtime "
                    "THEN members.session_id END",
                    (name, member, runtime),
                )

    def set_team_desired(self, name: str, desired: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE teams SET desired = ? WHERE name = ?", (desired, name))

    def teams(self, *, desired: str | None = None) -> list[TeamRecord]:
        sql = "SELECT name, file, config_json, desired FROM teams"
        args: tuple[Any, ...] = ()
        if desired:
            sql, args = sql + " WHERE desired = ?", (desired,)
        rows = self._db.execute(sql + " ORDER BY launch_seq", args).fetchall()
        return [TeamRecord(r["name"], r["file"], json.loads(r["config_json"]), r["desired"])
                for r in rows]

    def session_id(self, team: str, member: str) -> str | None:
        row = self._db.execute(
            "SELECT session_id FROM members WHERE team = ? AND name = ?", (team, member)
        ).fetchone()
        return None if row is None else row["session_id"]

    def set_session_id(self, team: str, member: str, session_id: str | None) -> None:
        with self._tx() as db:
            db.execute("UPDATE members SET session_id = ? WHERE team = ? AND name = ?",
                       (session_id, team, member))

    # -- worktrees ----------------------------------------------------------------------------

    def save_worktree(self, tree: Worktree) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO worktrees (team, member, path, branch, base, "
                "base_commit, repo, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (tree.team, tree.member, str(tree.path), tree.branch, tree.base,
                 tree.base_commit, str(tree.repo), time.time()))

    def worktrees(self, team: str | None = None) -> list[Worktree]:
        sql = "SELECT team, member, path, branch, base, base_commit, repo FROM worktrees"
        rows = self._db.execute(sql + (" WHERE team = ?" if team else "") + " ORDER BY team, "
                                "created_at", (team,) if team else ()).fetchall()
        return [Worktree(r["team"], r["member"], Path(r["path"]), r["branch"], r["base"],
                         r["base_commit"], Path(r["repo"])) for r in rows]

    def forget_worktree(self, team: str, member: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM worktrees WHERE team = ? AND member = ?", (team, member))

    # -- messages and deliveries --------------------------------------------------------------

    def add_message(self, message_id: str, team: str, text: str, members: list[str],
                    attachments: dict[str, list[PlannedAttachment]] | None = None,
                    origin: Origin | None = None) -> None:
        """Journal a message, its deliveries (state ``queued``) and, per member, the attachment
        variants it carries, in one transaction."""
        now = time.time()
        o = origin or Origin()
        with self._tx() as db:
            db.execute("INSERT INTO messages (id, team, text, created_at, sender, kind, "
                       "chain_id, depth, reply_to, origin_delivery) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (message_id, team, text, now, o.sender, o.kind, o.chain_id or message_id,
                        o.depth, o.reply_to, o.delivery))
            db.executemany(
                "INSERT INTO deliveries (message_id, team, member, state, updated_at) "
                "VALUES (?, ?, ?, 'queued', ?)",
                [(message_id, team, member, now) for member in members],
            )
            for member, planned in (attachments or {}).items():
                db.executemany(
                    f"INSERT INTO message_attachments ({_ATTACHMENT_COLUMNS}) "
                    f"VALUES ({','.join('?' * 17)})",
                    [_attachment_row(message_id, member, p) for p in planned],
                )

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

    def chain(self, message_id: str) -> list[Delivery]:
        """Every delivery of the chain ``message_id`` belongs to, in journal order."""
        rows = self._db.execute(
            f"SELECT {_DELIVERY_COLUMNS} FROM deliveries d JOIN messages m ON m.id = d.message_id"
            " WHERE m.chain_id = (SELECT chain_id FROM messages WHERE id = ?) ORDER BY m.seq",
            (message_id,)).fetchall()
        return [_delivery(r) for r in rows]

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
            f"SELECT {_ATTACHMENT_COLUMNS} FROM message_attachments "
            "WHERE message_id = ? AND member = ? ORDER BY position", (message_id, member),
        ).fetchall()
        return [_planned(row) for row in rows]

    def next_queued(self, team: str, member: str) -> Delivery | None:
        """The oldest queued delivery of a member (FIFO by journal order)."""
        row = self._db.execute(
            f"SELECT {_DELIVERY_COLUMNS} FROM deliveries d JOIN messages m ON m.id = d.message_id"
            " WHERE d.team = ? AND d.member = ? AND d.state = 'queued' ORDER BY m.seq LIMIT 1",
            (team, member),
        ).fetchone()
        return None if row is None else _delivery(row)

    def delivery(self, message_id: str, member: str | None = None) -> Delivery | None:
        sql = (f"SELECT {_DELIVERY_COLUMNS} FROM deliveries d JOIN messages m "
               "ON m.id = d.message_id WHERE d.message_id = ?")
        args: tuple[Any, ...] = (message_id,)
        if member is not None:
            sql, args = sql + " AND d.member = ?", (*args, member)
        row = self._db.execute(sql, args).fetchone()
        return None if row is None else _delivery(row)

    def history(self, team: str, member: str, *, limit: int | None = None,
                before: str | None = None) -> tuple[list[Delivery], bool]:
        """A member's deliveries, oldest first: the newest ``limit`` (all when None) of those
        journaled before message ``before``; and whether older ones remain."""
        sql = (f"SELECT {_DELIVERY_COLUMNS} FROM deliveries d JOIN messages m "
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
        return [_delivery(r) for r in reversed(rows[:limit])], more

    def attachments_of(self, message_ids: list[str], member: str
                       ) -> dict[str, list[PlannedAttachment]]:
        """The attachments of several messages to one member, in one query."""
        found: dict[str, list[PlannedAttachment]] = {m: [] for m in message_ids}
        for start in range(0, len(message_ids), 500):
            chunk = message_ids[start:start + 500]
            rows = self._db.execute(
                f"SELECT {_ATTACHMENT_COLUMNS} FROM message_attachments WHERE member = ? AND "
                f"message_id IN ({','.join('?' * len(chunk))}) ORDER BY position",
                (member, *chunk),
            ).fetchall()
            for row in rows:
                found[row["message_id"]].append(_planned(row))
        return found

    def queued_counts(self, team: str) -> dict[str, int]:
        rows = self._db.execute(
            "SELECT member, COUNT(*) AS n FROM deliveries WHERE team = ? "
            "AND state IN ('queued', 'prepared', 'sent') GROUP BY member", (team,),
        ).fetchall()
        return {r["member"]: r["n"] for r in rows}

    def claim_next(self, team: str, member: str
                   ) -> tuple[Delivery, list[PlannedAttachment]] | None:
        """The oldest queued delivery of a member, moved to ``prepared`` (an attempt counted),
        with its attachments — one call, not fsynced (see ``claim``); None if the queue is
        empty."""
        delivery = self.next_queued(team, member)
        if delivery is None:
            return None
        return delivery, self.claim(delivery.message_id, member)

    def claim(self, message_id: str, member: str) -> list[PlannedAttachment]:
        """``queued → prepared`` (an attempt counted) and the delivery's attachments, in one
        call. Not fsynced: after a power loss it is at worst queued again, which recovery does
        to every prepared row anyway."""
        with self._tx(durable=False) as db:
            cur = db.execute(
                "UPDATE deliveries SET state='prepared', attempts=attempts+1, updated_at=? "
                "WHERE message_id=? AND member=? AND state='queued'",
                (time.time(), message_id, member),
            )
            self._expect_one(cur, message_id, member, "prepared")
        return self.attachments(message_id, member)

    def mark_sent(self, message_id: str, member: str, session: str | None = None) -> None:
        """``prepared → sent``, with the runtime session the turn went to (None: unknown yet,
        the one it last went to is kept). Not fsynced (see ``claim``)."""
        with self._tx(durable=False) as db:
            cur = db.execute(
                "UPDATE deliveries SET state='sent', sent_session=COALESCE(?, sent_session), "
                "updated_at=? WHERE message_id=? AND member=? AND state='prepared'",
                (session, time.time(), message_id, member),
            )
            self._expect_one(cur, message_id, member, "sent")

    def mark_answered(self, message_id: str, member: str, reply: str,
                      notes: tuple[str, ...] = ()) -> None:
        with self._tx() as db:
            cur = db.execute(
                "UPDATE deliveries SET state='answered', reply=?, error_code=NULL, "
                "error_message=NULL, retryable=NULL, notes=?, updated_at=? "
                "WHERE message_id=? AND member=? AND state IN ('prepared', 'sent')",
                (reply, json.dumps(list(notes)) if notes else None, time.time(),
                 message_id, member),
            )
            self._expect_one(cur, message_id, member, "answered")

    def mark_failed(self, message_id: str, member: str, *, code: str, message: str,
                    retryable: bool, requeue: bool, held: bool = False,
                    session: str | None = None) -> str:
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
            if row is None or row["state"] in TERMINAL_STATES:
                return "missing" if row is None else str(row["state"])
            state = "queued" if held or (requeue and row["attempts"] < MAX_ATTEMPTS) \
                else "failed"
            db.execute(
                "UPDATE deliveries SET state=?, error_code=?, error_message=?, retryable=?, "
                "attempts=MAX(attempts - ?, 0), updated_at=?, sent_session=CASE WHEN "
                "state = 'sent' THEN COALESCE(?, sent_session) ELSE sent_session END "
                "WHERE message_id=? AND member=?",
                (state, code, message, int(retryable), int(held), time.time(), session,
                 message_id, member),
            )
            return state

    def recover_in_flight(self) -> list[tuple[str, str, str]]:
        """On daemon start: deliveries left ``prepared``/``sent`` go back to ``queued``, or to
        ``failed`` (retryable) once their attempts are used up. Returns (id, member, state)."""
        changed = []
        with self._tx() as db:
            rows = db.execute(
                "SELECT message_id, member, attempts FROM deliveries "
                "WHERE state IN ('prepared', 'sent')"
            ).fetchall()
            for row in rows:
                state = "queued" if row["attempts"] < MAX_ATTEMPTS else "failed"
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


@dataclass
class _Group:
    """What the calls of one group did: savepoints in the current call, and whether any write
    needs the fsync (a ``durable=False`` transition alone does not)."""

    savepoints: int = 0
    durable: bool = False


def _outcome(call: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        with map_exceptions({sqlite3.Error: _read_failed}):
            return True, call()
    except Exception as exc:  # handed back to the caller that asked for this call
        return False, exc


class _Call:
    __slots__ = ("outcome", "run", "wake")

    def __init__(self, run: Callable[[], Any]) -> None:
        self.run = run
        self.wake = anyio.Event()
        self.outcome: tuple[bool, Any] | None = None


class AsyncStore:
    """Runs Store calls in a worker thread, one group at a time (the single writer).

    Group commit: calls that arrive while a group is being written wait for the next group, and
    a group is one transaction with one fsync, however many calls it holds — under a fan-out,
    a hundred members' answers cost a few fsyncs, not a hundred. A call returns only after the
    commit that holds its write (so ``send`` still returns journaled). The first caller that
    finds no group running leads: it writes groups until the queue is empty.

    Cancellation: a call cancelled before its group started is never run; once its group runs,
    it completes (the thread is not abandoned) and the cancellation is delivered after.
    """

    def __init__(self, store: Store) -> None:
        self.sync = store
        self._queue: list[_Call] = []
        self._leading = False

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one journal call in the writer thread; a raw ``sqlite3.Error`` (a read that
        failed: writes already raise StoreError) comes out as StoreError."""
        call = _Call(lambda: fn(*args, **kwargs))
        self._queue.append(call)
        try:
            while call.outcome is None:
                if not self._leading:
                    await self._lead()
                else:
                    call.wake = anyio.Event()
                    await call.wake.wait()
        except BaseException:
            if call in self._queue:  # cancelled before its group: never run
                self._queue.remove(call)
            if not self._leading and self._queue:  # nobody leads now: a waiting call takes over
                self._queue[0].wake.set()
            raise
        ok, value = call.outcome
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    async def _lead(self) -> None:
        self._leading = True
        try:
            while self._queue:
                await anyio.lowlevel.checkpoint_if_cancelled()
                group, self._queue = self._queue, []
                with anyio.CancelScope(shield=True):  # a group, once taken, is answered
                    outcomes = await anyio.to_thread.run_sync(
                        self.sync.run_group, [c.run for c in group])
                for call, outcome in zip(group, outcomes, strict=True):
                    call.outcome = outcome
                    call.wake.set()
        finally:
            self._leading = False


def _read_failed(exc: BaseException) -> StoreError:
    return StoreError(f"the journal could not be read: {exc}")
