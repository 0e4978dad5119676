"""Effects once (issue 26), in process: a turn that reached the runtime and was cut goes on in
the same session as a continuation — never the same message handed again as new — and is sent
whole only when its session is gone; a redelivered turn's repeated send_message yields the
first receipt, one message to the recipient, uncounted by the guards."""

from __future__ import annotations

import sqlite3
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.contracts import (
    BudgetReached,
    DocumentText,
    ImagePart,
    RuntimeExited,
    SessionLost,
    TextPart,
    Turn,
    TurnResult,
)
from orchestrator.daemon.continuation import continuation
from orchestrator.daemon.journal import _team_records as team_records
from orchestrator.daemon.migrations import SCHEMA_VERSION, open_journal
from orchestrator.daemon.queue import Delivery
from runtimes.claude.runtime import user_line
from tests.support.fakes import (
    FakeProcess,
    FakeRuntime,
    ManualClock,
    core,
    journal_at,
    team_config,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from orchestrator.contracts import LaunchSpec
    from orchestrator.ports import OnSent
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio

CONTINUATION = "[teamctl] your previous turn on message "


def _text(turn: Turn) -> str:
    return " ".join(p.text for p in turn.parts if isinstance(p, TextPart))


async def _launch(c: Core, tmp_path: Path, *members: dict[str, object], **limits: object) -> None:
    config = team_config(tmp_path, *(members or ({"name": "lead"},)))
    config = config.model_copy(update={"team": config.team.model_copy(update=limits)})
    await c.teams.launch(config, "team.toml", wait=True, timeout=10)


class ForgetfulRuntime(FakeRuntime):
    """Every process after the first starts a new session: the recorded one is gone (Claude's
    ``--resume`` answering "No conversation found", an OpenCode session deleted)."""

    @asynccontextmanager
    async def open(self, spec: LaunchSpec) -> AsyncIterator[FakeProcess]:
        async with super().open(replace(spec, session_id=None)) as process:
            yield process


class UnresumedRuntime(FakeRuntime):
    """Processes get the recorded session id but do not resume it (Claude's ``--session-id``
    when no transcript was written yet): the cut attempt is not in that session."""

    @asynccontextmanager
    async def open(self, spec: LaunchSpec) -> AsyncIterator[FakeProcess]:
        async with super().open(spec) as process:
            process.resumed = False
            yield process


async def test_a_turn_cut_by_a_member_crash_continues_in_the_resumed_session(
        tmp_path: Path) -> None:
    """The member's process dies mid-turn: the restarted process resumes the session, and the
    message is not handed to it again as new — a continuation saying why is."""
    runtime = FakeRuntime(["exit"])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "backoff": [0.01, 0.1]})
        result = await c.teams.send(None, "lead", "touch done.txt", wait=True, timeout=10)
        assert (result.state, result.attempts) == ("answered", 2)
        first, second = runtime.opened
        assert second.session_id == first.session_id and second.resumed
        [again] = second.turns
        assert again.continues and again.message_id == result.id
        assert _text(again).startswith(f"{CONTINUATION}{result.id} was interrupted (your "
                                       "process exited) before you answered")
        assert _text(again).endswith("as a reminder (not a new request):\n\ntouch done.txt")
        assert [_text(t) for t in runtime.turns].count("touch done.txt") == 1


async def test_a_stuck_turn_interrupted_continues_on_the_same_process(tmp_path: Path) -> None:
    """An interrupted turn (the idle watchdog) whose process lives on continues there, even
    though that process never resumed anything: it is the process the turn was cut on."""
    runtime = FakeRuntime(["stuck"])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        result = await c.teams.send(None, "lead", "long work", wait=True, timeout=10)
        assert result.state == "answered"
        [process] = runtime.opened
        assert not process.resumed
        first, again = process.turns
        assert not first.continues and again.continues
        assert "(it printed nothing for too long and was interrupted)" in _text(again)


