"""The journal: schema versioning, atomic journaling, FIFO, transitions and crash recovery."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from orchestrator.daemon.journal import _team_records as team_records
from orchestrator.daemon.migrations import SCHEMA_VERSION, open_journal
from orchestrator.daemon.queue import NewMessage, Origin
from orchestrator.daemon.queue._delivery import MAX_ATTEMPTS
from orchestrator.errors import StoreError

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.daemon.queue import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    db = open_journal(tmp_path / "state.db")
    team_records.save_team(db, "web", "/t.toml", {"k": 1}, [("lead", "claude"), ("rev", "codex")])
    return db


def test_wal_full_sync_and_schema_version(tmp_path: Path, store: Store) -> None:
    raw = sqlite3.connect(tmp_path / "state.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert store.schema_version == SCHEMA_VERSION
    assert oct((tmp_path / "state.db").stat().st_mode & 0o777) == "0o600"


def test_reopening_does_not_migrate_again(tmp_path: Path, store: Store) -> None:
    store.add_message("01A", "web", "hello", ["lead"])
    store.close()
    again = open_journal(tmp_path / "state.db")
    assert again.next_queued("web", "lead") is not None


def test_a_newer_schema_is_refused(tmp_path: Path, store: Store) -> None:
    store.close()
    raw = sqlite3.connect(tmp_path / "state.db")
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StoreError, match="newer than this teamctl"):
        open_journal(tmp_path / "state.db")


def test_a_write_and_the_message_it_makes_are_one_transaction(store: Store) -> None:
    """The board's hand-over: another owner's write and the message telling a member of it
    are journaled together — a message that cannot be journaled takes the write with it, and
    a write with nothing to tell sends nothing."""
    store.connection.execute("CREATE TABLE claims (id INTEGER)")

    def claim(db: sqlite3.Connection) -> int:
        db.execute("INSERT INTO claims VALUES (7)")
        return 7

    def tell(task: int) -> NewMessage:
        return NewMessage("web", f"you own T{task}", ["lead"], Origin(task_id=task))

    def broken(task: int) -> NewMessage:
        raise StoreError("the journal could not be written: database or disk is full")

    with pytest.raises(StoreError):
        store.add_message_after(claim, broken)
    assert store.connection.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    assert store.add_message_after(lambda db: None, tell) is None
    assert store.next_queued("web", "lead") is None
    assert store.add_message_after(claim, tell) == 7
    queued = store.next_queued("web", "lead")
    assert queued is not None and queued.text == "you own T7" and queued.origin.task_id == 7
    assert store.connection.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 1


def test_fifo_by_journal_order_not_by_id(store: Store) -> None:
    store.add_message("ZZZ", "web", "first", ["lead"])
    store.add_message("AAA", "web", "second", ["lead"])
    first = store.next_queued("web", "lead")
    assert first is not None and first.text == "first"


def test_happy_path_transitions(store: Store) -> None:
    store.add_message("01A", "web", "hello", ["lead"])
    store.claim("01A", "lead")
    store.mark_sent("01A", "lead")
    store.mark_answered("01A", "lead", "hi back")
    delivery = store.delivery("01A", "lead")
    assert delivery is not None
    assert (delivery.state, delivery.attempts, delivery.reply) == ("answered", 1, "hi back")
    assert store.next_queued("web", "lead") is None


def test_sent_cannot_be_skipped_to_from_queued(store: Store) -> None:
    store.add_message("01A", "web", "hello", ["lead"])
    with pytest.raises(StoreError):
        store.mark_sent("01A", "lead")


def test_requeue_until_attempts_are_used_up(store: Store) -> None:
    store.add_message("01A", "web", "hello", ["lead"])
    states = []
    for _ in range(MAX_ATTEMPTS):
        store.claim("01A", "lead")
        store.mark_sent("01A", "lead")
        states.append(store.mark_failed("01A", "lead", code="runtime_exited", message="x",
                                        retryable=True, requeue=True))
    assert states == ["queued"] * (MAX_ATTEMPTS - 1) + ["failed"]
    delivery = store.delivery("01A", "lead")
    assert delivery is not None and delivery.error_code == "runtime_exited"


def test_an_answered_delivery_is_never_failed_or_requeued(store: Store) -> None:
    store.add_message("01A", "web", "hello", ["lead"])
    store.claim("01A", "lead")
    store.mark_answered("01A", "lead", "done")
    assert store.mark_failed("01A", "lead", code="x", message="y", retryable=True,
                             requeue=True) == "answered"
    assert store.recover_in_flight() == []


def test_recover_in_flight_after_a_daemon_crash(store: Store) -> None:
    store.add_message("01A", "web", "a", ["lead"])
    store.add_message("01B", "web", "b", ["rev"])
    store.claim("01A", "lead")
    store.mark_sent("01A", "lead")
    store.claim("01B", "rev")
    assert sorted(store.recover_in_flight()) == [("01A", "lead", "queued"),
                                                 ("01B", "rev", "queued")]
    queued = store.next_queued("web", "lead")
    assert queued is not None and queued.attempts == 1


def test_relaunch_keeps_session_ids_of_kept_members(store: Store) -> None:
    team_records.set_session_id(store, "web", "lead", "s-lead")
    team_records.set_session_id(store, "web", "rev", "s-rev")
    team_records.save_team(store, "web", "/t.toml", {}, [("lead", "claude"), ("rev", "claude")])
    assert team_records.session_id(store, "web", "lead") == "s-lead"
    assert team_records.session_id(store, "web", "rev") is None, \
        "another runtime: its session cannot carry"
    team_records.save_team(store, "web", "/t.toml", {}, [("lead", "claude")])
    assert team_records.session_id(store, "web", "rev") is None


def test_desired_state(store: Store) -> None:
    assert [t.name for t in team_records.teams(store, desired="running")] == ["web"]
    team_records.set_team_desired(store, "web", "stopped")
    assert team_records.teams(store, desired="running") == []


def test_a_failed_journal_read_is_a_store_error(tmp_path: Path) -> None:
    """Reads raised raw sqlite3 errors past the journal: now StoreError, as writes do."""
    import anyio

    from orchestrator.daemon.queue import AsyncStore

    store = open_journal(tmp_path / "state.db")
    store.close()

    async def read() -> None:
        await AsyncStore(store).teams()

    with pytest.raises(StoreError, match="could not be read"):
        anyio.run(read)


def test_a_journal_of_the_first_round_is_migrated_with_its_messages(tmp_path: Path) -> None:
    """Schema 2 (the first round's) → today's: old messages keep their state and reply, come
    from the operator, and are a chain of their own (teamctl thread finds them)."""
    from orchestrator.daemon import migrations as store_module

    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    for script in store_module.MIGRATIONS[:2]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 2")
    db.execute("INSERT INTO messages (id, team, text, created_at) VALUES "
               "('01JDQ3X2K3R9W0FQ6Z5N4M8P7D', 'web', 'old message', 0)")
    db.execute("INSERT INTO deliveries (message_id, team, member, state, attempts, reply, "
               "updated_at) VALUES ('01JDQ3X2K3R9W0FQ6Z5N4M8P7D', 'web', 'lead', 'answered', "
               "1, 'old reply', 0)")
    db.commit()
    db.close()
    store = open_journal(path)
    assert store.schema_version == SCHEMA_VERSION
    [old] = store.chain("01JDQ3X2K3R9W0FQ6Z5N4M8P7D")
    assert (old.text, old.state, old.reply) == ("old message", "answered", "old reply")
    assert old.origin.sender is None and old.origin.chain_id == old.message_id
