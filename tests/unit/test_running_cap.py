"""``max_running``, in process (daemon/members/_running_cap.py): at most N of a team's members'
processes live at once. At the launch the first N by rank start (the lead, then the members
holding a task, then the file's order) and the rest begin asleep, never started; a message to
one of them puts the longest-idle running member to sleep first; when every running member is
busy it waits, saying so, and starts when one is free — waiters by rank, then by arrival."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._api import assignee_of
from tests.support.fakes import FakeProcess, FakeRuntime, core, team_config
from tests.support.settle import member_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from orchestrator.contracts import LaunchSpec, Turn, TurnResult
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio


class CountingRuntime(FakeRuntime):
    """The fake runtime, counting its live processes (and the most at once)."""

    def __init__(self, script: list[Any] | None = None) -> None:
        super().__init__(script)
        self.live: list[str] = []
        self.most = 0

    @asynccontextmanager
    async def open(self, spec: LaunchSpec) -> AsyncIterator[FakeProcess]:
        async with super().open(spec) as process:
            self.live.append(spec.member)
            self.most = max(self.most, len(self.live))
            try:
                yield process
            finally:
                self.live.remove(spec.member)

    def who(self) -> list[str]:
        return [p.spec.member for p in self.opened]


def gated(gate: anyio.Event, started: anyio.Event) -> Callable[..., Any]:
    """A turn that holds until ``gate`` is set (``started`` says it began)."""
    async def turn(process: FakeProcess, turn: Turn) -> TurnResult:
        started.set()
        await gate.wait()
        return await process._follow("answer", turn)
    return turn




async def _launch(c: Core, tmp_path: Path, *members: dict[str, Any], limit: int = 2) -> None:
    await c.teams.launch(team_config(tmp_path, *members, max_running=limit), "team.toml",
                         wait=True, timeout=10)


async def test_at_the_launch_the_first_n_by_rank_start_and_the_rest_sleep_unstarted(
        tmp_path: Path) -> None:
    """Three members, ``max_running = 2``: the lead (listed last) and the first in file order
    start; the third is asleep without ever having started, its first message to start it."""
    runtime = CountingRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "a"}, {"name": "b"}, {"name": "lead", "lead": True})
        state = await member_until(c, "b", lambda s: s.launch == "asleep")
        assert sorted(runtime.who()) == ["a", "lead"]
        assert (state.epoch, state.pid, state.readiness) == (0, None, "not_ready")
        assert "max_running = 2" in (state.note or "")
        assert runtime.most == 2


async def test_a_message_past_the_cap_puts_the_longest_idle_member_to_sleep_first(
        tmp_path: Path) -> None:
    """A message to the member that never started: the running member idle the longest is
    put to sleep (its slot given), then the addressee starts, answers once, the receipt
    saying it was resuming — never more than two processes live at once."""
    runtime = CountingRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "a"}, {"name": "b"}, {"name": "c"})
        await member_until(c, "c", lambda s: s.launch == "asleep")
        assert (await c.teams.send("web", "a", "one", wait=True, timeout=10)).ok
        result = await c.teams.send("web", "c", "wake up", wait=True, timeout=10)
        assert result.ok and result.reply == "echo: wake up"  # type: ignore[union-attr]
        assert any(n.startswith("resuming: c was asleep") for n in result.notes)  # type: ignore[union-attr]
        b = c.supervisor.member("web", "b")
        assert b.launch == "asleep" and "its running slot given to c" in (b.why or "")
        assert c.supervisor.member("web", "a").launch == "running", "a was idle for less"
        assert sorted(runtime.who()[:2]) == ["a", "b"] and runtime.who()[2:] == ["c"]
        assert sorted(runtime.live) == ["a", "c"] and runtime.most == 2
        assert len([t for t in runtime.turns if "wake up" in str(t.parts[0])]) == 1


async def test_when_every_running_member_is_busy_the_woken_member_waits_then_starts(
        tmp_path: Path) -> None:
    """Both running members in a turn: the third waits — its activity says so — and no turn
    is cut; when one turn ends that member is put to sleep and the third starts."""
    gate_a, started_a = anyio.Event(), anyio.Event()
    gate_b, started_b = anyio.Event(), anyio.Event()
    runtime = CountingRuntime([gated(gate_a, started_a), gated(gate_b, started_b)])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "a"}, {"name": "b"}, {"name": "c"})
        await c.teams.send("web", "a", "hold a", wait=False, timeout=10)
        with anyio.fail_after(10):
            await started_a.wait()
        await c.teams.send("web", "b", "hold b", wait=False, timeout=10)
        with anyio.fail_after(10):
            await started_b.wait()
        sent = await c.teams.send("web", "c", "your turn", wait=False, timeout=10)
        waiting = await member_until(c, "c", lambda s: s.waiting is not None)
        status = {m.name: m for m in (await c.teams.status("web")).teams[0].members}
        assert status["c"].activity == "waiting for a running slot (max_running = 2)"
        assert status["c"].launch == "starting" and "c" not in runtime.who()
        assert waiting.waking and any(n.startswith("resuming: c was asleep") for n in sent.notes)
        gate_b.set()
        delivery = await c.mailbox.wait_outcome(sent.id, "c", 10)
        assert delivery.state == "answered"
        assert c.supervisor.member("web", "b").launch == "asleep"
        assert c.supervisor.member("web", "a").slot.busy, "a's turn was never cut"
        assert runtime.most == 2
        gate_a.set()


async def test_waiters_go_by_rank_the_lead_and_task_holders_first(tmp_path: Path) -> None:
    """``max_running = 1``, the lead running a long turn: x is woken by a message, then y,
    which holds a task; when the lead's turn ends, y (rank) starts before x (arrival)."""
    gate, started = anyio.Event(), anyio.Event()
    runtime = CountingRuntime([gated(gate, started)])
    async with core(tmp_path, runtime) as c:
        assert c.built is not None
        await _launch(c, tmp_path, {"name": "x"}, {"name": "y"}, {"name": "lead", "lead": True},
                      limit=1)
        await member_until(c, "y", lambda s: s.launch == "asleep")
        assert runtime.who() == ["lead"]
        await c.teams.send("web", "lead", "think", wait=False, timeout=10)
        with anyio.fail_after(10):
            await started.wait()
        await c.built.board.create("web", "ship it", created_by=OPERATOR,
                                   assignee=assignee_of(c.teams, c.supervisor, "web", "y"))
        for_x = await c.teams.send("web", "x", "first come", wait=False, timeout=10)
        await member_until(c, "x", lambda s: s.waiting is not None)
        for_y = await c.teams.send("web", "y", "holds a task", wait=False, timeout=10)
        await member_until(c, "y", lambda s: s.waiting is not None)
        gate.set()
        await c.mailbox.wait_outcome(for_x.id, "x", 10)
        await c.mailbox.wait_outcome(for_y.id, "y", 10)
        assert runtime.who() == ["lead", "y", "x"]
        assert runtime.most == 1


