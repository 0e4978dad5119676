"""The journal's migrations, now declared by each table's owner, are the ones teamctl always
ran: the same statements under the same ``user_version`` numbers, so a journal an earlier
teamctl left opens and migrates as before. ``data/journal_migrations_v11.json`` is the list
``store._MIGRATIONS`` held when it was one tuple in ``store.py`` (schema 11);
``data/journal_migrations_v12.json`` is that list and the board's tables (schema 12)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.daemon.journal import collect
from orchestrator.daemon.migrations import MIGRATIONS, SCHEMA_VERSION, open_journal

_DATA = Path(__file__).parent / "data"
EARLIER = json.loads((_DATA / "journal_migrations_v12.json").read_text())
ONE_TUPLE = json.loads((_DATA / "journal_migrations_v11.json").read_text())


def _statements(script: str) -> list[str]:
    """What the migration runner executes of a script (it splits on ";")."""
    return [s.strip() for s in script.split(";") if s.strip()]


def _schema(path: Path) -> list[tuple[str, str, str, str | None]]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                          "ORDER BY type, name").fetchall()
    finally:
        db.close()


def test_the_owners_migrations_are_the_earlier_ones_statement_for_statement() -> None:
    """Migration n runs the statements it always ran, byte for byte and in the same order,
    however its table's owners share it out."""
    assert SCHEMA_VERSION == len(EARLIER) + 15 == 27
    assert [_statements(s) for s in MIGRATIONS[:12]] == [_statements(s) for s in EARLIER]


def test_version_13_adds_the_task_a_message_belongs_to_and_nothing_else() -> None:
    """Schema 13 (the board's messages: which task a message belongs to) is one nullable
    column on ``messages``, after the twelve that stay as they were."""
    assert _statements(MIGRATIONS[12]) == ["ALTER TABLE messages ADD COLUMN task_id INTEGER"]


def test_version_14_adds_the_document_columns_of_an_attachment_and_nothing_else() -> None:
    """Schema 14 (documents, issue 31): four nullable columns on ``message_attachments`` — an
    image row of an earlier journal reads as an image (kind NULL)."""
    assert _statements(MIGRATIONS[13]) == [
        f"ALTER TABLE message_attachments ADD COLUMN {column}"
        for column in ("kind TEXT", "route TEXT", "pages INTEGER", "page_variants TEXT")]


def test_version_15_adds_the_notifiers_tables_and_nothing_else() -> None:
    """Schema 15 (notifications, issue 32): the action tokens' used nonces (with an index by
    when they were used, to drop the old ones) and the response topics' cursors, both new
    tables owned by ``notify_journal`` — no earlier table changes."""
    assert _statements(MIGRATIONS[14]) == [
        "CREATE TABLE notify_used_nonces (\n    nonce TEXT PRIMARY KEY,\n    item TEXT NOT NULL,"
        "\n    decision TEXT NOT NULL,\n    used_at REAL NOT NULL\n)",
        "CREATE INDEX notify_used_nonces_by_time ON notify_used_nonces (used_at)",
        "CREATE TABLE notify_cursors (\n    topic TEXT PRIMARY KEY,\n    last_id TEXT NOT NULL\n)"]


def test_version_16_adds_the_sha256_of_an_approvals_request_and_nothing_else() -> None:
    """Schema 16 (issue 44, what the operator reads is what runs): one nullable column on
    ``approvals`` — a request an earlier teamctl journaled reads with no sha256."""
    assert _statements(MIGRATIONS[15]) == ["ALTER TABLE approvals ADD COLUMN sha256 TEXT"]


def test_version_17_records_where_each_worktree_was_made_and_nothing_else() -> None:
    """Schema 17 (git is part of the boundary, issue 44): a worktree's common dir and admin
    dir as teamctl found them when it made the worktree — two nullable columns (an earlier
    record is completed at its next use), no earlier table changes."""
    assert _statements(MIGRATIONS[16]) == [
        "ALTER TABLE worktrees ADD COLUMN common_dir TEXT",
        "ALTER TABLE worktrees ADD COLUMN admin_dir TEXT"]


