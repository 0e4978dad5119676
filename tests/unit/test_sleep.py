"""Idle members asleep, in process (daemon/members/_sleep.py): a member idle past its
``pause_after`` — on any host — has its runtime stopped as a planned stop (no restart, no exit
told, its session kept) and reads ``asleep`` since a time; its next message, a task handed
over or a hold released wakes it on its recorded session, delivered once, the receipt saying
"resuming"; a turn in flight is never cut; a liveness probe neither wakes it nor counts it
dead; a poke with nothing for it leaves it asleep. On a host that pauses its place (a pod) the
place is suspended too, and a place that will not suspend keeps the member running."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.config import TeamConfig
from orchestrator.contracts import HostProfile
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._api import assignee_of
from orchestrator.errors import HostUnavailable
from runtimes.hosts.local.host import LocalHost
from tests.support.fakes import FakeProcess, FakeRuntime, core, team_config
from tests.support.settle import all_blocked, member_until, until

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.contracts import Turn, TurnResult
    from orchestrator.daemon.members import MemberState
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio

PAUSE_AFTER = 0.02  # seconds: the test's setting (a user's is minutes)


class PausingHost:
    """This machine's host that pauses its place too (as a pod); counts its suspends."""

    profile = HostProfile(pauses=True)  # what the daemon asks before it suspends a place

    def __init__(self, runtime: FakeRuntime, *, refuse: bool = False) -> None:
        self._local = LocalHost()
        self.runtime = runtime
        self.refuse = refuse
        self.suspends = 0
        self.suspended_runtime_alive: list[bool] = []

    def __getattr__(self, name: str) -> object:  # the rest: this machine's
        return getattr(self._local, name)

    async def suspend(self) -> None:
        # the runtime has stopped before its place is suspended
        self.suspended_runtime_alive.append(self.runtime.opened[-1].exit_code is None)
        if self.refuse:
            raise HostUnavailable("lead", "k8s", "kube_unreachable", "the API server is down",
                                  retryable=True)
        self.suspends += 1




async def _launch(c: Core, tmp_path: Path, *members: dict[str, Any], **team: Any) -> None:
    rows = members or ({"name": "lead"},)
    await c.teams.launch(team_config(tmp_path, *rows, **{"pause_after": PAUSE_AFTER, **team}),
                         "team.toml", wait=True, timeout=10)


async def test_an_idle_member_falls_asleep_after_pause_after_its_process_stopped(
        tmp_path: Path) -> None:
    """Idle past ``pause_after`` on this machine: its runtime stopped (a planned stop: no
    restart counted), it reads asleep since a time (not ready, liveness unknown — neither
    alive nor dead), and the board is told of no exit."""
    runtime = FakeRuntime()
    exits: list[int] = []
    async with core(tmp_path, runtime) as c:
        async def exited(state: MemberState) -> None:
            exits.append(state.epoch)

        c.supervisor.on_exit.append(exited)
        await _launch(c, tmp_path)
        state = await member_until(c, "lead", lambda s: s.launch == "asleep")
        assert (state.readiness, state.live) == ("not_ready", "unknown")
        assert runtime.opened[0].exit_code is not None, "its process is gone"
        assert (state.restarts, state.recycles, state.error) == (0, 0, None)
        assert "pause_after" in (state.note or "")
        assert state.session_id == runtime.opened[0].session_id, "its session kept"
        assert exits == [], "a sleep is not an exit: the member's board tasks stay its own"
        status = (await c.teams.status("web")).teams[0].members[0]
        assert status.launch == "asleep" and status.asleep_since is not None
        assert (status.activity or "").startswith("asleep since ")