async def test_a_team_without_max_running_starts_every_member(tmp_path: Path) -> None:
    runtime = CountingRuntime()
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "a"}, {"name": "b"}, {"name": "c"}),
                             "team.toml", wait=True, timeout=10)
        assert sorted(runtime.live) == ["a", "b", "c"]


async def test_stopping_a_team_with_a_waiter_ends_its_wait(tmp_path: Path) -> None:
    """A member waiting for a slot is stopped with its team; nothing waits on after."""
    gate, started = anyio.Event(), anyio.Event()
    runtime = CountingRuntime([gated(gate, started)])
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "a"}, {"name": "b"}, limit=1)
        await c.teams.send("web", "a", "hold", wait=False, timeout=10)
        with anyio.fail_after(10):
            await started.wait()
        await c.teams.send("web", "b", "wait", wait=False, timeout=10)
        state = await member_until(c, "b", lambda s: s.waiting is not None)
        with anyio.fail_after(10):
            await c.teams.stop("web")
        assert state.launch == "stopped" and runtime.who() == ["a"]


async def test_teamctl_restart_of_a_member_asleep_since_the_launch_starts_it(
        tmp_path: Path) -> None:
    """The operator's restart wants the member running: one that never started (past the cap
    at the launch) takes the slot of the longest-idle member."""
    runtime = CountingRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "a"}, {"name": "b"}, limit=1)
        await member_until(c, "b", lambda s: s.launch == "asleep")
        await c.teams.restart("web", "b")
        await member_until(c, "b", lambda s: s.launch == "running")
        assert c.supervisor.member("web", "a").launch == "asleep"
        assert runtime.who() == ["a", "b"] and runtime.most == 1
