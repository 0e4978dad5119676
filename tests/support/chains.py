"""A lead → reviewer → designer chain of in-process fake members over three runtimes (the
trace's and the exporter's tests): each member's first turn asks the next one through
teamctl's MCP tool, as a model would; every turn reports what it used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.contracts import TextPart, TokenUsage, TurnResult, UsageReading
from tests.support.fakes import FakeRuntime, team_config
from tests.support.settle import all_blocked, until

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import Turn
    from tests.support.fakes import Core, FakeProcess

__all__ = ["USED", "Chain", "chain_team", "quiet"]

# what each member's turn uses, as its runtime reports it: input, output tokens, cost
USED = {"lead": (100, 10, 0.01), "reviewer": (200, 20, 0.02), "designer": (300, 30, 0.03)}
_NEXT = {"lead": "reviewer", "reviewer": "designer"}


class Chain:
    """The members' turns: the first asks the next member down the chain."""

    def __init__(self) -> None:
        self.c: Core | None = None
        self.sent: set[str] = set()

    async def turn(self, process: FakeProcess, turn: Turn) -> TurnResult:
        assert self.c is not None
        member = process.spec.member
        text = " ".join(p.text for p in turn.parts if isinstance(p, TextPart))
        target = _NEXT.get(member)
        if target and member not in self.sent and not text.startswith("reply from"):
            self.sent.add(member)
            token = self.c.supervisor.member("web", member).token
            assert token is not None
            await self.c.router.send_message(token, target, f"{member} asks: look at it")
        tokens_in, tokens_out, cost = USED[member]
        meter = process.spec.meter
        assert meter is not None
        meter.reading(turn.message_id, UsageReading(
            tokens=TokenUsage(input_tokens=tokens_in, output_tokens=tokens_out), cost_usd=cost))
        return TurnResult(reply=f"{member} done")

    def runtimes(self) -> dict[str, FakeRuntime]:
        """A fake runtime of each name, every turn this chain's."""
        found = {}
        for name in ("claude", "codex", "opencode"):
            runtime = FakeRuntime([self.turn] * 50)
            runtime.name = name  # type: ignore[misc]
            found[name] = runtime
        return found


def chain_team(tmp_path: Path, **team: Any) -> TeamConfig:
    """lead (claude) → reviewer (codex) → designer (opencode); ``team``: more top-level
    tables (``telemetry``)."""
    config = team_config(tmp_path, {"name": "lead", "model": "claude-sonnet-4-5"},
                         {"name": "reviewer", "runtime": "codex", "model": "gpt-5.4-mini"},
                         {"name": "designer", "runtime": "opencode",
                          "model": "openrouter/moonshotai/kimi-k2.6"})
    return config.model_validate({**config.model_dump(exclude_defaults=True), **team})


async def quiet(c: Core, team: str = "web") -> None:
    """Every queue of ``team`` delivered and nothing on its way to one (events, bounded):
    every task of the loop waits and the journal writes nothing — an answer being journaled
    in the writer thread is a wait to the loop, and the reply it routes is queued after it."""
    async def settled() -> bool:
        await all_blocked()
        return not c.store.writing and not any((await c.store.queued_counts(team)).values())
    await until(settled, 20)