async def test_a_turn_held_by_a_budget_continues_when_released(tmp_path: Path) -> None:
    """A budget hold stops a turn that already ran some of its steps: its release (the
    operator raises the budget) hands the continuation, not the message again, and the
    attempt was given back."""
    runtime = FakeRuntime([BudgetReached("lead", "the budget was reached during the turn")])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        sent = await c.teams.send(None, "lead", "touch x", wait=False, timeout=10)
        assert c.built is not None
        ledger = c.built.ledger
        with anyio.fail_after(10):
            while (changed := ledger.hold_changed()) and ledger.hold("web", "lead") is None:
                await changed.wait()
        await c.teams.budget(None, "lead", add_usd=1.0)
        assert sent.id is not None
        result = await c.mailbox.wait_outcome(sent.id, "lead", 10)
        assert (result.state, result.attempts) == ("answered", 1)
        first, again = runtime.turns
        assert _text(first) == "touch x" and again.continues
        assert "(the budget was reached; it has been raised since)" in _text(again)


async def test_a_lost_session_gets_the_whole_message(tmp_path: Path) -> None:
    """When the cut attempt's session is gone (a fresh one was started), the message is sent
    whole again: at least once is kept."""
    runtime = ForgetfulRuntime(["exit"])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "backoff": [0.01, 0.1]})
        result = await c.teams.send(None, "lead", "touch done.txt", wait=True, timeout=10)
        assert (result.state, result.attempts) == ("answered", 2)
        first, second = runtime.opened
        assert second.session_id != first.session_id
        assert [(_text(t), t.continues) for t in runtime.turns] == [
            ("touch done.txt", False), ("touch done.txt", False)]


async def test_a_same_named_session_that_was_not_resumed_gets_the_whole_message(
        tmp_path: Path) -> None:
    """The same session id is not enough: a process that started it anew (nothing resumed)
    does not hold the cut attempt, so the message goes whole."""
    runtime = UnresumedRuntime(["exit"])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "backoff": [0.01, 0.1]})
        result = await c.teams.send(None, "lead", "m", wait=True, timeout=10)
        first, second = runtime.opened
        assert second.session_id == first.session_id and not second.resumed
        assert [(_text(t), t.continues) for t in runtime.turns] == [("m", False),
                                                                   ("m", False)]
        assert result.state == "answered"


async def test_a_continuation_that_finds_its_session_gone_is_sent_whole_next(
        tmp_path: Path) -> None:
    """A runtime that learns only when the turn runs that the session is gone (Codex exec)
    raises SessionLost for a continuation: nothing was sent, the attempt is given back, and
    the message goes whole on the new session."""
    async def lost(process: FakeProcess, turn: Turn) -> TurnResult:
        assert turn.continues
        process._session_id = "fresh-thread"  # the runtime dropped the unknown thread
        raise SessionLost("lead", "old-thread", "codex has no rollout for this thread")

    async def exited(process: FakeProcess, turn: Turn) -> TurnResult:
        raise RuntimeExited("lead", None, [])

    runtime = FakeRuntime([exited, lost])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        result = await c.teams.send(None, "lead", "m", wait=True, timeout=10)
        assert (result.state, result.attempts) == ("answered", 2), "the lost one given back"
        assert [(_text(t) == "m", t.continues) for t in runtime.turns] == [
            (True, False), (False, True), (True, False)]


