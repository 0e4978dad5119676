"""Group commit: concurrent journal calls share one transaction and one fsync, each call keeps
its own outcome, and a call returns only after the commit that holds its write."""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.daemon.journal import _engine as journal
from orchestrator.daemon.migrations import open_journal
from orchestrator.daemon.queue import AsyncStore
from orchestrator.errors import StoreError
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.anyio, pytest.mark.real_fsync]  # grouping needs a flush that takes time


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


async def test_a_burst_of_sends_shares_fsyncs_and_every_message_is_journaled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a fan-out, each durable write used to cost its own fsync (the journal's ceiling
    was ~1/fsync-latency messages a second): 200 concurrent add_message calls now commit in
    far fewer fsyncs, and each is readable once its call returned."""
    store = open_journal(tmp_path / "j.db")
    db = AsyncStore(store)
    fsyncs = _fsyncs(monkeypatch)

    async def add(n: int) -> None:
        await db.add_message(f"m{n:03d}", "t", f"text {n}", ["lead"])
        assert store.delivery(f"m{n:03d}", "lead") is not None

    async with anyio.create_task_group() as tg:
        for n in range(200):
            tg.start_soon(add, n)
    assert len(fsyncs) < 100, f"{len(fsyncs)} fsyncs for 200 writes: no grouping"
    assert len(store.history("t", "lead")[0]) == 200
    store.close()
    reopened = open_journal(tmp_path / "j.db")
    assert len(reopened.history("t", "lead")[0]) == 200, "every grouped write is on disk"


async def test_one_failing_call_in_a_group_fails_alone(tmp_path: Path) -> None:
    """A call that fails (a transition that does not apply) rolls back its own savepoint; the
    other calls of its group are written."""
    store = open_journal(tmp_path / "j.db")
    db = AsyncStore(store)
    results: dict[str, object] = {}

    async def run(name: str, fn: object, *args: object) -> None:
        try:
            results[name] = await fn(*args)  # type: ignore[operator]
        except StoreError as exc:
            results[name] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "a", db.add_message, "a", "t", "a", ["lead"])
        tg.start_soon(run, "bad", db.mark_answered, "nope", "lead", "r")
        tg.start_soon(run, "b", db.add_message, "b", "t", "b", ["lead"])
    assert isinstance(results["bad"], StoreError)
    assert results["a"] is None and results["b"] is None
    assert [d.message_id for d in store.history("t", "lead")[0]] == ["a", "b"]


def test_a_failed_commit_fails_every_call_that_wrote_and_keeps_reads(tmp_path: Path) -> None:
    """If the group's commit fails, no call that wrote is told it was written; a call that
    only read keeps its answer."""
    store = open_journal(tmp_path / "j.db")
    store.add_message("x", "t", "x", ["lead"])

    def broken_commit(*, durable: bool) -> None:
        store._db.execute("ROLLBACK")
        raise StoreError("the journal could not be written: disk I/O error")

    store._commit = broken_commit  # type: ignore[method-assign]
    outcomes = store.run_group([lambda: store.add_message("y", "t", "y", ["lead"]),
                                lambda: store.delivery("x", "lead")])
    (wrote_ok, wrote), (read_ok, read) = outcomes
    assert not wrote_ok and isinstance(wrote, StoreError)
    assert read_ok and read is not None and read.message_id == "x"
    assert store.delivery("y", "lead") is None


async def test_a_cancelled_leader_hands_the_queue_on(tmp_path: Path) -> None:
    """The caller that leads a group may be cancelled; calls that queued behind it are still
    written and answered (a waiting call takes over), never left waiting forever."""
    store = open_journal(tmp_path / "j.db")
    db = AsyncStore(store)
    gate = anyio.Event()
    entered = anyio.Event()

    def slow_read() -> int:
        anyio.from_thread.run_sync(entered.set)
        anyio.from_thread.run(gate.wait)
        return 1

    async with anyio.create_task_group() as tg:
        leader_scope = anyio.CancelScope()

        async def leader() -> None:
            with leader_scope:
                await db.call(slow_read)
                await db.add_message("late", "t", "late", ["lead"])

        tg.start_soon(leader)
        await entered.wait()
        done: list[str] = []

        async def follower(n: int) -> None:
            await db.add_message(f"f{n}", "t", "f", ["lead"])
            done.append(f"f{n}")

        for n in range(3):
            tg.start_soon(follower, n)
        await all_blocked()
        leader_scope.cancel()
        gate.set()
    assert sorted(done) == ["f0", "f1", "f2"]
    assert store.delivery("late", "lead") is None, "the cancelled call was never run"


def test_a_durable_write_is_fsynced_and_a_transition_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``synchronous=NORMAL`` plus an fsync of the WAL per durable commit: add_message and
    mark_answered pay one each, claim (recovery undoes it) none."""
    store = open_journal(tmp_path / "j.db")
    fsyncs = _fsyncs(monkeypatch)
    store.add_message("m", "t", "x", ["lead"])
    assert len(fsyncs) == 1
    store.claim("m", "lead")
    assert len(fsyncs) == 1
    store.mark_answered("m", "lead", "r")
    assert len(fsyncs) == 2
    mode = store.connection.execute("PRAGMA synchronous").fetchone()[0]
    assert mode == 1, "NORMAL: the fsync is teamctl's, per durable commit"
    assert isinstance(store.connection, sqlite3.Connection)