async def test_a_message_wakes_an_asleep_member_on_its_session_delivered_once(
        tmp_path: Path) -> None:
    """The receipt says "resuming"; the member starts again on its recorded session, and the
    message — journaled while it slept — is answered once; a wake is not a restart."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        await member_until(c, "lead", lambda s: s.launch == "asleep")
        result = await c.teams.send("web", "lead", "are you there?", wait=True, timeout=10)
        assert result.ok and result.reply == "echo: are you there?"  # type: ignore[union-attr]
        assert any(n.startswith("resuming: lead was asleep since ")
                   for n in result.notes), result.notes  # type: ignore[union-attr]
        assert len(runtime.opened) == 2
        assert runtime.opened[1].spec.session_id == runtime.opened[0].session_id
        assert runtime.opened[1].resumed
        assert len(runtime.turns) == 1, "delivered once"
        state = c.supervisor.member("web", "lead")
        assert (state.restarts, state.epoch) == (0, 2), "a wake is a new launch, not a restart"


async def test_a_turn_in_flight_is_never_cut_by_pause_after(tmp_path: Path) -> None:
    """A turn longer than ``pause_after`` runs to its end; the sleep comes after, idle.
    (A member that fell asleep between its launch and the send — a slow machine's 50 ms —
    is woken by the send: the turn's own process is the one never cut.)"""
    release = anyio.Event()
    turn_started = anyio.Event()
    turning: list[FakeProcess] = []

    async def long_turn(process: FakeProcess, turn: Turn) -> TurnResult:
        turning.append(process)
        turn_started.set()
        await release.wait()
        return await process._follow("answer", turn)

    runtime = FakeRuntime([long_turn])
    pause_after = 0.05
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, pause_after=pause_after)
        sent = await c.teams.send("web", "lead", "think long", wait=False, timeout=10)
        with anyio.fail_after(10):
            await turn_started.wait()
        for _ in range(2):  # twice pause_after, in the middle of the turn
            await anyio.sleep(pause_after)
            assert c.supervisor.member("web", "lead").slot.busy
        [process] = turning
        assert process is runtime.opened[-1] and process.exit_code is None
        release.set()
        delivery = await c.mailbox.wait_outcome(sent.id, "lead", 10)
        assert delivery.state == "answered" and delivery.attempts == 1
        await member_until(c, "lead", lambda s: s.launch == "asleep")
        assert len(runtime.turns) == 1


async def test_a_liveness_probe_neither_wakes_an_asleep_member_nor_counts_it_dead(
        tmp_path: Path) -> None:
    """Probes go to a live process only: while asleep, rounds of the liveness interval go by
    with no probe sent, no process started, liveness ``unknown`` — not dead, not
    unresponsive."""
    runtime = FakeRuntime(inline_probes=True)
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "liveness_interval": 0.02,
                                    "liveness_deadline": 0.5})
        await member_until(c, "lead", lambda s: s.launch == "asleep")
        probes = runtime.probes
        for _ in range(5):  # five liveness intervals, asleep
            await anyio.sleep(0.02)
        state = c.supervisor.member("web", "lead")
        assert (state.launch, state.live, len(runtime.opened)) == ("asleep", "unknown", 1)
        assert runtime.probes == probes, "no probe reaches a member asleep"


async def test_a_poke_with_nothing_for_it_leaves_an_asleep_member_asleep(
        tmp_path: Path) -> None:
    """Its queue looked at with nothing queued (a board change, a hold released with
    nothing held) does not wake it: only work does."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        await member_until(c, "lead", lambda s: s.launch == "asleep")
        looked: list[dict[str, int]] = []
        counts = c.store.queued_counts

        async def counted(team: str) -> dict[str, int]:
            found = await counts(team)
            looked.append(found)
            return found

        c.store.queued_counts = counted  # type: ignore[method-assign]
        c.mailbox.poke("web", "lead")
        await until(lambda: _true(bool(looked)))
        await all_blocked()
        state = c.supervisor.member("web", "lead")
        assert (state.launch, len(runtime.opened)) == ("asleep", 1)
        assert looked == [{}], "its queue was looked at once, and found empty"


async def test_a_held_member_sleeps_on_until_its_hold_is_released_then_wakes(
        tmp_path: Path) -> None:
    """A message to an asleep member held by its budget waits asleep (no process started for
    a turn it may not take); the budget raised releases the hold, which wakes it, and the
    message is answered once."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        assert c.built is not None
        await _launch(c, tmp_path)
        await member_until(c, "lead", lambda s: s.launch == "asleep")
        c.built.ledger.hold_budget("web", "lead", "budget reached")
        sent = await c.teams.send("web", "lead", "held back", wait=False, timeout=10)
        await all_blocked()
        assert (c.supervisor.member("web", "lead").launch, len(runtime.opened)) == ("asleep", 1)
        await c.built.ledger.set_budget("web", "lead", usd=5.0)
        delivery = await c.mailbox.wait_outcome(sent.id, "lead", 10)
        assert (delivery.state, delivery.attempts, len(runtime.opened)) == ("answered", 1, 2)


async def _true(value: bool) -> bool:
    return value


