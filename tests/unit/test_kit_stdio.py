"""The stdio JSON transport's request wait: an answer, the process's exit, or the deadline —
whichever comes first, each seen when it happens."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest

from orchestrator.contracts import RuntimeExited
from runtimes.kit.stdio import StdioJsonProcess, Waiter

pytestmark = pytest.mark.anyio


def _process() -> StdioJsonProcess:
    spec = SimpleNamespace(team="t", member="m", turn_idle_timeout=600.0, interrupt_grace=1.0)
    raw = SimpleNamespace(pid=None, returncode=1)
    return StdioJsonProcess(raw, spec, write_timeout=1.0)  # type: ignore[arg-type]


async def test_a_request_whose_process_exits_fails_with_the_exit_not_at_the_next_poll() -> None:
    """The wait for an answer ends when the process exits (``RuntimeExited``, its status):
    it used to look every 0.5 s, so a member that exited during its start (a crash loop, a
    refused login, an unknown session) was seen up to half a second late — and a request
    with a shorter deadline than that read as timed out instead of exited."""
    process, waiter = _process(), Waiter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_call, process.on_exit)  # it exits once the wait has begun
        with pytest.raises(RuntimeExited):
            await process.answer(waiter, timeout=0.3)


async def test_an_answer_wins_over_the_exit_that_follows_it_and_silence_times_out() -> None:
    """An answer that came before the exit is the answer; a process that neither answers
    nor exits reads as timed out (False); one that had already exited fails at once."""
    process, waiter = _process(), Waiter()
    waiter.answer = {"id": 1, "result": {}}
    waiter.done.set()
    process.on_exit()
    assert await process.answer(waiter, timeout=5.0)
    assert not await _process().answer(Waiter(), timeout=0.01)
    with pytest.raises(RuntimeExited):
        await process.answer(Waiter(), timeout=5.0)


async def test_a_turn_whose_process_exits_ends_with_the_exit_not_at_the_next_look() -> None:
    """A turn waits on its end with the watchdog's clock looked at every second; the
    process's exit wakes it at once (``alive`` raises ``RuntimeExited``). An ACP or Codex
    app-server member that crashed mid-turn used to be seen up to a second late."""
    process = _process()

    def alive() -> None:
        if not process.usable:
            raise process.exited()

    async with anyio.create_task_group() as tg:
        tg.start_soon(_call, process.on_exit)  # it exits once the turn's wait has begun
        with anyio.fail_after(0.5), pytest.raises(RuntimeExited):  # half the look's period
            await process.watch.wait(anyio.Event(), alive=alive)


async def _call(step: object) -> None:
    assert callable(step)
    step()
