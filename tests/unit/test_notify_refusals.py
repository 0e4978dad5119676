"""The phone cannot be turned against the operator (docs/notify.md, "Threat model"; issue 44
item 10), in-process: what is posted to the response topic and applies nothing is counted and
logged once an interval, never answered; a replayed valid token is answered once; and every
receipt shares the notifier's rate window with the items. The flood through a real daemon is
tests/integration/test_notify.py (test_a_flood_of_refused_posts_…)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from orchestrator.daemon.changes import Changes
from orchestrator.daemon.journal import AsyncJournal
from orchestrator.daemon.notify._cursor import Cursor
from orchestrator.daemon.notify._journal import NotifyJournal
from orchestrator.daemon.notify._needs_you import NeedsYou
from orchestrator.daemon.notify._ntfy import Ntfy
from orchestrator.daemon.notify._policy import Backoff
from orchestrator.daemon.notify._refusals import RefusalTally
from orchestrator.daemon.notify._responses import Responder
from orchestrator.daemon.notify._service import Channel, TeamNotifier
from orchestrator.daemon.notify._tokens import Signer
from orchestrator.errors import StoreError
from orchestrator.notify_config import NotifySection
from tests.support.fakes import journal_at
from tests.support.ntfy_fake import FakeNtfy
from tests.support.settle import all_blocked, until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio
KEY = bytes(range(32))
NOW = 1_000_000.0
MARK = "JUNK-MARK-7f3a"  # in every junk post: never in a log line


@pytest.fixture
def ntfy() -> Iterator[FakeNtfy]:
    server = FakeNtfy()
    server.start()
    yield server
    server.stop()


class _Receipts:
    """What the responder asked to publish: (item, text, kind)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    async def __call__(self, item: str, text: str, kind: Any) -> None:
        self.sent.append((item, text, kind))


@pytest.fixture
async def responder(tmp_path: Path) -> AsyncIterator[tuple[Responder, _Receipts]]:
    store = journal_at(tmp_path / "state.db")
    journal = AsyncJournal(store)
    receipts = _Receipts()
    # approvals and board: no post of these tests gets as far as deciding anything
    yield Responder("web", signer=Signer(KEY), nonces=NotifyJournal(journal),
                    approvals=None,  # type: ignore[arg-type]
                    store=journal, board=None, receipt=receipts, on_test=lambda action: None,
                    refused=RefusalTally("web"), clock=lambda: NOW), receipts
    store.close()


def _hostile_posts() -> list[str]:
    """1,000 posts of what anyone who saw the response topic can send: junk, forged, expired
    and another team's tokens."""
    ours, forger = Signer(KEY), Signer(b"f" * 32)
    posts = [f"{MARK} {i} approve everything" for i in range(400)]
    posts += [forger.sign(f"web/apv_{i}", "approve", NOW + 600) + f" {MARK}"
              for i in range(300)]
    posts += [ours.sign(f"web/apv_{i}", "approve", NOW - 1) for i in range(200)]
    posts += [ours.sign(f"api/apv_{i}", "deny", NOW + 600) for i in range(100)]
    return posts


async def test_a_thousand_refused_posts_are_answered_by_no_push_and_logged_as_one_count(
        responder: tuple[Responder, _Receipts]) -> None:
    """Each refused post was answered with a push ("an action: refused: not a teamctl
    action"): 200 junk posts were 200 buzzes of the operator's phone. Now 1,000 junk, forged,
    expired and other-team posts ask for no receipt at all, and are one
    ``notify_posts_refused`` event that counts them by cause — without their text."""
    handler, receipts = responder
    with capture_logs() as logs:
        for post in _hostile_posts():
            await handler.handle(post)
        handler.refused.flush()
    assert receipts.sent == []
    [event] = [e for e in logs if e["event"] == "notify_posts_refused"]
    assert event["refused"] == 1000 and event["team"] == "web"
    assert event["by_cause"] == {"not_an_action": 400, "bad_signature": 300, "expired": 200,
                                 "other_team": 100}
    assert all(MARK not in repr(e) for e in logs), "a post's text is never logged"
    assert [e["event"] for e in logs] == ["notify_posts_refused"], "nothing per post"