async def test_the_journal_keeps_the_session_a_delivery_was_sent_on(tmp_path: Path) -> None:
    """``sent`` records the session (kept when a later attempt's is unknown); a cut attempt
    records the one it learnt during the turn; the schema is one migration newer."""
    store = open_journal(tmp_path / "j.db")
    try:
        assert store.schema_version == SCHEMA_VERSION
        store.add_message("m1", "web", "hi", ["lead"])
        store.claim("m1", "lead")
        store.mark_sent("m1", "lead", None)
        store.mark_failed("m1", "lead", code="runtime_exited", message="x", retryable=True,
                          requeue=True, session="thread-1")
        delivery = store.delivery("m1", "lead")
        assert delivery is not None and delivery.sent_session == "thread-1"
        store.claim("m1", "lead")
        store.mark_sent("m1", "lead", None)
        assert store.recover_in_flight() == [("m1", "lead", "queued")]
        delivery = store.delivery("m1", "lead")
        assert delivery is not None and delivery.sent_session == "thread-1"
        store.claim("m1", "lead")  # cut before it reached the runtime: nothing learnt
        store.mark_failed("m1", "lead", code="runtime_exited", message="x", retryable=True,
                          requeue=True, session="other")
        delivery = store.delivery("m1", "lead")
        assert delivery is not None and delivery.sent_session == "thread-1"
    finally:
        store.close()


class Watched(FakeRuntime):
    """Each turn, as the member's process gets it (before it is written, before ``sent``):
    its delivery's row as another reader of the journal sees it then."""

    def __init__(self, journal: Path) -> None:
        super().__init__()
        self.journal = journal
        self.rows: list[tuple[str, str | None]] = []

    @asynccontextmanager
    async def open(self, spec: LaunchSpec) -> AsyncIterator[FakeProcess]:
        async with super().open(spec) as process:
            run_turn = process.run_turn

            async def watched(turn: Turn, *, on_sent: OnSent) -> TurnResult:
                with sqlite3.connect(self.journal) as reader:
                    row = reader.execute("SELECT state, sent_session FROM deliveries "
                                         "WHERE message_id = ?", (turn.message_id,)).fetchone()
                self.rows.append(row)
                return await run_turn(turn, on_sent=on_sent)

            process.run_turn = watched  # type: ignore[method-assign]
            yield process


async def test_a_turns_session_is_journaled_before_the_runtime_gets_it(tmp_path: Path) -> None:
    """A daemon killed after a turn reached its member's process but before ``sent`` was
    journaled (the write done, ``sent`` waiting behind another write's fsync) handed the
    message again whole on restart, and the reviewer did the work twice (seen on CI in
    tests/e2e/test_effects_once_real.py). A turn's session is journaled first, with
    attachments or without."""
    runtime = Watched(tmp_path / "home" / "state.db")
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        await c.teams.send(None, "lead", "review the form", wait=True, timeout=10)
        await c.teams.send(None, "lead", "and this", attachments=[str(_notes(tmp_path))],
                           wait=True, timeout=10)
        session = runtime.opened[0].session_id
    assert runtime.rows == [("prepared", session), ("prepared", session)]


def _notes(tmp_path: Path) -> Path:
    notes = tmp_path / "notes.txt"
    notes.write_text("the login form 500s on submit\n")
    return notes


def _document_texts(turn: Turn) -> list[str]:
    return [p.text for p in turn.parts if isinstance(p, DocumentText)]


async def test_a_turn_cut_before_it_reached_the_member_continues_with_its_attachments(
        tmp_path: Path) -> None:
    """The member's process died as the turn was being written (``sent`` never came): the
    resumed process gets a continuation — and the message's attachment again, which the cut
    turn never carried to it. A turn cut after ``sent`` does not send it again
    (faults/test_effects_once.py)."""
    runtime = DiesBeforeSent()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "backoff": [0.01, 0.1]})
        result = await c.teams.send(None, "lead", "read this", wait=True, timeout=10,
                                    attachments=[str(_notes(tmp_path))])
    assert (result.state, result.attempts) == ("answered", 2)
    first, second = runtime.opened
    assert second.session_id == first.session_id and second.resumed
    [again] = second.turns
    assert again.continues and _text(again).startswith(f"{CONTINUATION}{result.id} was "
                                                       "interrupted (your process exited)")
    assert any("the login form 500s on submit" in t for t in _document_texts(again))


