"""One member's life: start its runtime process, wait for readiness, watch it (liveness, a
wanted recycle, its sleep) until it exits, and start it again by the restart policy — a new
epoch each time; asleep between its running spells (``_sleep``), each spell holding a running
slot of its team (``_running_cap``). The supervisor runs one of these per member and keeps the
roster."""

from __future__ import annotations

import signal
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog

from orchestrator.daemon.members import _orphans as orphans
from orchestrator.daemon.members import _sleep as sleep
from orchestrator.daemon.members._restart_policy import RestartPolicy
from orchestrator.daemon.members.state import TRANSITIONS, LaunchState
from orchestrator.errors import MemberStartFailed

if TYPE_CHECKING:
    from collections.abc import Mapping

    from orchestrator.daemon.members._ceilings import Ceilings
    from orchestrator.daemon.members._launch import LaunchFactory
    from orchestrator.daemon.members._liveness import Probes
    from orchestrator.daemon.members._running_cap import RunningCap
    from orchestrator.daemon.members.state import MemberState
    from orchestrator.paths import Home
    from orchestrator.ports import Runtime, RuntimeProcess

__all__ = ["Gate", "Lifecycle", "Observer", "SessionStore", "Sleep"]

log = structlog.get_logger("teamctl.supervisor")

SessionStore = Callable[[str, str, str | None], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]
# told of each launch that came up, and of each that ended (e.g. the board's leases)
Observer = Callable[["MemberState"], Awaitable[None]]
_OBSERVER_DEADLINE = 10.0  # one observer's call, at most
# a process stopped by plan (hygiene, a sleep): no policy, no backoff, not an exit
_PLANNED = frozenset({LaunchState.RECYCLING, LaunchState.FALLING_ASLEEP})


class Gate(Protocol):
    """What a start passes before the member's runtime is opened (memory admission:
    ``daemon.admission.Admission``)."""

    async def admit(self, state: MemberState, told: Callable[[str], None]) -> None:
        """Return once the member may start; ``told(why)`` while it waits (cancellable)."""
        ...


def _signal_name(exit_code: int | None) -> str | None:
    if exit_code is None or exit_code >= 0:
        return None
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return None