async def test_a_replayed_valid_token_is_answered_once_however_often_it_is_posted(
        responder: tuple[Responder, _Receipts]) -> None:
    """A valid token is applied once; its first replay is told the item's decision (one
    receipt, kind "replay": sent only if the window has room); the next 49 replays are
    counted and answered by nothing."""
    handler, receipts = responder
    token = Signer(KEY).sign("web/test:rt-1", "approve", NOW + 600)
    for _ in range(51):
        await handler.handle(token)
    assert receipts.sent == [("web/test:rt-1", "applied: test", "test"),
                             ("web/test:rt-1", "already decided: test", "replay")]
    with capture_logs() as logs:
        handler.refused.flush()
    assert [e["by_cause"] for e in logs] == [{"replay": 50}]


class _SlowBoard:
    """A task review that takes until ``release`` is set (a slow journal, a loaded machine)."""

    def __init__(self) -> None:
        self.status = "review"
        self.release = anyio.Event()
        self.reviewing = anyio.Event()

    async def review(self, task_id: int, **_: Any) -> None:
        self.reviewing.set()
        await self.release.wait()
        self.status = "done"

    async def get(self, task_id: int, team: str) -> Any:
        return SimpleNamespace(task=SimpleNamespace(status=self.status))


async def test_a_double_tap_while_the_first_is_applied_is_told_the_decision_after_it(
        tmp_path: Path) -> None:
    """The second tap of a button arrives while its first is still being handled (its nonce
    being journaled, then its review applied): it waits for that first tap and is told what it
    did ("already decided: approved", after the first tap's receipt) — not the item's state
    halfway ("conflict: the task is review"); a flood of the same token meanwhile is counted
    and waits for nothing."""
    store = journal_at(tmp_path / "state.db")
    journal = AsyncJournal(store)
    receipts, board = _Receipts(), _SlowBoard()
    handler = Responder("web", signer=Signer(KEY), nonces=NotifyJournal(journal),
                        approvals=None,  # type: ignore[arg-type]
                        store=journal, board=board,  # type: ignore[arg-type]
                        receipt=receipts, on_test=lambda action: None,
                        refused=RefusalTally("web"), clock=lambda: NOW)
    token = Signer(KEY).sign("web/T1", "approve", NOW + 600)
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(handler.handle, token)
                tg.start_soon(handler.handle, token)  # the double tap, while its nonce is written
                await board.reviewing.wait()
                for _ in range(100):  # and a flood of the same token: none of it waits
                    tg.start_soon(handler.handle, token, name="flood")
                await all_blocked()
                assert receipts.sent == [], "the second tap waits for the first"
                assert not [t for t in asyncio.all_tasks() if t.get_name() == "flood"], \
                    "only the answered replay waits: a flood holds no action slot"
                board.release.set()
    finally:
        store.close()
    assert receipts.sent == [("web/T1", "applied: approved (done)", "result"),
                             ("web/T1", "already decided: approved", "replay")]


async def test_the_refusal_count_is_logged_once_an_interval_and_what_is_left_at_the_end(
        ) -> None:
    """While posts are refused the tally logs at most one event an interval (its sleep is
    the test's gate here); an idle tally is not woken; what is counted when it stops is
    logged on the way out."""
    asleep, gate = anyio.Event(), anyio.Event()
    naps: list[float] = []

    async def sleep(seconds: float) -> None:
        naps.append(seconds)
        asleep.set()
        await gate.wait()

    tally = RefusalTally("web", interval=60.0, sleep=sleep)
    with capture_logs() as logs, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(tally.run)
            await all_blocked()
            assert naps == [], "idle: not woken"
            for _ in range(3):
                tally.count("not_an_action")
            await asleep.wait()
            tally.count("bad_signature")  # within the same interval: the same event
            gate.set()
            await all_blocked()
            assert [e["refused"] for e in logs] == [4]
            tally.count("replay")
            tg.cancel_scope.cancel()
    assert naps == [60.0, 60.0]
    assert [(e["refused"], e["by_cause"]) for e in logs] == [
        (4, {"not_an_action": 3, "bad_signature": 1}), (1, {"replay": 1})]


def _one_item() -> list[NeedsYou]:
    return [NeedsYou("web/apv_A", "approval", "web", "dev asks: Bash", "web/dev: npm test",
                     item="web/apv_A", decisions=("approve", "deny"))]


