"""The adapter kit: one rule for a retryable status, and the watchdog's last step."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest

from runtimes.kit import TurnWatch, retryable_status

pytestmark = pytest.mark.anyio


def test_one_rule_says_which_http_status_is_worth_another_attempt() -> None:
    """Every adapter asks ``retryable_status``: a timeout, a conflict, a rate limit and any
    server error (529 included) are retried; another 4xx is the request's own fault; an unknown
    status is what the caller says."""
    assert all(retryable_status(s) for s in (408, 409, 429, 500, 502, 503, 504, 529))
    assert not any(retryable_status(s) for s in (400, 401, 403, 404, 413, 422, 430))
    assert not retryable_status(None) and retryable_status(None, unknown=True)


async def test_a_turn_that_ignores_its_interrupt_gets_its_process_killed() -> None:
    """``stop_turn``: the interrupt is sent, the turn is given ``grace`` to end, then the kill
    runs — and not before the interrupt."""
    spec = SimpleNamespace(team="t", member="m", turn_idle_timeout=0.01, interrupt_grace=0.01)
    watch = TurnWatch(spec)  # type: ignore[arg-type]
    steps: list[str] = []

    async def interrupt() -> None:
        steps.append("interrupt")

    never = anyio.Event()
    assert not await watch.wait(never), "silent past the idle timeout: stuck"
    ended = await watch.stop_turn(never, interrupt, lambda: steps.append("kill"))
    assert not ended and steps == ["interrupt", "kill"]
    done = anyio.Event()
    done.set()
    steps.clear()
    assert await watch.stop_turn(done, interrupt, lambda: steps.append("kill"))
    assert steps == ["interrupt"], "a turn that ended in time keeps its process"