async def test_the_calls_on_a_messages_way_run_at_once_while_the_writer_is_idle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim, ``sent`` and a delivery's row need no fsync: with no group being written they
    run on the caller's thread (no hop to the writer and back), and pay no fsync; a durable
    write still goes to the writer thread."""
    store = open_journal(tmp_path / "j.db")
    db = AsyncStore(store)
    hops: list[str] = []
    real = anyio.to_thread.run_sync

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(fn, "__name__", "?"))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    await db.add_message("m", "t", "x", ["lead"])
    assert hops == ["run_group"], "a durable write goes to the writer thread"
    fsyncs = _fsyncs(monkeypatch)
    claimed = await db.claim_next("t", "lead")
    assert claimed is not None and claimed[0].message_id == "m"
    await db.mark_sent("m", "lead", "s1")
    delivery = await db.delivery("m", "lead")
    assert delivery is not None and delivery.state == "sent"
    assert delivery.sent_session == "s1"
    assert hops == ["run_group"] and fsyncs == [], "no hop and no fsync on the way"
    assert await db.claim_next("t", "lead") is None


async def test_a_quick_call_waits_for_the_group_being_written(tmp_path: Path) -> None:
    """While the writer thread holds the connection, a quick call queues behind it like any
    call (never two users of the one connection at once) and sees what the group wrote."""
    store = open_journal(tmp_path / "j.db")
    db = AsyncStore(store)
    gate, entered = anyio.Event(), anyio.Event()

    def slow_add() -> None:
        anyio.from_thread.run_sync(entered.set)
        anyio.from_thread.run(gate.wait)
        store.add_message("m", "t", "x", ["lead"])

    seen: list[str | None] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(db.call, slow_add)
        await entered.wait()

        async def claim() -> None:
            claimed = await db.claim_next("t", "lead")
            seen.append(None if claimed is None else claimed[0].message_id)

        tg.start_soon(claim)
        await all_blocked()
        assert seen == [], "the claim waits for the group"
        gate.set()
    assert seen == ["m"]


def test_the_wal_is_checkpointed_after_a_durable_commit_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's automatic checkpoint is off (it would run at the end of whichever commit
    crossed its threshold — a quick call on the event loop's thread); the writer copies the
    WAL into the database and truncates it after a durable commit that finds it large."""
    monkeypatch.setattr(journal, "_CHECKPOINT_BYTES", 64 << 10)
    store = open_journal(tmp_path / "j.db")
    wal = tmp_path / "j.db-wal"
    assert store.connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    store.add_message("m", "t", "x", ["lead"])
    for n in range(100):  # non-durable commits alone: the WAL only grows
        with store.transaction(durable=False) as db:
            db.execute("UPDATE messages SET text=? WHERE id='m'", (f"{n}" * 2000,))
    grown = wal.stat().st_size
    assert grown > 64 << 10
    with store.transaction() as db:
        db.execute("UPDATE messages SET text='last' WHERE id='m'")
    assert wal.stat().st_size < grown, "the durable commit checkpointed"
    assert wal.stat().st_size < 64 << 10
    store.close()
    reopened = open_journal(tmp_path / "j.db")
    delivery = reopened.delivery("m", "lead")
    assert delivery is not None and delivery.text == "last"