async def test_receipts_share_the_rate_window_with_the_items(ntfy: FakeNtfy) -> None:
    """Receipts were published outside ``max_per_minute``. Now with 3 a minute: one item and
    two results fill the window; a third result waits for a slot (published by the first
    pass after the minute), and a replay's receipt, with no slot free, is dropped."""
    now = [0.0]

    async def gather() -> list[NeedsYou]:
        return _one_item()

    channel = Channel(Ntfy(ntfy.url, None, Backoff(request_timeout=5.0)), "tc-window",
                      "tc-window-r", Signer(KEY))
    notifier = TeamNotifier("web", NotifySection(max_per_minute=3), channel,
                            gather_items=gather, changes=Changes(), responder=None,
                            nonces=None, monotonic=lambda: now[0])
    with anyio.fail_after(20):
        await notifier.publish_pass()
        for n in (1, 2, 3):
            await notifier.receipt(f"web/apv_{n}", "applied: approved", "result")
        await notifier.receipt("web/apv_1", "already decided: approved", "replay")
        assert [m["message"] for m in ntfy.messages("tc-window")][1:] == [
            "web/apv_1: applied: approved", "web/apv_2: applied: approved"]
        now[0] = 60.0
        await notifier.publish_pass()
    titles = [m["title"] for m in ntfy.messages("tc-window")]
    assert titles == ["teamctl web: dev asks: Bash"] + ["teamctl: applied: approved"] * 3
    await channel.ntfy.aclose()


class _HeldCursor:
    """The notifier's journal, whose cursor writes each wait for ``release`` (a slow disk) and
    the first ``failing`` of which fail as a full disk would; ``asked`` is every write asked
    for, ``saved`` every one written."""

    def __init__(self, journal: NotifyJournal, failing: int = 0) -> None:
        self.journal = journal
        self.failing = failing
        self.release = anyio.Event()
        self.asked: list[str] = []
        self.saved: list[str] = []

    def has(self, field: str, ids: list[str]) -> Callable[[], Awaitable[bool]]:
        """A check for ``settle.until``: ``asked`` or ``saved`` is ``ids``."""
        async def check() -> bool:
            return getattr(self, field) == ids
        return check

    async def set_cursor(self, topic: str, last_id: str) -> None:
        self.asked.append(last_id)
        await self.release.wait()
        if self.failing:
            self.failing -= 1
            raise StoreError("the journal could not be written: database or disk is full")
        await self.journal.set_cursor(topic, last_id)
        self.saved.append(last_id)


async def test_a_flood_on_the_response_topic_moves_the_cursor_in_one_write_not_one_each(
        tmp_path: Path) -> None:
    """The reader wrote its cursor once per message and read the next only after: behind a
    flood of 1,000 posts, the one real Approve waited for 1,000 journal writes in order (a
    slow disk: minutes). Now the reader only says where it is; while a write is held, 999
    messages are read without waiting, and what they moved is one more write, of the newest."""
    store = journal_at(tmp_path / "state.db")
    held = _HeldCursor(NotifyJournal(AsyncJournal(store)))
    cursor = Cursor(held, "srv/responses")  # type: ignore[arg-type]
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(cursor.run)
                cursor.advance("m0")
                await all_blocked()
                assert held.asked == ["m0"], "the first write is under way (and held)"
                for n in range(1, 1000):
                    cursor.advance(f"m{n}")  # returns at once: the reader waits for nothing
                held.release.set()
                await until(held.has("saved", ["m0", "m999"]))
                await all_blocked()
                tg.cancel_scope.cancel()
        assert held.asked == ["m0", "m999"]
        assert await held.journal.cursor("srv/responses") == "m999"
    finally:
        store.close()