def test_version_18_says_why_a_turns_usage_is_a_lower_bound_and_nothing_else() -> None:
    """Schema 18 (every dollar counted, issue 45): one nullable column on ``usage`` — why a
    turn's figures leave some of the member's API calls out; an earlier row reads as whole."""
    assert _statements(MIGRATIONS[17]) == ["ALTER TABLE usage ADD COLUMN unreported TEXT"]


def test_version_19_adds_the_slots_table_and_nothing_else() -> None:
    """Schema 19 (a port and a database name of its own, issue 47): one new table owned by
    ``daemon/slots``, each value unique in its space — no earlier table changes."""
    assert _statements(MIGRATIONS[18]) == [
        "CREATE TABLE slots (\n    team TEXT NOT NULL,\n    member TEXT NOT NULL,\n"
        "    var TEXT NOT NULL,\n    kind TEXT NOT NULL,\n    space TEXT NOT NULL,\n"
        "    value TEXT NOT NULL,\n    PRIMARY KEY (team, member, var),\n"
        "    UNIQUE (space, value)\n)"]


def test_version_20_adds_the_footprints_memory_admission_learns_and_nothing_else() -> None:
    """Schema 20 (starts that fit, issue 47): one new table owned by ``admission`` — each
    launch's peak resident memory by kind and place, with an index to keep the newest —
    no earlier table changes."""
    assert _statements(MIGRATIONS[19]) == [
        "CREATE TABLE member_footprints (\n    launch TEXT PRIMARY KEY,\n    kind TEXT NOT NULL,"
        "\n    place TEXT NOT NULL,\n    peak_bytes INTEGER NOT NULL,\n    at REAL NOT NULL\n)",
        "CREATE INDEX member_footprints_by_kind ON member_footprints (kind, place, at)"]


def test_version_21_adds_the_merge_queue_and_the_tasks_notices_and_nothing_else() -> None:
    """Schema 21 (work that lands, issue 49): new tables only — the board's ``task_notices``
    (the events told about a task, once per source id) and the merge queue's
    ``land_entries``, ``land_teams`` and ``land_snapshots``; no earlier table changes."""
    statements = _statements(MIGRATIONS[20])
    assert all(s.startswith(("CREATE TABLE", "CREATE INDEX")) for s in statements)
    created = [s.split("(")[0].split()[-1] for s in statements if s.startswith("CREATE TABLE")]
    assert created == ["task_notices", "land_entries", "land_teams", "land_snapshots"]


def test_version_22_adds_the_held_quota_accounts_and_nothing_else() -> None:
    """Schema 22 (quota windows, issue 48): one new table owned by the quota, an account held
    until its reset — no earlier table changes."""
    assert _statements(MIGRATIONS[21]) == [
        "CREATE TABLE quota_holds (\n    account TEXT PRIMARY KEY,\n    window_name TEXT,\n"
        "    until REAL NOT NULL,\n    reason TEXT NOT NULL,\n    named INTEGER NOT NULL,\n"
        "    probing INTEGER NOT NULL,\n    held_at REAL NOT NULL\n)"]


def test_version_23_adds_the_forges_taken_issues_and_nothing_else() -> None:
    """Schema 23 (the forge, issue 50): one new table owned by the forge, each issue taken as
    a task by its id — no earlier table changes."""
    statements = _statements(MIGRATIONS[22])
    assert len(statements) == 1 and statements[0].startswith("CREATE TABLE forge_issues (")


def test_version_24_adds_the_attempts_and_the_senders_attempt_and_nothing_else() -> None:
    """Schema 24 (one trace per piece of work, issue 51): a new table owned by the queue, each
    attempt of a delivery, and one nullable column on ``messages`` — the sender's attempt a
    teammate's message came from; no earlier table changes otherwise."""
    statements = _statements(MIGRATIONS[23])
    assert len(statements) == 2 and statements[0].startswith("CREATE TABLE turn_attempts (")
    assert statements[1] == "ALTER TABLE messages ADD COLUMN origin_attempt INTEGER"


