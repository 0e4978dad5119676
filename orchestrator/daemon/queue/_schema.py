"""The tables of messages and their deliveries (``_store`` owns them and their calls): their
migrations, as ``daemon.migrations`` collects them.

``messages`` (the text, who sent it, the chain and task it belongs to), ``deliveries`` (one per
message × member: state, attempts, reply, typed error, usage, the session it reached),
``message_attachments`` (the variant each member gets — images by sha256 and MIME, never base64;
documents with their route and pages), ``refusals`` (what the router's guards refused) and
``turn_attempts`` (each attempt of a delivery: its launch, times and outcome — the spans of
``teamctl trace``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.daemon.journal import Migrations

__all__ = ["MIGRATIONS"]

MIGRATIONS: Migrations = {
    1: """
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
    # attachments. Images are referenced by sha256 and MIME (the bytes live in the artifact
    # store), never as base64.
    2: """
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
    # what the runtime refused during a delivery (permission denials), for history
    4: "ALTER TABLE deliveries ADD COLUMN notes TEXT",
    # teammates' messages: who sent it (NULL: the operator), whether it is a routed reply, the
    # chain it belongs to and how deep in it; refusals of the router's guards
    5: """
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
    # what an answered turn used, as its runtime reported it (JSON: tokens, cost)
    6: "ALTER TABLE deliveries ADD COLUMN usage TEXT",
    # described images (issue 18): an attachment delivered as its description, journaled with
    # the message (the descriptions a describer made: describe.py)
    9: """
    ALTER TABLE message_attachments ADD COLUMN described_by TEXT;
    ALTER TABLE message_attachments ADD COLUMN description TEXT;
    """,
    # effects once (issue 26): the session a delivery last reached (a cut turn continues there)
    # and the sender's turn a teammate's message came from (its repeat gets the first receipt)
    11: """
    ALTER TABLE deliveries ADD COLUMN sent_session TEXT;
    ALTER TABLE messages ADD COLUMN origin_delivery TEXT;
    CREATE INDEX messages_by_origin_delivery ON messages (origin_delivery, sender)
        WHERE origin_delivery IS NOT NULL;
    """,
    # the board (issue 28): the task a message is about (its sender's, an offer's; NULL: none)
    13: "ALTER TABLE messages ADD COLUMN task_id INTEGER",
    # documents (issue 31): the kind (NULL: an image), the route a document took to the member,
    # a PDF's page count and its rendered pages' variants (JSON; their bytes: artifacts)
    14: """
    ALTER TABLE message_attachments ADD COLUMN kind TEXT;
    ALTER TABLE message_attachments ADD COLUMN route TEXT;
    ALTER TABLE message_attachments ADD COLUMN pages INTEGER;
    ALTER TABLE message_attachments ADD COLUMN page_variants TEXT
    """,
    # one trace per piece of work (issue 51): each attempt of a delivery — claimed, sent,
    # ended, how, on which launch of which runtime and model — and the sender's attempt a
    # teammate's message came from (``origin_delivery``'s ordinal in ``turn_attempts``)
    24: """
    CREATE TABLE turn_attempts (
        message_id TEXT NOT NULL,
        member TEXT NOT NULL,
        ordinal INTEGER NOT NULL,
        team TEXT NOT NULL,
        epoch INTEGER,
        runtime TEXT,
        model TEXT,
        claimed_at REAL NOT NULL,
        sent_at REAL,
        ended_at REAL,
        outcome TEXT,
        error_code TEXT,
        session_id TEXT,
        PRIMARY KEY (message_id, member, ordinal)
    );
    ALTER TABLE messages ADD COLUMN origin_attempt INTEGER
    """,
    # when planning its attachments began (issue 51: the trace's "plan attachments" span,
    # from then to the message's journaling); NULL: a message with none
    27: """
    ALTER TABLE messages ADD COLUMN planned_at REAL
    """,
}