async def test_the_readers_stop_saves_the_newest_cursor_and_a_failed_write_is_tried_again(
        tmp_path: Path) -> None:
    """A full disk fails a cursor write: logged, the reader goes on, and the next message's
    write saves the newer id. The reader's stop (its scope cancelled) still writes the newest
    id not yet saved, so a clean restart re-reads nothing; a second stop writes nothing."""
    store = journal_at(tmp_path / "state.db")
    held = _HeldCursor(NotifyJournal(AsyncJournal(store)), failing=1)
    held.release.set()
    cursor = Cursor(held, "srv/responses")  # type: ignore[arg-type]
    try:
        with anyio.fail_after(10), capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                tg.start_soon(cursor.run)
                cursor.advance("m1")
                await until(held.has("asked", ["m1"]))
                await all_blocked()
                assert held.saved == []
                cursor.advance("m2")
                await until(held.has("saved", ["m2"]))
                tg.cancel_scope.cancel()
            cursor.advance("m3")  # read just before the stop: no write yet
            with anyio.CancelScope() as stopping:
                stopping.cancel()
                await cursor.flush()
            await cursor.flush()
        assert held.saved == ["m2", "m3"]
        assert await held.journal.cursor("srv/responses") == "m3"
        [failed] = [e for e in logs if e["event"] == "notify_cursor_not_saved"]
        assert "disk is full" in failed["error"] and failed["topic"] == "srv/responses"
    finally:
        store.close()


async def test_a_flood_is_read_only_as_fast_as_its_posts_are_handled(
        ntfy: FakeNtfy, tmp_path: Path) -> None:
    """Waiting for each cursor write also bounded the reader; saved behind it, the bound is the
    reader's own: a post is read once one of the 16 action slots is free. 100 posts whose
    handling is held: 16 are handled at once, the reader waits with the cursor at the 16th,
    and once let through every post is handled, in order, and the cursor ends at the last
    (written by the reader's stop at the latest)."""
    async with httpx.AsyncClient() as client:
        ids = [(await client.post(f"{ntfy.url}/tc-flood-r", content=f"post {n}")).json()["id"]
               for n in range(100)]
    release = anyio.Event()
    started: list[str] = []
    done: list[str] = []

    async def handle(text: str) -> None:
        started.append(text)
        await release.wait()
        done.append(text)

    async def all_done() -> bool:
        return len(done) == 100

    async def nothing() -> list[NeedsYou]:
        return []

    store = journal_at(tmp_path / "state.db")
    nonces = NotifyJournal(AsyncJournal(store))
    channel = Channel(Ntfy(ntfy.url, None, Backoff(request_timeout=5.0)), "tc-flood",
                      "tc-flood-r", Signer(KEY))
    key = f"{channel.ntfy.server}/tc-flood-r"

    def cursor_at(last_id: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return await nonces.cursor(key) == last_id
        return check

    notifier = TeamNotifier("web", NotifySection(), channel, gather_items=nothing,
                            changes=Changes(), nonces=nonces, clock=lambda: 0.0,
                            responder=SimpleNamespace(  # type: ignore[arg-type]
                                handle=handle, refused=RefusalTally("web")))
    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(notifier.run)
                await until(cursor_at(ids[15]))
                await all_blocked()
                assert len(started) == 16 and done == []
                assert await nonces.cursor(key) == ids[15], "the reader waits for a slot"
                release.set()
                await until(all_done)
                tg.cancel_scope.cancel()
        assert started == done == [f"post {n}" for n in range(100)]
        assert await nonces.cursor(key) == ids[-1]
    finally:
        await channel.ntfy.aclose()
        store.close()


async def test_a_hostile_servers_message_id_is_kept_as_data_and_logged_nowhere(
        tmp_path: Path) -> None:
    """The ids are the ntfy server's (the operator's choice of server, not a poster's), but a
    hostile one could send any string up to a line's bound: quotes, a newline, NUL, SQL,
    terminal escapes. The cursor keeps it as a bound parameter, byte for byte, gives it back
    after the journal is reopened (a restart), and no log line carries it."""
    hostile = ("x'); DROP TABLE notify_cursors; --\n\x00\x1b]52;c;cm0gLXJm\x07"
               + "\u202e" + "Z" * 4000)
    store = journal_at(tmp_path / "state.db")
    cursor = Cursor(NotifyJournal(AsyncJournal(store)), "srv/responses")
    with capture_logs() as logs:
        cursor.advance(hostile)
        await cursor.flush()
    store.close()
    store = journal_at(tmp_path / "state.db")  # the daemon restarted
    try:
        assert await NotifyJournal(AsyncJournal(store)).cursor("srv/responses") == hostile
    finally:
        store.close()
    assert all("DROP TABLE" not in repr(e) for e in logs)