async def test_a_task_handed_to_an_asleep_claimer_wakes_it(tmp_path: Path) -> None:
    """``claims = true``: a ready task is handed to an asleep claimer (it is idle), and the
    hand-over's message wakes it on its session — the board keeps the task its own."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "dev", "claims": True})
        await member_until(c, "dev", lambda s: s.launch == "asleep")
        assert c.built is not None
        task = await c.built.board.create("web", "fix the login", created_by=OPERATOR)
        await member_until(c, "dev", lambda s: len(runtime.turns) == 1 and not s.slot.busy)
        assert "you now own task T" in str(runtime.turns[0].parts[0])
        assert len(runtime.opened) == 2 and runtime.opened[1].resumed
        shown = await c.built.board.get(task.id)
        assert (shown.task.status, shown.task.owner) == ("in_progress", "dev")


async def test_a_task_assigned_to_an_asleep_member_stays_its_own(tmp_path: Path) -> None:
    """A sleep is not an exit: a task the operator assigns to an asleep member is held by its
    last launch (no lease to run out, even with ``task_grace = 0``), and its next launch
    adopts it."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime, lease_check_interval=0.01) as c:
        config = TeamConfig.model_validate({
            "team": {"name": "web", "workdir": str(tmp_path), "pause_after": PAUSE_AFTER},
            "board": {"task_grace": 0},
            "members": [{"name": "dev", "runtime": "claude", "start_timeout": 5.0}]})
        await c.teams.launch(config, "team.toml", wait=True, timeout=10)
        await member_until(c, "dev", lambda s: s.launch == "asleep")
        assert c.built is not None
        board = c.built.board
        task = await board.create("web", "fix it", created_by=OPERATOR,
                                  assignee=assignee_of(c.teams, c.supervisor, "web", "dev"))
        for _ in range(5):  # five lease checks go by while it sleeps
            await anyio.sleep(0.01)
        assert ((await board.get(task.id)).task.owner, task.epoch) == ("dev", 1)
        assert (await c.teams.send("web", "dev", "how is T1?", wait=True, timeout=10)).ok
        shown = await board.get(task.id)
        assert (shown.task.status, shown.task.owner, shown.task.epoch) == ("in_progress", "dev", 2)
        assert "lapsed" not in [e.kind for e in shown.events]


async def test_a_members_own_pause_after_wins_and_zero_is_never(tmp_path: Path) -> None:
    """The team's ``pause_after`` is every member's default; a member's 0 keeps it awake."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "pause_after": 0}, {"name": "dev"})
        await member_until(c, "dev", lambda s: s.launch == "asleep")  # after pause_after
        for _ in range(3):  # three times more
            await anyio.sleep(PAUSE_AFTER)
        assert c.supervisor.member("web", "lead").launch == "running"


async def test_an_asleep_members_place_is_suspended_after_its_runtime_stopped(
        tmp_path: Path) -> None:
    """On a host that pauses its place (a pod): the runtime stopped first, then the place
    suspended once; the next message resumes both."""
    runtime = FakeRuntime()
    host = PausingHost(runtime=runtime)
    async with core(tmp_path, runtime, hosts=lambda team, member: host) as c:
        await _launch(c, tmp_path)
        await member_until(c, "lead", lambda s: s.launch == "asleep")
        assert host.suspends == 1 and host.suspended_runtime_alive == [False]
        result = await c.teams.send("web", "lead", "back?", wait=True, timeout=10)
        assert result.ok and len(runtime.opened) == 2


async def test_a_place_that_cannot_be_suspended_keeps_the_member_running(
        tmp_path: Path) -> None:
    """The host refuses to suspend (its API server down): the member is started again at
    once (not asleep, not fatal, no restart counted), and the next idle spell tries again."""
    runtime = FakeRuntime()
    host = PausingHost(runtime=runtime, refuse=True)
    async with core(tmp_path, runtime, hosts=lambda team, member: host) as c:
        await _launch(c, tmp_path)
        await member_until(c, "lead", lambda s: len(runtime.opened) >= 3 and s.launch == "running")
        state = c.supervisor.member("web", "lead")
        assert (state.restarts, state.error) == (0, None)
        assert len(host.suspended_runtime_alive) >= 2
        result = await c.teams.send("web", "lead", "still here", wait=True, timeout=10)
        assert result.ok


async def test_stopping_an_asleep_member_stops_it(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        state = await member_until(c, "lead", lambda s: s.launch == "asleep")
        with anyio.fail_after(10):
            await c.teams.stop("web")
        assert state.launch == "stopped" and len(runtime.opened) == 1
