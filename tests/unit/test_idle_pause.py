"""``pause_after``, in process (orchestrator/daemon/idle_pause.py): an idle member on a host
that can pause its place (a pod) is stopped and its place suspended; its next message resumes
it — the same session, the message delivered once, the receipt saying "resuming"; a turn in
flight is never cut by it; a pause is not an exit (the board's observers are not told)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.errors import HostUnavailable
from runtimes.local_host import LocalHost
from tests.fakes import FakeProcess, FakeRuntime, core, team_config

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.contracts import Turn, TurnResult
    from orchestrator.daemon.supervisor import MemberState
    from tests.fakes import Core

pytestmark = pytest.mark.anyio

PAUSE_AFTER = 0.05  # seconds: the test's setting (a pod's default is none; a user's minutes)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class PausingHost:
    """This machine's host with a pod's ``pause_after``; counts its suspends."""

    pause_after = PAUSE_AFTER

    def __init__(self, runtime: FakeRuntime, *, refuse: bool = False) -> None:
        self._local = LocalHost()
        self.runtime = runtime
        self.refuse = refuse
        self.suspends = 0
        self.paused_runtime_alive: list[bool] = []

    def __getattr__(self, name: str) -> object:  # the rest: this machine's
        return getattr(self._local, name)

    async def suspend(self) -> None:
        # the runtime has stopped before its place is paused
        self.paused_runtime_alive.append(self.runtime.opened[-1].exit_code is None)
        if self.refuse:
            raise HostUnavailable("lead", "k8s", "kube_unreachable", "the API server is down",
                                  retryable=True)
        self.suspends += 1


async def _until(c: Core, predicate: object, deadline: float = 10.0) -> MemberState:
    with anyio.fail_after(deadline):
        while True:
            state = c.supervisor.member("web", "lead")
            changed = state.changed()
            if predicate(state):  # type: ignore[operator]
                return state
            await changed.wait()


async def test_an_idle_member_is_paused_after_pause_after_and_its_place_suspended(
        tmp_path: Path) -> None:
    """Idle past ``pause_after``: its runtime stopped first, then its place suspended once;
    it reads paused (not ready, liveness unknown), and the board is told of no exit."""
    runtime = FakeRuntime()
    host = PausingHost(runtime=runtime)
    exits: list[int] = []
    async with core(tmp_path, runtime, hosts=lambda team, member: host) as c:
        async def exited(state: MemberState) -> None:
            exits.append(state.epoch)

        c.supervisor.on_exit.append(exited)
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}), "team.toml", wait=True,
                             timeout=10)
        state = await _until(c, lambda s: s.launch == "paused")
        assert (state.readiness, state.live) == ("not_ready", "unknown")
        assert host.suspends == 1 and host.paused_runtime_alive == [False]
        assert runtime.opened[0].exit_code is not None
        assert "pause_after" in (state.note or "")
        assert exits == [], "a pause is not an exit: the member's board tasks stay its own"
        status = (await c.teams.status("web")).teams[0].members[0]
        assert status.launch == "paused"


async def test_a_message_to_a_paused_member_resumes_it_and_is_delivered_once(
        tmp_path: Path) -> None:
    """The receipt says "resuming"; the member starts again on its recorded session, and the
    message — journaled while it was paused — is answered once."""
    runtime = FakeRuntime()
    host = PausingHost(runtime=runtime)
    async with core(tmp_path, runtime, hosts=lambda team, member: host) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}), "team.toml", wait=True,
                             timeout=10)
        session = c.supervisor.member("web", "lead").session_id
        await _until(c, lambda s: s.launch == "paused")
        result = await c.teams.send("web", "lead", "are you there?", wait=True, timeout=10)
        assert result.ok and result.reply == "echo: are you there?"  # type: ignore[union-attr]
        assert any(n.startswith("resuming: lead was paused")
                   for n in result.notes), result.notes  # type: ignore[union-attr]
        assert len(runtime.opened) == 2
        assert runtime.opened[1].spec.session_id == session and runtime.opened[1].resumed
        assert len(runtime.turns) == 1, "delivered once"
        state = c.supervisor.member("web", "lead")
        assert state.restarts == 0, "a resume is not a restart"
        assert not state.resuming


async def test_a_turn_in_flight_is_never_cut_by_pause_after(tmp_path: Path) -> None:
    """A turn longer than ``pause_after`` runs to its end; the pause comes after, idle."""
    release = anyio.Event()
    turn_started = anyio.Event()

    async def long_turn(process: FakeProcess, turn: Turn) -> TurnResult:
        turn_started.set()
        await release.wait()
        return await process._follow("answer", turn)

    runtime = FakeRuntime([long_turn])
    host = PausingHost(runtime=runtime)
    async with core(tmp_path, runtime, hosts=lambda team, member: host) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}), "team.toml", wait=True,
                             timeout=10)
        sent = await c.teams.send("web", "lead", "think long", wait=False, timeout=10)
        with anyio.fail_after(10):
            await turn_started.wait()
        for _ in range(4):  # four times pause_after, in the middle of the turn
            await anyio.sleep(PAUSE_AFTER)
            assert c.supervisor.member("web", "lead").busy
        assert host.suspends == 0 and len(runtime.opened) == 1
        release.set()
        delivery = await c.mailbox.wait_outcome(sent.id, "lead", 10)
        assert delivery.state == "answered" and delivery.attempts == 1
        await _until(c, lambda s: s.launch == "paused")
        assert len(runtime.turns) == 1


async def test_a_place_that_cannot_be_paused_keeps_the_member_running(tmp_path: Path) -> None:
    """The host refuses to pause (its API server down): the member is started again at once
    (not paused, not fatal, no restart counted), and the next idle spell tries again."""
    runtime = FakeRuntime()
    host = PausingHost(runtime=runtime, refuse=True)
    async with core(tmp_path, runtime, hosts=lambda team, member: host) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}), "team.toml", wait=True,
                             timeout=10)
        await _until(c, lambda s: len(runtime.opened) >= 3 and s.launch == "running")
        state = c.supervisor.member("web", "lead")
        assert (state.restarts, state.error) == (0, None)
        assert len(host.paused_runtime_alive) >= 2
        result = await c.teams.send("web", "lead", "still here", wait=True, timeout=10)
        assert result.ok


async def test_stopping_a_paused_member_stops_it(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    host = PausingHost(runtime=runtime)
    async with core(tmp_path, runtime, hosts=lambda team, member: host) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}), "team.toml", wait=True,
                             timeout=10)
        state = await _until(c, lambda s: s.launch == "paused")
        with anyio.fail_after(10):
            await c.teams.stop("web")
        assert state.launch == "stopped" and len(runtime.opened) == 1
