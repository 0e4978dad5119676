"""Liveness is proven, not assumed (the core, in process with the fake runtime).

An idle member answers a probe every ``liveness_interval`` within ``liveness_deadline``; one
that does not reads ``unresponsive``, is restarted, and its queue goes on to the new process.
Each process is an epoch: nothing a replaced process reports reaches its successor.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.contracts import Turn, TurnResult
from runtimes.hosts.ssh.host import SshHost, SshTarget
from tests.support.fakes import FakeProcess, FakeRuntime, core, team_config
from tests.support.scripts import python_script
from tests.support.settle import until

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from orchestrator.daemon.members import MemberState
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio

# a fake's probe is answered without an await (inline, or in its task's first step), so no
# load can make an answering member miss even a short deadline: the deadline here is the wait
# for a frozen one's verdict. A test whose probe must stay out while it acts, or whose answer
# comes late but in time, sets its own.
FAST = {"liveness_interval": 0.05, "liveness_deadline": 0.05, "backoff": [0.01, 0.1]}


async def _launch(c: Core, tmp_path: Path, **member: object) -> MemberState:
    config = team_config(tmp_path, {"name": "lead", **FAST, **member})
    await c.teams.launch(config, "team.toml", wait=True, timeout=10)
    return c.supervisor.member("web", "lead")


async def _until(c: Core, check: Callable[[MemberState], bool], timeout: float = 10
                 ) -> MemberState:
    """The member once ``check`` holds, looked at the moment it changes (no poll, no sleep)."""
    with anyio.fail_after(timeout):
        while True:
            state = c.supervisor.member("web", "lead")
            changed = state.changed()
            if check(state):
                return state
            await changed.wait()


@pytest.fixture(params=["written at once", "awaited"])
def runtime(request: pytest.FixtureRequest) -> FakeRuntime:
    """Both ways a probe goes out: written in the round's own pass (Claude, Codex, ACP) or
    awaited in a task of its own (OpenCode, a member on another host)."""
    return FakeRuntime(inline_probes=request.param == "written at once")


async def test_a_member_that_misses_its_probe_reads_unresponsive_not_alive(
        tmp_path: Path, runtime: FakeRuntime) -> None:
    """A member that does not answer its probe reads ``unresponsive`` (was: ``dead``, or
    ``alive`` for as long as the probe waited) until a new process is up — a new epoch — and
    a message queued meanwhile is answered once, by the new process."""
    async with core(tmp_path, runtime) as c:
        state = await _launch(c, tmp_path)
        assert state.snapshot().liveness == "alive"
        [frozen] = runtime.opened
        frozen.responsive = False
        down = await _until(c, lambda s: s.liveness == "unresponsive")
        assert down.snapshot().liveness == "unresponsive" and frozen.exit_code == -9
        result = await c.teams.send(None, "lead", "are you back?", wait=True, timeout=10)
        assert result.state == "answered" and result.attempts == 1
        [_, fresh] = runtime.opened
        assert frozen.turns == [] and [t.message_id for t in fresh.turns] == [result.id]
        row = state.snapshot()
        assert (row.liveness, row.epoch, row.restarts) == ("alive", 2, 1)


async def test_a_turn_is_never_handed_to_a_member_whose_probe_is_out(
        tmp_path: Path, runtime: FakeRuntime) -> None:
    """While a probe waits for its answer no turn is claimed: a message sent to a member that
    froze since its last probe goes to the process that replaces it, not into the frozen one
    (where it would wait for the turn's idle timeout, 600 s by default)."""
    async with core(tmp_path, runtime) as c:
        # the probe is out for this deadline: the send below is journaled and looked at
        # within it (milliseconds)
        await _launch(c, tmp_path, liveness_deadline=0.3)
        [frozen] = runtime.opened
        asked = anyio.Event()

        async def never_answers(timeout: float) -> bool:
            asked.set()
            await anyio.sleep_forever()
            return True  # pragma: no cover

        frozen.probe = never_answers  # type: ignore[method-assign]
        frozen.responsive = False  # written at once: held, never answered
        if runtime.inline_probes:
            await runtime.wait_probes(runtime.probes + 1)
        else:
            with anyio.fail_after(10):
                await asked.wait()
        assert c.supervisor.member("web", "lead").slot.probing
        result = await c.teams.send(None, "lead", "hello", wait=True, timeout=20)
        assert result.state == "answered"
        assert frozen.turns == [], "nothing was written to the frozen process"
        assert [t.message_id for t in runtime.opened[1].turns] == [result.id]


async def test_a_probe_answered_before_the_deadline_keeps_the_member(
        tmp_path: Path, runtime: FakeRuntime) -> None:
    """A slow answer that still comes within the deadline (a process continued after a
    SIGSTOP) keeps the member alive, on the same process and epoch. It comes once the probe
    was logged late (half the deadline), with the other half, 0.3 s, to spare."""
    async with core(tmp_path, runtime) as c:
        state = await _launch(c, tmp_path, liveness_deadline=0.6)
        [slow] = runtime.opened
        answered = anyio.Event()

        async def logged_late() -> bool:
            return any(e["event"] == "member_probe_late" for e in logs)

        async def late(timeout: float) -> bool:
            await until(logged_late)  # past half the deadline: logged late, then recovered
            answered.set()
            return True

        with capture_logs() as logs:
            slow.probe = late  # type: ignore[method-assign]
            if runtime.inline_probes:
                slow.responsive = False
                await runtime.wait_probes(runtime.probes + 1)
                await until(logged_late)  # the process answers late: past half the deadline
                slow.responsive = True
                slow.answer_probes()
            else:
                with anyio.fail_after(10):
                    await answered.wait()
            assert not state.slot.probing  # the answer ended the probe: a turn may be claimed
        events = [e["event"] for e in logs]
        assert "member_probe_late" in events and "member_probe_recovered" in events
        assert "member_unresponsive" not in events
        assert (state.liveness, state.epoch, len(runtime.opened)) == ("alive", 1, 1)


async def test_one_round_probes_every_idle_member_and_judges_each_alone(
        tmp_path: Path) -> None:
    """Members of one interval are probed in one round: the one that froze is unresponsive
    and restarted, the one that answered stays on its process and epoch, and a busy member
    is not probed at all."""
    runtime = FakeRuntime(inline_probes=True)
    async with core(tmp_path, runtime) as c:
        members = [{"name": n, **FAST} for n in ("lead", "dev", "busy")]
        config = team_config(tmp_path, *members)
        await c.teams.launch(config, "team.toml", wait=True, timeout=10)
        dev, busy = (c.supervisor.member("web", n) for n in ("dev", "busy"))
        processes = {p.spec.member: p for p in runtime.opened}
        busy.slot.busy = True  # a turn is out: its own watchdog covers it
        before = {name: p.probed for name, p in processes.items()}
        processes["lead"].responsive = False
        await _until(c, lambda s: s.liveness == "unresponsive")
        assert processes["lead"].exit_code == -9
        assert (dev.liveness, dev.epoch) == ("alive", 1) and not dev.slot.probing
        assert processes["dev"].probed > before["dev"], "probed in the same rounds"
        assert (busy.liveness, busy.epoch) == ("alive", 1)
        assert processes["busy"].probed == before["busy"], "a busy member is not probed"
        busy.slot.busy = False


async def test_a_turn_end_from_an_old_epoch_never_changes_the_new_process(
        tmp_path: Path) -> None:
    """A turn that ends after its process was replaced (a late answer from a dead process)
    is ignored by the supervisor and logged: it used to record the dead process's session id
    over the new one's (the next start resumed the wrong session) and count its turn against
    the new process."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        state = await _launch(c, tmp_path)
        kept = state.session_id

        async def late_answer(process: FakeProcess, turn: Turn) -> TurnResult:
            process._session_id = "session-of-the-dead-process"
            process.kill()  # the member restarts: epoch 2
            await _until(c, lambda s: s.process not in (None, process)
                         and s.readiness != "not_ready")
            return TurnResult(reply="late", session_id=process.session_id)

        runtime.script = [late_answer]
        with capture_logs() as logs:
            await c.teams.send(None, "lead", "one", wait=True, timeout=10)
            await c.teams.send(None, "lead", "two", wait=True, timeout=10)  # after its slot
        recorded = [e["session_id"] for e in logs if e["event"] == "member_session"]
        assert "session-of-the-dead-process" not in recorded
        assert state.session_id == kept == runtime.opened[1].session_id
        assert await c.store.session_id("web", "lead") == kept
        assert state.slot.on_process == 1, "only the new process's own turn"
        [stale] = [e for e in logs if e["event"] == "stale_event_ignored"]
        assert (stale["epoch"], stale["current"], stale["what"]) == (1, 2, "turn_end")


class _Host:
    """A member's SSH host whose ControlMaster stops answering ``-O check``."""

    name = "box"

    def __init__(self) -> None:
        self.up = True
        self.asked_once = anyio.Event()

    async def answers(self, deadline: float) -> bool:
        self.asked_once.set()
        return self.up

    async def close(self) -> None:
        pass


async def test_a_member_whose_ssh_master_stops_answering_is_unresponsive(
        tmp_path: Path) -> None:
    """On an SSH host the runtime's answer is not enough: the master every channel runs
    through must answer ``ssh -O check`` too, or the member is unresponsive and restarted."""
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        state = await _launch(c, tmp_path)
        host = _Host()
        state.host = host  # type: ignore[assignment]
        await runtime.wait_probes(runtime.probes + 1)
        with anyio.fail_after(10):
            await host.asked_once.wait()
        assert state.liveness == "alive" and not state.slot.probing
        host.up = False
        await _until(c, lambda s: s.liveness == "unresponsive")
        assert runtime.opened[0].exit_code == -9


def _fake_ssh(tmp_path: Path, body: str) -> str:
    path = tmp_path / "ssh"
    return str(python_script(path, f"import sys, time\n{body}\n"))


async def test_the_ssh_master_check_is_bounded_by_the_deadline(tmp_path: Path) -> None:
    """``answers``: True when ``-O check`` exits 0, False when it fails or hangs past
    the deadline; True when no master is kept (nothing to ask)."""
    control = tmp_path / "cm"
    control.mkdir(mode=0o700)
    target = SshTarget("box", "10.0.0.5", "dev", None, None, ())
    host = SshHost(target, control, "h0", "web", "lead", tmp_path / "state",
                   ssh=_fake_ssh(tmp_path, "sys.exit(0)"))
    assert await host.answers(1.0), "no master socket: nothing to ask"
    with socket.socket(socket.AF_UNIX) as master:
        master.bind(host.control_path)
        assert await host.answers(5.0)
        host.ssh = _fake_ssh(tmp_path, "sys.exit(255)")
        assert not await host.answers(5.0)
        host.ssh = _fake_ssh(tmp_path, "time.sleep(3600)")
        with anyio.fail_after(5):
            assert not await host.answers(0.05)  # it hangs: any deadline is waited out
    assert await anyio.Path(host.control_path).exists(), "a probe never removes the master"


async def test_an_answered_probe_changes_nothing_anyone_sees_and_wakes_only_a_waiting_turn(
        tmp_path: Path, runtime: FakeRuntime) -> None:
    """A probe that is answered changes no status: the live view's change feed is not bumped
    and no waiter of the member is woken (a hundred idle members' probes redrew the page and
    woke the notify loop several times a second, issue 26's idle CPU), while a turn waiting
    for the probe is still woken."""
    async with core(tmp_path, runtime) as c:
        state = await _launch(c, tmp_path)
        assert c.built is not None
        before = c.built.changes.version
        woken = state.changed()
        await runtime.wait_probes(runtime.probes + 3)
        assert not state.slot.probing and c.built.changes.version == before
        assert not woken.is_set(), "an answered probe woke the member's waiters"
        done = await c.teams.send("web", "lead", "after the probes", wait=True, timeout=10)
        assert done.ok  # type: ignore[union-attr]


def test_members_of_one_interval_are_probed_on_one_tick() -> None:
    """The probe schedule is a grid of the interval on the loop's clock: members that became
    idle at different moments wake at the same instant (one loop wake-up for the team), always
    after now and at most one interval later."""
    from orchestrator.daemon.members._liveness import next_tick

    assert next_tick(91.0, 15.0) == next_tick(104.9, 15.0) == 105.0
    assert next_tick(105.0, 15.0) == 120.0, "a tick is never now"
    for now in (0.0, 0.049, 7.5, 1e6 + 0.3):
        for interval in (0.05, 1.0, 15.0):
            assert 0 < next_tick(now, interval) - now <= interval + 1e-9


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_late_warning_timer_fires_while_a_probe_waits_and_never_after(
        anyio_backend: str) -> None:
    """The probe's late warning is a loop timer on asyncio (the daemon) and a task elsewhere
    (the core's tests run on trio too): it fires while the block still waits, and a block
    that ends first leaves nothing behind (an uncancelled timer task would hold the exit)."""
    from orchestrator.daemon.members._liveness import _timer

    fired = anyio.Event()
    with anyio.fail_after(5):
        async with _timer(0.01, fired.set):
            await fired.wait()
        async with _timer(3600, fired.set):
            pass


async def test_an_adapter_whose_probe_raises_is_probed_the_awaited_way(tmp_path: Path) -> None:
    """A bug in an adapter's ``send_probe`` never takes the round (nor the daemon) down: it
    is logged and that member's probe is awaited instead; the member stays alive."""
    runtime = FakeRuntime(inline_probes=True)
    async with core(tmp_path, runtime) as c:
        state = await _launch(c, tmp_path)
        [process] = runtime.opened

        def broken(answered: Callable[[], None]) -> Callable[[], None] | None:
            raise RuntimeError("an adapter bug")

        with capture_logs() as logs:
            process.send_probe = broken  # type: ignore[method-assign]
            before = process.probed
            await runtime.wait_probes(runtime.probes + 2)
        assert process.probed >= before + 2, "the awaited probe went out instead"
        assert "member_probe_failed" in [e["event"] for e in logs]
        assert (state.liveness, state.epoch) == ("alive", 1)


async def test_each_verdict_names_the_launch_it_judged(tmp_path: Path, runtime: FakeRuntime
                                                       ) -> None:
    """The rounds run in one task for every member: each event names its own member's launch
    (the round's task began in the first launch's context — its epoch must not stick: the
    second launch's verdict said epoch 1 once, and bench_liveness waited for epoch 2 in vain)."""
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        with capture_logs() as logs:
            for epoch in (1, 2):
                runtime.opened[-1].responsive = False
                await _until(c, lambda s, n=epoch: s.epoch == n + 1 and s.liveness == "alive")
        verdicts = [e for e in logs if e["event"] == "member_unresponsive"]
        assert [(e["member"], e["epoch"]) for e in verdicts] == [("lead", 1), ("lead", 2)]