async def test_a_new_daemon_continues_a_cut_turn_with_its_attachments(tmp_path: Path) -> None:
    """A daemon that starts after one stopped mid-turn knows nothing of the cut turn: whether
    it reached the member (the old one may have died between the write and ``sent``), whether
    the CLI wrote it to the session it resumes (Claude Code writes its transcript
    asynchronously). The continuation on the resumed session carries the message's attachment
    again."""
    (tmp_path / "home").mkdir()
    journal = tmp_path / "home" / "state.db"
    turning = anyio.Event()

    async def hangs(process: FakeProcess, turn: Turn) -> TurnResult:
        turning.set()
        await anyio.sleep_forever()
        raise AssertionError("never")

    first = FakeRuntime([hangs])
    async with core(tmp_path, first, store=journal_at(journal)) as c:
        await _launch(c, tmp_path)
        message = await c.teams.send(None, "lead", "read this", wait=False, timeout=10,
                                     attachments=[str(_notes(tmp_path))])
        with anyio.fail_after(10):
            await turning.wait()
    second = FakeRuntime()
    async with core(tmp_path, second, store=open_journal(journal)) as c:
        assert await c.teams.resume_desired() == ["web"]
        outcome = await c.mailbox.wait_outcome(message.id, "lead", 10)
    assert (outcome.state, outcome.attempts) == ("answered", 2)
    [process] = second.opened
    assert process.resumed and process.session_id == first.opened[0].session_id
    [again] = second.turns
    assert again.continues
    assert any("the login form 500s on submit" in t for t in _document_texts(again))


def test_an_image_sent_again_stays_right_after_its_marker_in_the_reminder() -> None:
    """The attachments a continuation carries again keep their places: an image anchored
    after ``[Image #1]`` in the message sits after it in the reminder, as Claude's stdin line
    interleaves it."""
    text = "why is [Image #1] misaligned?"
    delivery = Delivery("m1", "web", "lead", text, "prepared", 1, None, "daemon_restarted",
                        None, None, ())
    image = ImagePart("image/png", 1, 1, "0" * 64, b"png", number=1,
                      anchor=text.index("]") + 1)
    turn = continuation(delivery, [image])
    [reminder, again] = turn.parts
    assert isinstance(reminder, TextPart) and isinstance(again, ImagePart)
    assert again.anchor is not None
    assert reminder.text[:again.anchor].endswith("why is [Image #1]")
    content = user_line(turn, member="lead")["message"]["content"]
    assert [block["type"] for block in content] == ["text", "image", "text"]
    assert content[0]["text"].endswith("why is [Image #1]")
    assert content[2]["text"] == " misaligned?"


class DiesBeforeSent(FakeRuntime):
    """The first process exits as its first turn is written: ``sent`` never comes."""

    @asynccontextmanager
    async def open(self, spec: LaunchSpec) -> AsyncIterator[FakeProcess]:
        async with super().open(spec) as process:
            if len(self.opened) == 1:
                async def dies(turn: Turn, *, on_sent: OnSent) -> TurnResult:
                    process.exit(1)
                    raise RuntimeExited(spec.member, 1, [])

                process.run_turn = dies  # type: ignore[method-assign]
            yield process


async def test_a_daemon_killed_between_the_write_and_sent_continues_the_turn(
        tmp_path: Path) -> None:
    """The journal as that kill -9 left it — the delivery ``prepared``, its session
    journaled — and the daemon started again: the member resumes the session and gets a
    continuation, the message's text as its reminder; never the message again as new."""
    (tmp_path / "home").mkdir()
    store = journal_at(tmp_path / "home" / "state.db")
    config = team_config(tmp_path, {"name": "lead"})
    team_records.save_team(store, "web", "a.toml", config.model_dump(mode="json"),
                           [("lead", "claude")])
    team_records.set_session_id(store, "web", "lead", "session-1")
    store.add_message("m1", "web", "review the form", ["lead"])
    store.claim("m1", "lead")
    store.mark_handed("m1", "lead", "session-1")  # written to its stdin, then the kill
    assert store.recover_in_flight() == [("m1", "lead", "queued")]
    runtime = FakeRuntime()
    async with core(tmp_path, runtime, store=store) as c:
        assert await c.teams.resume_desired() == ["web"]
        outcome = await c.mailbox.wait_outcome("m1", "lead", 10)
    assert (outcome.state, outcome.attempts) == ("answered", 2)
    [process] = runtime.opened
    assert (process.session_id, process.resumed) == ("session-1", True)
    [turn] = runtime.turns
    assert turn.continues
    assert _text(turn).startswith(f"{CONTINUATION}m1 was interrupted (teamctl's daemon "
                                  "stopped) before you answered")
    assert _text(turn).endswith("(not a new request):\n\nreview the form")


