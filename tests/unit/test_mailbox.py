"""The mailbox, in process: FIFO, one turn at a time, re-queue on a cut turn, the attempt
limit, never again after ``answered``, and the queue waiting while a member is down."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import pytest

from orchestrator.contracts import TextPart, Turn, TurnResult
from orchestrator.daemon.queue._delivery import MAX_ATTEMPTS
from tests.support.fakes import FakeProcess, FakeRuntime, core, team_config
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio


async def _launch(c: Core, tmp_path: Path, **member: object) -> None:
    await c.teams.launch(team_config(tmp_path, {"name": "lead", **member}), "team.toml",
                         wait=True, timeout=10)


def _texts(runtime: FakeRuntime) -> list[str]:
    return [" ".join(p.text for p in t.parts if isinstance(p, TextPart)) for t in runtime.turns]


async def test_messages_are_delivered_in_order_one_turn_at_a_time(tmp_path: Path) -> None:
    in_flight = 0
    most = 0

    async def slow(process: FakeProcess, turn: Turn) -> TurnResult:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await anyio.lowlevel.checkpoint()
        in_flight -= 1
        return TurnResult(reply="ok")

    runtime = FakeRuntime([slow] * 20)
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        ids = [(await c.teams.send(None, "lead", f"m{i}", wait=False, timeout=1)).id
               for i in range(20)]
        outcomes = [await c.mailbox.wait_outcome(i, "lead", 10) for i in ids]
        assert [o.state for o in outcomes] == ["answered"] * 20
        assert _texts(runtime) == [f"m{i}" for i in range(20)]
        assert most == 1


async def test_a_cut_turn_goes_back_to_the_queue_and_is_answered_on_the_next_process(
        tmp_path: Path) -> None:
    runtime = FakeRuntime(["exit"])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, backoff=[0.01, 0.1])
        result = await c.teams.send(None, "lead", "survive", wait=True, timeout=10)
        assert (result.state, result.attempts) == ("answered", 2)
        assert len(runtime.opened) == 2
        assert runtime.opened[1].turns[0].message_id == result.id


async def test_the_attempt_limit_ends_a_delivery_failed(tmp_path: Path) -> None:
    runtime = FakeRuntime(["stuck"] * MAX_ATTEMPTS)
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        result = await c.teams.send(None, "lead", "poison", wait=True, timeout=10)
        assert (result.state, result.attempts) == ("failed", MAX_ATTEMPTS)
        assert result.error is not None and result.error.code == "runtime_stuck"
        after = await c.teams.send(None, "lead", "next", wait=True, timeout=10)
        assert after.state == "answered", "the queue goes on"


async def test_a_runtime_error_fails_the_delivery_without_retry(tmp_path: Path) -> None:
    async with core(tmp_path, FakeRuntime(["fail"])) as c:
        await _launch(c, tmp_path)
        result = await c.teams.send(None, "lead", "x", wait=True, timeout=10)
        assert (result.state, result.attempts) == ("failed", 1)
        assert result.error is not None and result.error.message == "API Error: 401 fake"


async def test_an_answered_message_is_never_delivered_again(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, backoff=[0.01, 0.1])
        answered = await c.teams.send(None, "lead", "once", wait=True, timeout=10)
        runtime.opened[-1].exit(1)  # a crash after the answer
        again = await c.teams.send(None, "lead", "later", wait=True, timeout=10)
        assert again.state == "answered"
        assert [t.message_id for t in runtime.turns] == [answered.id, again.id]
        c.store.sync.recover_in_flight()  # a daemon restart now touches nothing answered
        delivery = c.store.sync.delivery(answered.id, "lead")
        assert delivery is not None and delivery.state == "answered"


async def test_messages_wait_in_the_journal_while_the_member_is_down(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        await c.teams.stop("web")
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}), "team.toml",
                             wait=False, timeout=10)
        # sent before the new process is ready: journaled, delivered once it is
        result = await c.teams.send(None, "lead", "queued while starting", wait=True,
                                    timeout=10)
        assert result.state == "answered" and result.attempts == 1


async def test_a_stopped_member_puts_its_turn_back_in_the_queue(tmp_path: Path) -> None:
    runtime = FakeRuntime(["hang"])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        sent = await c.teams.send(None, "lead", "long turn", wait=False, timeout=1)
        with anyio.fail_after(10):
            while not runtime.turns:
                await all_blocked()
        await c.teams.stop("web")
        delivery = c.store.sync.delivery(sent.id, "lead")
        assert delivery is not None and delivery.state == "queued"
        assert delivery.error_code == "member_stopped"
