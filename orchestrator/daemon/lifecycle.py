"""One member's life: start its runtime process, wait for readiness, watch it (liveness, a
wanted recycle) until it exits, and start it again by the restart policy — a new epoch each
time. The supervisor runs one of these per member and keeps the roster."""

from __future__ import annotations

import signal
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon import idle_pause, orphans
from orchestrator.daemon.restart_policy import RestartPolicy
from orchestrator.errors import MemberStartFailed

if TYPE_CHECKING:
    from collections.abc import Mapping

    from orchestrator.daemon.launch import LaunchFactory
    from orchestrator.daemon.liveness import Probes
    from orchestrator.daemon.supervisor import MemberState
    from orchestrator.paths import Home
    from orchestrator.ports import Runtime, RuntimeProcess

__all__ = ["Lifecycle", "Observer", "SessionStore", "Sleep"]

log = structlog.get_logger("teamctl.supervisor")

SessionStore = Callable[[str, str, str | None], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]
# told of each launch that came up, and of each that ended (e.g. the board's leases)
Observer = Callable[["MemberState"], Awaitable[None]]
_OBSERVER_DEADLINE = 10.0  # one observer's call, at most


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
                 is_current: Callable[[MemberState, int], bool], probes: Probes) -> None:
        self._home = home
        self._probes = probes
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
                state.launch, state.error = "fatal", f"internal error: {exc!r}"
                log.exception("member_task_crashed", team=state.team, member=state.name)
            finally:
                state.settled.set()
        if scope.cancel_called:
            state.launch = "stopped"
            log.info("member_stopped", team=state.team, member=state.name,
                     exit=(state.last_exit or {}).get("code"))
        if state.liveness == "alive":  # "unresponsive" says why it went
            state.liveness = "dead"
        state.notify()
        state.done.set()

    async def _restart_loop(self, state: MemberState, policy: RestartPolicy) -> None:
        while True:
            exit_code = await self._run_once(state)
            if state.launch == "fatal":
                return
            if state.pause is not None:  # planned: paused until a turn wants it
                await idle_pause.paused(state)
                continue
            if state.recycle is not None:  # planned: no policy, no backoff, not a restart
                log.info("member_recycled", team=state.team, member=state.name,
                         reason=state.recycle, exit=exit_code)
                state.recycle, state.recycles = None, state.recycles + 1
                continue
            decision = policy.on_exit(
                now=self._clock(), exit_code=exit_code,
                uptime=self._clock() - state.started_at,
            )
            log.info("member_restart_decision", team=state.team, member=state.name,
                     epoch=state.epoch, action=decision.action, delay=round(decision.delay, 3),
                     reason=decision.reason)
            if decision.action != "restart":
                state.launch = "fatal" if decision.action == "fatal" else "stopped"
                state.error = state.error or decision.reason
                state.notify()
                return
            state.launch = "backoff"
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
        state.launch, state.error = "starting", None
        state.started_at = self._clock()
        state.notify()
        log.info("member_starting", team=state.team, member=state.name, restarts=state.restarts)
        runtime = self._runtimes[state.config.runtime]
        try:
            spec = await self._launches.spec(state, runtime)
        except MemberStartFailed as exc:
            state.launch, state.error = "fatal", exc.message
            log.error("member_start_failed", team=state.team, member=state.name,
                      code=exc.code, error=exc.message)
            state.settled.set()
            return None
        state.session_id = spec.session_id
        opened: RuntimeProcess | None = None
        try:
            async with runtime.open(spec) as process:
                opened = process
                await self._on_ready(state, process, spec.session_id)
                await _tell(self.on_launch, state, "launch")
                exit_code = await self._watch(state, process)
                stderr_tail, cut_turn = process.stderr_tail(), state.turn
        except anyio.get_cancelled_exc_class():
            if opened is not None:
                state.last_exit = {"code": opened.exit_code, "at": time.time()}
            raise
        except MemberStartFailed as exc:
            state.error = exc.message
            if not exc.retryable:  # e.g. not logged in: a restart cannot fix it
                state.launch = "fatal"
            log.error("member_start_failed", team=state.team, member=state.name,
                      code=exc.code, error=exc.message, stderr_tail=exc.stderr_tail)
            state.settled.set()
            return None
        finally:
            state.process, state.busy, state.pid = None, False, None
            if state.liveness != "unresponsive":  # that says why, until the next one is up
                state.liveness = "dead"
            if state.approver is not None:
                with anyio.CancelScope(shield=True):
                    await state.approver.close("the member process that asked is gone")
            orphans.forget(self._home.member_dir(state.team, state.name))
            if opened is not None and state.pause is None:  # paused: not gone (its tasks)
                await _tell(self.on_exit, state, "exit")
            state.notify()
        state.process_turns = 0
        if state.recycle is not None or state.pause is not None:
            return opened.exit_code if opened is not None else exit_code
        state.last_exit = {"code": exit_code, "at": time.time()}
        state.turn = None
        log.warning("member_exited", team=state.team, member=state.name, exit=exit_code,
                    signal=_signal_name(exit_code), turn=cut_turn, stderr_tail=stderr_tail)
        return exit_code

    async def _watch(self, state: MemberState, process: RuntimeProcess) -> int | None:
        """Until the process exits: prove it alive while idle (``Probes``), and leave it
        when a recycle is wanted."""
        async with anyio.create_task_group() as tg:
            async def recycle_wanted() -> None:
                while True:
                    changed = state.changed()
                    if state.recycle is not None:
                        tg.cancel_scope.cancel()  # leave the runtime: its stop ladder runs
                        return
                    await changed.wait()

            async def pause_wanted(after: float) -> None:
                state.pause = await idle_pause.idle_for(state, after)
                tg.cancel_scope.cancel()  # leave the runtime: its stop ladder runs

            tg.start_soon(recycle_wanted)
            if state.host.pause_after is not None:
                tg.start_soon(pause_wanted, state.host.pause_after)
            with self._probes.watching(state, process, state.epoch, self._is_current):
                exit_code = await process.wait()
            tg.cancel_scope.cancel()
        planned = state.recycle is not None or state.pause is not None
        return process.exit_code if planned else exit_code

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
        state.launch, state.liveness = "running", "alive"
        if process.session_id != state.session_id:
            await self.record_session(state, process.session_id)
        log.info("member_ready", team=state.team, member=state.name, pid=process.pid,
                 session_id=process.session_id, resumed=state.resuming)
        state.resuming = False
        state.settled.set()
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