class Lead:
    """A lead whose every turn messages ``rev`` (as a model calling the MCP tool would) — the
    same text again on a continuation, as a model that does not check would — and whose
    first turn is cut after that call."""

    def __init__(self) -> None:
        self.c: Core | None = None
        self.receipts: list[tuple[str, str]] = []
        self.cut_once = True

    async def turn(self, process: FakeProcess, turn: Turn) -> TurnResult:
        assert self.c is not None
        if process.spec.member != "lead":
            return TurnResult(reply=f"rev read: {_text(turn)}")
        if _text(turn).startswith("reply from "):  # the routed reply: nothing more to send
            return TurnResult(reply="thanks")
        token = self.c.supervisor.member("web", "lead").token
        assert token is not None
        text = "please review" if turn.continues else _text(turn)
        receipt = await self.c.router.send_message(token, "rev", text)
        self.receipts.append((receipt.id, receipt.text))
        if self.cut_once:
            self.cut_once = False
            raise RuntimeExited("lead", None, [])
        return TurnResult(reply="lead done")


async def test_a_redelivered_turn_sends_a_teammate_message_once(tmp_path: Path) -> None:
    """The lead's turn sent a message, was cut, and its continuation sends it again: the
    second call returns the first receipt (same id, saying it was already sent), the reviewer
    gets one message and sends one reply, and the repeat is not counted by the guards (a
    counted one would hit the pair cooldown)."""
    lead = Lead()
    clock = ManualClock()
    runtime = FakeRuntime([lead.turn] * 20)
    async with core(tmp_path, runtime, clock=clock) as c:
        lead.c = c
        await _launch(c, tmp_path, {"name": "lead"}, {"name": "rev"}, pair_cooldown=600.0)
        result = await c.teams.send(None, "lead", "please review", wait=True, timeout=10)
        assert result.state == "answered"
        (first, first_text), (again, again_text) = lead.receipts
        assert again == first
        assert first_text.startswith(f"queued as {first}")
        assert again_text.startswith(f"already sent as {first} for rev earlier in this turn")
        with anyio.fail_after(10):
            while True:
                rev = c.store.sync.history("web", "rev")[0]
                replies = [d for d in c.store.sync.history("web", "lead")[0]
                           if d.origin.kind == "reply"]
                if rev and rev[0].terminal and replies:
                    break
                await anyio.sleep(0.01)
        assert [(d.message_id, d.text) for d in rev] == [(first, "please review")]
        assert len(replies) == 1
        assert rev[0].origin.delivery == result.id, "journaled with the turn it came from"
        refusals = c.store.sync.refusals("web")
        assert refusals == [], "the repeat is not a guarded send"


async def test_the_same_text_from_another_turn_is_a_new_message(tmp_path: Path) -> None:
    """Idempotence is per originating turn: the same text sent from a later turn (another
    message to the lead) is sent again."""
    lead = Lead()
    lead.cut_once = False
    runtime = FakeRuntime([lead.turn] * 20)
    async with core(tmp_path, runtime) as c:
        lead.c = c
        await _launch(c, tmp_path, {"name": "lead"}, {"name": "rev"}, pair_cooldown=0.0)
        for _ in range(2):
            done = await c.teams.send(None, "lead", "please review", wait=True, timeout=10)
            assert done.state == "answered"
        [(first, _), (second, text)] = lead.receipts[:2]
        assert first != second and text.startswith(f"queued as {second}")