class Lifecycle:
    """Runs members' processes: ``run`` is one member's task (the supervisor spawns it)."""

    def __init__(self, home: Home, runtimes: Mapping[str, Runtime], launches: LaunchFactory,
                 *, save_session: SessionStore, clock: Callable[[], float], sleep: Sleep,
                 is_current: Callable[[MemberState, int], bool], probes: Probes,
                 ceilings: Ceilings, running: RunningCap, gate: Gate) -> None:
        self._home = home
        self._ceilings = ceilings
        self._gate = gate
        self._probes = probes
        self._running = running  # max_running: each running spell holds a slot
        self._runtimes = runtimes
        self._launches = launches
        self._save_session = save_session
        self._clock = clock
        self._sleep = sleep
        self._is_current = is_current
        self.on_launch: list[Observer] = []  # the launch is ready (state.epoch: its number)
        self.on_exit: list[Observer] = []  # the launch's process ended (state.epoch: its)

    async def run(self, state: MemberState) -> None:
        """The member's whole life, until it is stopped (its scope cancelled) or fatal."""
        config = state.config
        policy = RestartPolicy(
            config.restart, config.backoff[0], config.backoff[1], config.max_restarts,
            config.restart_window,
        )
        with anyio.CancelScope() as scope:
            state.scope = scope
            try:
                await self._restart_loop(state, policy)
            except Exception as exc:  # a bug here must not take the daemon down
                state.error = f"internal error: {exc!r}"
                log.exception("member_task_crashed", team=state.team, member=state.name)
                if LaunchState.FATAL in TRANSITIONS[state.launch_state]:
                    state.move(LaunchState.FATAL, "internal error")
            finally:
                state.waiters.settled.set()
        if scope.cancel_called:
            if state.launch_state is not LaunchState.STOPPED:
                state.move(LaunchState.STOPPED, "stopped")
            log.info("member_stopped", team=state.team, member=state.name,
                     exit=(state.last_exit or {}).get("code"))
        if state.liveness == "alive":  # "unresponsive" says why it went
            state.liveness = "dead"
        state.notify()
        state.waiters.done.set()

    async def _restart_loop(self, state: MemberState, policy: RestartPolicy) -> None:
        """Running spells, each holding a running slot (``max_running``), asleep between
        them until a turn wants the member; a stop or ``fatal`` ends it."""
        while True:
            async with self._running.slot(state) as not_started:
                if not_started is None and not await self._spell(state, policy):
                    return
            await sleep.asleep(state, not_started or state.why or "asleep")

    async def _spell(self, state: MemberState, policy: RestartPolicy) -> bool:
        """Start it, and again by its policy or a recycle, until it falls asleep (True: its
        process stopped, its place suspended) or stops or is ``fatal`` (False)."""
        while True:
            exit_code = await self._run_once(state)
            launch = state.launch_state
            if launch in (LaunchState.FATAL, LaunchState.STOPPING):  # a stop ends the loop
                return False
            if launch is LaunchState.FALLING_ASLEEP:  # planned: asleep until a turn wants it
                if await sleep.suspend_place(state):
                    return True
                continue  # its place would not suspend: started again at once
            if launch is LaunchState.RECYCLING:  # planned: no policy, no backoff, no restart
                log.info("member_recycled", team=state.team, member=state.name,
                         reason=state.why, exit=exit_code)
                state.recycles += 1
                continue
            decision = policy.on_exit(
                now=self._clock(), exit_code=exit_code,
                uptime=self._clock() - state.started_at,
            )
            log.info("member_restart_decision", team=state.team, member=state.name,
                     epoch=state.epoch, action=decision.action, delay=round(decision.delay, 3),
                     reason=decision.reason)
            if decision.action != "restart":
                state.move(LaunchState.FATAL if decision.action == "fatal"
                           else LaunchState.STOPPED, decision.reason)
                state.error = state.error or decision.reason
                state.notify()
                return False
            state.move(LaunchState.BACKOFF, decision.reason or "exited")
            state.notify()
            await self._sleep(decision.delay)
            state.restarts += 1

    async def _run_once(self, state: MemberState) -> int | None:
        """One start → ready → exit cycle, a new epoch (on every event logged during it, the
        runtime's own included). Returns the exit status (None: no process)."""
        state.epoch += 1
        with structlog.contextvars.bound_contextvars(epoch=state.epoch):
            return await self._launch_once(state)

    async def _launch_once(self, state: MemberState) -> int | None:
        if state.launch_state is not LaunchState.WAKING:  # waking: starting already
            state.move(LaunchState.STARTING, f"launch {state.epoch}")
        state.error = None
        state.started_at = self._clock()
        state.notify()
        log.info("member_starting", team=state.team, member=state.name, restarts=state.restarts)
        runtime = self._runtimes[state.config.runtime]
        await self._admitted(state)  # the spec after: its token, budget backstop, session now
        try:
            spec = await self._launches.spec(state, runtime)
        except MemberStartFailed as exc:
            state.move(LaunchState.FATAL, exc.code)
            state.error = exc.message
            log.error("member_start_failed", team=state.team, member=state.name,
                      code=exc.code, error=exc.message)
            state.waiters.settled.set()
            return None
        state.session_id = spec.session_id
        opened: RuntimeProcess | None = None
        contained = self._ceilings.contain(state)  # its cgroup, where it has a ceiling
        try:
            async with contained, runtime.open(spec) as process:
                opened = process
                await self._on_ready(state, process, spec.session_id)
                await _tell(self.on_launch, state, "launch")
                exit_code = await self._watch(state, process)
                stderr_tail, cut_turn = process.stderr_tail(), state.slot.turn
        except anyio.get_cancelled_exc_class():
            if opened is not None:
                state.last_exit = {"code": opened.exit_code, "at": time.time(),
                                   "reason": contained.exceeded}
            raise
        except MemberStartFailed as exc:
            state.error = "; ".join(filter(None, (exc.message, contained.exceeded)))
            if not exc.retryable:  # e.g. not logged in: a restart cannot fix it
                state.move(LaunchState.FATAL, exc.code)
            log.error("member_start_failed", team=state.team, member=state.name,
                      code=exc.code, error=exc.message, stderr_tail=exc.stderr_tail)
            state.waiters.settled.set()
            return None
        finally:
            state.process, state.slot.busy, state.pid = None, False, None
            if state.liveness != "unresponsive":  # that says why, until the next one is up
                state.liveness = "dead"
            if state.approver is not None:
                with anyio.CancelScope(shield=True):
                    await state.approver.close("the member process that asked is gone")
            orphans.forget(self._home.member_dir(state.team, state.name))
            if opened is not None and state.launch_state is not LaunchState.FALLING_ASLEEP:
                await _tell(self.on_exit, state, "exit")  # asleep: not gone (its tasks)
            state.notify()
        state.slot.on_process = 0
        if state.launch_state in _PLANNED:
            return opened.exit_code if opened is not None else exit_code
        state.last_exit = {"code": exit_code, "at": time.time(), "reason": contained.exceeded}
        state.slot.turn = None
        log.warning("member_exited", team=state.team, member=state.name, exit=exit_code,
                    signal=_signal_name(exit_code), turn=cut_turn, stderr_tail=stderr_tail,
                    **({"reason": contained.exceeded} if contained.exceeded else {}))
        return exit_code

    async def _admitted(self, state: MemberState) -> None:
        """Pass the gate: a member whose memory does not fit reads ``waiting`` (why in
        ``state.waiting``; a launch waiting for it is settled) until it does."""
        was = state.launch_state  # starting, or waking from its sleep

        def told(why: str) -> None:
            if state.launch_state is not LaunchState.WAITING:
                state.move(LaunchState.WAITING, why)
            state.waiting = why
            state.waiters.settled.set()  # ``launch`` returns: it waits, it has not failed
            state.notify()

        try:
            await self._gate.admit(state, told)
        finally:
            state.waiting = None
        if state.launch_state is LaunchState.WAITING:
            state.move(was, "its memory fits")
            state.waiters.settled = anyio.Event()  # starting now: a launch waits for it again
            state.notify()

    async def _watch(self, state: MemberState, process: RuntimeProcess) -> int | None:
        """Until the process exits: prove it alive while idle (``Probes``), put it to sleep
        once idle past its ``pause_after``, and leave it when a recycle or a sleep is
        wanted."""
        async with anyio.create_task_group() as tg:
            async def planned_stop_wanted() -> None:
                while True:
                    changed = state.changed()
                    if state.launch_state in _PLANNED:
                        tg.cancel_scope.cancel()  # leave the runtime: its stop ladder runs
                        return
                    await changed.wait()

            tg.start_soon(planned_stop_wanted)
            if state.member.pause_after is not None:
                tg.start_soon(sleep.doze, state, state.member.pause_after)
            with self._probes.watching(state, process, state.epoch, self._is_current):
                exit_code = await process.wait()
            tg.cancel_scope.cancel()
        return process.exit_code if state.launch_state in _PLANNED else exit_code

    async def record_session(self, state: MemberState, session_id: str | None) -> None:
        state.session_id = session_id
        await self._save_session(state.team, state.name, session_id)
        log.info("member_session", team=state.team, member=state.name, session_id=session_id)

    async def _on_ready(self, state: MemberState, process: RuntimeProcess,
                        wanted_session: str | None) -> None:
        state.process, state.pid = process, process.pid
        if wanted_session and process.session_id != wanted_session:
            state.note = (f"runtime session {wanted_session} was lost; started "
                          f"{process.session_id} (the conversation so far is not in it)")
        if process.pid is not None:
            orphans.record(self._home.member_dir(state.team, state.name), process.pid)
        woken = state.waking
        state.move(LaunchState.RUNNING, f"ready, pid {process.pid}")
        state.liveness = "alive"
        if process.session_id != state.session_id:
            await self.record_session(state, process.session_id)
        log.info("member_ready", team=state.team, member=state.name, pid=process.pid,
                 session_id=process.session_id, resumed=process.resumed, woken=woken)
        state.waiters.settled.set()
        state.notify()


async def _tell(observers: list[Observer], state: MemberState, what: str) -> None:
    """Each observer, shielded and bounded; one that fails is logged, never the member's end."""
    with anyio.CancelScope(shield=True):
        for observer in observers:
            try:
                with anyio.move_on_after(_OBSERVER_DEADLINE) as scope:
                    await observer(state)
                if scope.cancelled_caught:
                    log.error("lifecycle_observer_timeout", team=state.team, member=state.name,
                              what=what, epoch=state.epoch, deadline=_OBSERVER_DEADLINE)
            except Exception:  # a bug there must not end the member's task
                log.exception("lifecycle_observer_failed", team=state.team, member=state.name,
                              what=what, epoch=state.epoch)