def test_version_25_adds_the_forges_pull_requests_and_nothing_else() -> None:
    """Schema 25 (the forge's pull requests, issue 50): two new tables owned by the forge —
    each task's pull request, and the merge-queue entry each team's pull requests start
    after — no earlier table changes."""
    statements = _statements(MIGRATIONS[24])
    assert [s.split("(")[0].strip() for s in statements] == [
        "CREATE TABLE forge_pulls", "CREATE TABLE forge_pull_teams"]


def test_version_26_adds_the_tool_calls_and_the_task_checks_and_nothing_else() -> None:
    """Schema 26 (issue 51's tool calls, gates and integration checks as spans): telemetry's
    two tables and their indexes — no earlier table changes."""
    statements = _statements(MIGRATIONS[25])
    created = [s.split("(")[0].split()[-1] for s in statements if s.startswith("CREATE TABLE")]
    assert created == ["tool_calls", "task_checks"]
    assert all(s.startswith(("CREATE TABLE", "CREATE INDEX")) for s in statements), statements


def test_version_27_adds_when_planning_a_messages_attachments_began_and_nothing_else() -> None:
    """Schema 27 (issue 51's planning span): one nullable column on ``messages``."""
    assert _statements(MIGRATIONS[26]) == ["ALTER TABLE messages ADD COLUMN planned_at REAL"]


def test_the_board_added_version_12_and_changed_no_earlier_one() -> None:
    """Schema 12 (the board: tasks, task_deps, task_events) came after the eleven the one
    tuple held, which stay as they were."""
    assert [_statements(s) for s in EARLIER[:11]] == [_statements(s) for s in ONE_TUPLE]
    created = [s.split("(")[0].split()[-1] for s in _statements(EARLIER[11])
               if s.startswith("CREATE TABLE")]
    assert created == ["tasks", "task_deps", "task_events"]


@pytest.mark.parametrize("version", range(len(EARLIER) + 1))
def test_a_journal_an_earlier_teamctl_left_opens_and_migrates_as_before(
        tmp_path: Path, version: int) -> None:
    """A journal built by the earlier migrations up to ``version`` (as their runner did: each
    statement, then the version) opens, reaches today's version and the same schema as a
    journal made today — every table, index and its SQL text."""
    old = tmp_path / "old.db"
    raw = sqlite3.connect(old)
    for script in EARLIER[:version]:
        for statement in _statements(script):
            raw.execute(statement)
    raw.execute(f"PRAGMA user_version = {version}")
    raw.commit()
    raw.close()
    open_journal(old).close()
    open_journal(tmp_path / "new.db").close()
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert _schema(old) == _schema(tmp_path / "new.db")


def test_owners_that_skip_a_version_are_refused() -> None:
    """The numbers are the journal's history: a gap (a migration lost between owners) is an
    error when the list is put together, never a silently shifted ``user_version``."""
    assert collect({1: "CREATE TABLE a (x)"}, {2: "CREATE TABLE b (x)"}) == (
        "CREATE TABLE a (x)", "CREATE TABLE b (x)")
    with pytest.raises(ValueError, match="skip a version"):
        collect({1: "CREATE TABLE a (x)"}, {3: "CREATE TABLE c (x)"})


def test_a_migration_that_fails_leaves_the_journal_as_it_was(tmp_path: Path) -> None:
    """The steps a journal lacks run in one transaction, committed once: a step that fails
    (here the last, naming a table that is not there) leaves the journal at its old version
    with none of the newer steps' tables — never half migrated — and it opens as before."""
    from orchestrator.daemon.journal._engine import Journal
    from orchestrator.errors import StoreError

    path = tmp_path / "j.db"
    Journal(path, ["CREATE TABLE a (x)"]).close()
    with pytest.raises(StoreError):
        Journal(path, ["CREATE TABLE a (x)", "CREATE TABLE b (x)",
                       "ALTER TABLE missing ADD COLUMN y TEXT"])
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["a"]
    finally:
        db.close()
    journal = Journal(path, ["CREATE TABLE a (x)", "CREATE TABLE b (x)"])
    assert journal.schema_version == 2
    journal.close()
