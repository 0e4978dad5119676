"""A turn's silence counts from the turn's start, in every runtime adapter on the kit.

An idle member prints nothing for as long as it is idle (a liveness probe's answer every
``liveness_interval`` at most). The idle watchdog measured a turn's silence from the member's
last line, so a turn that started longer than ``turn_idle_timeout`` after it was interrupted at
once — before the CLI could even read it. With a short ``turn_idle_timeout`` that cut a turn
before the agent began it; an e2e test saw the real Qwen Code cancelled before its model
request, then the next attempt meet the stall meant for the first. Each adapter here is
opened on its fake CLI, the clock moved past the timeout (no real wait), and its turn must
be answered with no interrupt."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.contracts import TextPart, Turn
from runtimes import kit
from tests.support.driver import REPO
from tests.support.runtimes import RUNTIMES, launch_spec

if TYPE_CHECKING:
    from pathlib import Path


pytestmark = pytest.mark.anyio
BIN = REPO / "fixtures" / "bin"
IDLE = 2.0  # the turn's idle timeout; the clock jumps well past it before the turn


class _Clock:
    """The kit's ``time.monotonic`` (its alone: the event loop keeps the real one), moved
    forward on demand."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead


@pytest.mark.parametrize("name", sorted(RUNTIMES))
async def test_a_turn_after_a_long_silence_is_not_cut_as_stuck(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    runtime = RUNTIMES[name][0]
    spec = launch_spec(name, tmp_path, idle=IDLE)
    clock = _Clock()
    monkeypatch.setattr(kit, "time", SimpleNamespace(monotonic=clock))
    interrupts: list[str] = []
    real_stop = kit.TurnWatch.stop_turn

    async def stop_turn(self: kit.TurnWatch, *args: Any, **kwargs: Any) -> bool:
        interrupts.append(name)
        return await real_stop(self, *args, **kwargs)

    monkeypatch.setattr(kit.TurnWatch, "stop_turn", stop_turn)

    async def sent() -> None:
        pass

    async with runtime.open(spec) as member:
        clock.ahead = 10 * IDLE  # the member has been silent for 20 s, idle between turns
        result = await member.run_turn(Turn("m1", (TextPart("hello"),)), on_sent=sent)
    assert "hello" in result.reply
    assert interrupts == [], "the turn was cut before the CLI could answer it"
