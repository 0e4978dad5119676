"""The core (mailbox, supervisor, teams) under faults, in process with the fake runtime.

Each test is named after a failure the hardening issue found; its docstring states the promise.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.contracts import RuntimeStuck, Turn, TurnResult
from orchestrator.daemon.mailbox import _records as mailbox_records
from orchestrator.daemon.migrations import MIGRATIONS
from orchestrator.daemon.queue import Store
from orchestrator.errors import (
    MemberStartFailed,
    MemberUnavailable,
    ReplyTimeout,
    StoreError,
)
from tests.support.fakes import FakeProcess, FakeRuntime, core, team_config

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


class FlakyStore(Store):
    """A journal whose outcome writes fail while ``broken`` (a full disk, mid-delivery);
    ``answered`` is set once an answer is written."""

    broken = False

    def __init__(self, path: Path) -> None:
        super().__init__(path, MIGRATIONS)
        self.answered = threading.Event()

    def mark_answered(self, message_id: str, member: str, reply: str,
                      notes: tuple[str, ...] = ()) -> None:
        if self.broken:
            raise StoreError("the journal could not be written: database or disk is full")
        super().mark_answered(message_id, member, reply, notes)
        self.answered.set()


async def _launch(c: object, tmp_path: Path, **member: object) -> str:
    config = team_config(tmp_path, {"name": "lead", **member})
    await c.teams.launch(config, "team.toml", wait=True, timeout=10)  # type: ignore[attr-defined]
    return config.name


async def test_error_group_from_a_stuck_turn_goes_back_to_the_queue(tmp_path: Path) -> None:
    """A RuntimeStuck raised inside a runtime's task group (an ExceptionGroup) is unwrapped:
    the delivery is re-queued and answered, not failed as an internal error."""
    runtime = FakeRuntime([ExceptionGroup("turn", [RuntimeStuck("lead", 1.0)])])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        result = await c.teams.send(None, "lead", "hello", wait=True, timeout=10)
        assert result.state == "answered" and result.attempts == 2
        assert result.reply.startswith("echo: [teamctl] your previous turn on message "), \
            "continued on the process it was cut on (docs/dev/architecture.md, Effects once)"


async def test_an_unexpected_bug_fails_only_that_delivery(tmp_path: Path) -> None:
    """A bug inside a turn fails that delivery (typed internal_error); the next is answered."""
    async with core(tmp_path, FakeRuntime([ValueError("boom")])) as c:
        await _launch(c, tmp_path)
        first = await c.teams.send(None, "lead", "one", wait=True, timeout=10)
        assert first.state == "failed"
        assert first.error.code == "internal_error"
        assert "ValueError" in first.error.message
        second = await c.teams.send(None, "lead", "two", wait=True, timeout=10)
        assert second.state == "answered"


async def test_waiters_do_not_leak_after_200_sends(tmp_path: Path) -> None:
    """``send --wait`` leaves nothing behind per call: answered, timed out or failed (the
    checks are exact, so one waiter or timestamp left by any call fails them)."""
    async with core(tmp_path) as c:
        # recycled every 50 turns (as the 1000 sends this once made were at the default 200):
        # the sends span process changes too
        await _launch(c, tmp_path, recycle_turns=50)
        for index in range(200):
            await c.teams.send(None, "lead", f"m{index}", wait=True, timeout=10)
        assert c.mailbox.waiting == 0
        assert not c.mailbox._waiters and not c.mailbox._journaled_at
        c.runtime.script = ["hang"]
        with pytest.raises(ReplyTimeout):
            await c.teams.send(None, "lead", "hangs", wait=True, timeout=0.05)
        assert c.mailbox.waiting == 0 and not c.mailbox._waiters


async def test_unwritable_journal_mid_delivery_tells_the_waiter_then_recovers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal that fails mid-delivery: the waiter is told at once (StoreError, not a hang);
    the row is not left ``prepared``: once the journal takes writes again it is answered."""
    monkeypatch.setattr(mailbox_records, "_WRITE_RETRY_FIRST", 0.01)  # not 0.5 s, waited out
    (tmp_path / "home").mkdir()
    store = FlakyStore(tmp_path / "home" / "state.db")

    async def answer_as_the_disk_fills(process: FakeProcess, turn: Turn) -> TurnResult:
        store.broken = True
        return TurnResult(reply="late but kept", session_id=process.session_id)

    async with core(tmp_path, FakeRuntime([answer_as_the_disk_fills]), store=store) as c:
        await _launch(c, tmp_path)
        with anyio.fail_after(10), pytest.raises(StoreError, match="could not record"):
            await c.teams.send(None, "lead", "hi", wait=True, timeout=3600)
        [row] = store.history("web", "lead")[0]
        assert row.state in ("prepared", "sent")  # the outcome waits for the journal
        store.broken = False
        assert await anyio.to_thread.run_sync(store.answered.wait, 20)
        delivery = store.delivery(row.message_id, "lead")
        assert delivery is not None
        assert delivery.state == "answered" and delivery.reply == "late but kept"
        assert c.mailbox.waiting == 0


async def test_send_wait_to_a_fatal_member_says_so_instead_of_waiting(tmp_path: Path) -> None:
    """``send --wait`` to a member that cannot start ends at once with MemberUnavailable; the
    message stays queued for after a restart."""
    runtime = FakeRuntime()
    runtime.start_error = MemberStartFailed("lead", "no login")
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, max_restarts=0)
        with anyio.fail_after(10), pytest.raises(MemberUnavailable) as caught:
            await c.teams.send(None, "lead", "anyone?", wait=True, timeout=3600)
        assert "fatal" in caught.value.message and "restart" in caught.value.message
        history = await c.teams.history(None, "lead")
        assert [m.state for m in history.messages] == ["queued"]


async def test_a_frozen_idle_member_is_noticed_and_restarted(tmp_path: Path) -> None:
    """An idle member that stops answering the liveness probe is killed and restarted by
    policy — before any turn goes silent."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, liveness_interval=0.05, backoff=[0.01, 0.1])
        [first] = runtime.opened
        restarted = runtime.started
        first.responsive = False
        with anyio.fail_after(20):
            await restarted.wait()
        assert len(runtime.opened) == 2 and first.exit_code == -9
        state = c.supervisor.member("web", "lead")
        assert state.restarts == 1


async def test_an_idle_member_is_ready_not_busy(tmp_path: Path) -> None:
    async with core(tmp_path) as c:
        await _launch(c, tmp_path)
        await c.teams.send(None, "lead", "one", wait=True, timeout=10)
        status = await c.teams.status(None)
        [member] = status.teams[0].members
        assert member.readiness == "ready" and member.queued == 0


async def test_history_pages_newest_first_and_bounded(tmp_path: Path) -> None:
    """``history`` returns the newest ``limit`` messages (oldest first) and the id to page
    back from; never an unbounded document."""
    async with core(tmp_path) as c:
        await _launch(c, tmp_path)
        ids = [(await c.teams.send(None, "lead", f"m{i}", wait=True, timeout=10)).id
               for i in range(7)]
        page = await c.teams.history(None, "lead", limit=3)
        assert [m.id for m in page.messages] == ids[4:]
        assert page.before == ids[4]
        older = await c.teams.history(None, "lead", limit=3, before=page.before)
        assert [m.id for m in older.messages] == ids[1:4]
        last = await c.teams.history(None, "lead", limit=3, before=older.before)
        assert [m.id for m in last.messages] == ids[:1] and last.before is None
        assert len((await c.teams.history(None, "lead")).messages) == 7
