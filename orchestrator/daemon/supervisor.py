"""The supervisor: one task per member that starts its runtime process, waits for readiness,
watches liveness, restarts it by policy, and stops it with the stop ladder.

It owns three state axes (DESIGN §3) — launch, liveness, readiness — and never reads delivery
state. The mailbox borrows a ready process through ``turn_slot``, which is what makes a member
``busy``.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import structlog

from orchestrator.contracts import LaunchSpec, McpServer, RemoteHost
from orchestrator.daemon import orphans
from orchestrator.daemon.approvals import Approvals, MemberApprover, parse_rule
from orchestrator.daemon.restart_policy import RestartPolicy
from orchestrator.errors import MemberStartFailed, NotFound, TeamctlError
from orchestrator.paths import Home, ensure_private_dir
from orchestrator.wire import LastExit, Launch, Liveness, MemberStatus, Readiness
from runtimes.base import (
    Runtime,
    RuntimeProcess,
    process_stopped,
    process_tree,
    resolve_executable,
)

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from orchestrator.config import Login, MemberConfig, Permissions, TeamConfig
    from orchestrator.daemon.ledger import Ledger

__all__ = ["MemberState", "Supervisor"]


def _signal_name(exit_code: int | None) -> str | None:
    if exit_code is None or exit_code >= 0:
        return None
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return None

log = structlog.get_logger("teamctl.supervisor")

SessionStore = Callable[[str, str, str | None], Awaitable[None]]
SessionLoad = Callable[[str, str], Awaitable[str | None]]
VisionLookup = Callable[[str, str | None, bool | None], bool | None]
Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")
Claim = Callable[[], Awaitable[tuple[str, T] | None]]
HostFactory = Callable[["TeamConfig", "MemberConfig"], RemoteHost]
# what ``teamctl mcp`` needs on a member's host (standard library only), and how it starts
_MCP_MODULES = ("__init__.py", "errors.py", "rpc.py", "paths.py", "redaction.py",
                "client/__init__.py", "client/calls.py", "client/mcp_server.py")
_MCP_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "from orchestrator.client.mcp_server import serve; sys.exit(serve())")


# A member's process tree is measured after each turn from a scan of /proc at most this old:
# under a 100-member fan-out a fresh scan per turn was half the daemon's time (issue 26).
_PROCESS_TABLE_AGE = 2.0


@dataclass(eq=False)
class MemberState:
    """One member as the supervisor sees it."""

    team: str
    config: MemberConfig
    workdir: str
    login: Login = "operator"
    permissions: Permissions = "edit"
    launch: Launch = "pending"
    liveness: Liveness = "unknown"
    busy: bool = False
    pid: int | None = None
    restarts: int = 0
    # its launch number: +1 at each start of its process (restart, recycle, teamctl restart);
    # what a turn or a probe of an older epoch reports is ignored (``Supervisor._is_current``)
    epoch: int = 0
    probing: bool = False  # a liveness probe is out: no turn is claimed until it answers
    last_exit: dict[str, Any] | None = None
    session_id: str | None = None
    error: str | None = None
    note: str | None = None
    turn: str | None = None  # the message id of the turn in flight (for incident reports)
    turns_started: int = 0
    process_turns: int = 0  # turns on the current process, for ``recycle_turns``
    recycle: str | None = None  # why the current process is being recycled
    recycle_after_turn: str | None = None  # a recycle asked for while a turn was in flight
    recycles: int = 0
    token: str | None = None  # this launch's MCP token: acts as this member only
    host: RemoteHost | None = None  # the SSH host it runs on (None: this machine)
    allow: list[str] = field(default_factory=list)  # the "ask" profile's pre-approved rules
    approver: MemberApprover | None = None  # this launch's, for the "ask" profile
    on_change: Callable[[], None] | None = None  # the live view's change feed
    process: RuntimeProcess | None = None
    started_at: float = 0.0
    settled: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope | None = None
    _changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def readiness(self) -> Readiness:
        if self.process is None or not self.process.usable or self.recycle is not None:
            return "not_ready"
        return "busy" if self.busy else "ready"

    def changed(self) -> anyio.Event:
        return self._changed

    def notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
        if self.on_change is not None:
            self.on_change()

    @property
    def live(self) -> Liveness:
        """Liveness now: the process's own evidence (its pid, or e.g. heartbeats) decides;
        ``unresponsive`` (a probe went unanswered) stays until a new process is up."""
        if self.liveness != "unresponsive" and self.process is not None \
                and not self.process.healthy:
            return "dead"
        return self.liveness

    def snapshot(self, queued: int = 0) -> MemberStatus:
        process = self.process
        last = self.last_exit
        activity = process.activity if process is not None else None
        if self.approver is not None and self.approver.waiting_on is not None:
            activity = f"waiting for approval {self.approver.waiting_on}"
        return MemberStatus(
            name=self.name, host=None if self.host is None else self.host.name,
            runtime=self.config.runtime, model=self.config.model,
            pid=process.pid if process is not None else self.pid, launch=self.launch,
            liveness=self.live, activity=activity,
            readiness=self.readiness, restarts=self.restarts, recycles=self.recycles,
            epoch=self.epoch,
            session_id=self.session_id,
            last_exit=None if last is None else LastExit(code=last["code"], at=last["at"]),
            error=self.error, note=self.note, queued=queued,
            turn=self.turn if self.busy else None)


class Supervisor:
    """Starts, watches, restarts and stops the members of every running team."""

    def __init__(
        self,
        home: Home,
        runtimes: Mapping[str, Runtime],
        tg: TaskGroup,
        *,
        load_session: SessionLoad,
        save_session: SessionStore,
        vision: VisionLookup = lambda runtime, model, override: override,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = anyio.sleep,
        approvals: Approvals | None = None,
        on_change: Callable[[], None] | None = None,
        ledger: Ledger | None = None,
        hosts: HostFactory | None = None,
    ) -> None:
        """``clock`` and ``sleep`` drive the restart policy's window and backoff (a test
        passes a manual clock whose sleep advances it); ``hosts`` gives a member on another
        machine its SSH host."""
        self._hosts = hosts
        self._sleep = sleep
        self._ledger = ledger
        self._approvals = approvals
        self._on_change = on_change
        self._vision = vision
        self._home = home
        self._runtimes = runtimes
        self._tg = tg
        self._load_session = load_session
        self._save_session = save_session
        self._clock = clock
        self._teams: dict[str, list[MemberState]] = {}

    # -- queries ------------------------------------------------------------------------------

    def by_token(self, token: str) -> MemberState | None:
        """The member whose current launch holds ``token`` (an old launch's token: None)."""
        for states in self._teams.values():
            for state in states:
                if state.token is not None and secrets.compare_digest(state.token, token):
                    return state
        return None

    def members(self, team: str) -> list[MemberState]:
        return list(self._teams.get(team, []))

    def member(self, team: str, name: str) -> MemberState:
        for state in self._teams.get(team, []):
            if state.name == name:
                return state
        raise NotFound("member", name, [m.name for m in self._teams.get(team, [])])

    # -- lifecycle ----------------------------------------------------------------------------

    def start_team(self, team: TeamConfig, workdirs: Mapping[str, Path] | None = None
                   ) -> list[MemberState]:
        """Start every member (in file order) in its workdir (``workdirs``: those in a
        worktree); returns at once."""
        workdirs = workdirs or {}
        states = [MemberState(team.name, m, self._workdir(team, m, workdirs),
                              login=team.member_login(m),
                              permissions=team.member_permissions(m),
                              allow=team.member_allow(m),
                              host=None if m.host is None or self._hosts is None
                              else self._hosts(team, m))
                  for m in team.members]
        self._teams[team.name] = states
        for state in states:
            self._spawn(state)
        return states

    @staticmethod
    def _workdir(team: TeamConfig, member: MemberConfig, workdirs: Mapping[str, Path]) -> str:
        if member.host is not None:  # a path on its host; "~": the remote home
            return team.remote_workdir(member) or "~"
        return str(workdirs.get(member.name) or team.member_workdir(member))

    async def wait_settled(self, team: str, timeout: float) -> None:
        """Wait until each member of ``team`` is ready or has failed its first start."""
        with anyio.move_on_after(timeout):
            for state in self.members(team):
                await state.settled.wait()

    async def wait_settled_member(self, state: MemberState, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            await state.settled.wait()

    async def stop_team(self, team: str) -> None:
        """Stop members in reverse start order, each with the stop ladder."""
        for state in reversed(self._teams.get(team, [])):
            await self._stop_member(state)
        for host in {id(s.host): s.host for s in self._teams.get(team, []) if s.host}.values():
            await host.close()  # its ControlMaster: nothing of ours stays on the host
        self._teams.pop(team, None)

    async def restart_member(self, team: str, name: str) -> MemberState:
        """Stop the member if it runs, clear its restart history (and ``fatal``), start it."""
        old = self.member(team, name)
        await self._stop_member(old)
        fresh = MemberState(team, old.config, old.workdir, old.login, old.permissions,
                            restarts=old.restarts + 1, allow=old.allow, epoch=old.epoch,
                            last_exit=old.last_exit, host=old.host)
        members = self._teams[team]
        members[members.index(old)] = fresh
        old.notify()
        self._spawn(fresh)
        return fresh

    @asynccontextmanager
    async def turn_slot(self, team: str, name: str, claim: Claim[T]
                        ) -> AsyncIterator[tuple[RuntimeProcess, T] | None]:
        """Wait until the member is ready, ``claim`` its next turn (its label — the message id,
        kept for the incident report if the process dies in it — and what to deliver), then
        mark it busy and lend its process for that one turn; None when there was nothing to
        claim. The member only reads ``busy`` once a turn was claimed: an idle member whose
        queue looks for work (after every ready and every turn) stays ``ready``.

        Waits without a deadline (messages wait in the journal while a member is down, or
        while a liveness probe is out: a frozen process is never handed a turn the probe is
        about to prove lost); cancelling the wait is safe. One caller per member (its
        mailbox queue). The claim carries the process's epoch (bound to every event logged
        during the turn); the turn's end is applied only if that epoch is still current.
        """
        while True:
            state = self.member(team, name)
            changed = state.changed()
            if state.process is not None and state.process.usable and not state.busy \
                    and state.recycle is None and not state.probing:
                break
            await changed.wait()
        process, epoch = state.process, state.epoch
        claimed = await claim()  # not busy yet: an idle member reads "ready" while it claims
        if claimed is None:
            yield None
            return
        message_id, work = claimed
        state.turn = message_id
        state.busy = True
        state.turns_started += 1
        state.notify()
        try:
            with structlog.contextvars.bound_contextvars(epoch=epoch):
                yield process, work
        finally:
            if self._is_current(state, epoch):
                self._turn_ended(state, process)
                if process.session_id != state.session_id:  # e.g. Codex's first thread.started
                    with anyio.CancelScope(shield=True):
                        await self._record_session(state, process.session_id)
            else:  # its process was replaced meanwhile: nothing of it reaches the new one
                log.warning("stale_event_ignored", team=team, member=name, what="turn_end",
                            epoch=epoch, current=self.member(team, name).epoch,
                            message_id=message_id, session_id=process.session_id)

    def _is_current(self, state: MemberState, epoch: int) -> bool:
        """Whether ``epoch`` is the launch ``state`` runs now, and ``state`` the member's."""
        return state.epoch == epoch and any(
            s is state for s in self._teams.get(state.team, ()))

    @staticmethod
    def _turn_ended(state: MemberState, process: RuntimeProcess) -> None:
        state.busy = False
        state.process_turns += 1
        if process.usable:  # a dead process keeps its cut turn for the incident report
            state.turn = None
            state.recycle = recycle_reason(state.config, process.pid, state.process_turns,
                                           table_age=_PROCESS_TABLE_AGE) \
                or state.recycle_after_turn
            state.recycle_after_turn = None
        state.notify()

    def recycle_member(self, team: str, name: str, reason: str) -> None:
        """Restart the member's process as hygiene (not a crash): now if it is idle, after
        its turn if one is in flight (e.g. its budget changed: Claude's backstop is an
        argument of the process)."""
        state = self.member(team, name)
        if state.process is None or not state.process.usable:
            return
        if state.busy:
            state.recycle_after_turn = reason
        else:
            state.recycle = reason
        state.notify()

    # -- the member task ----------------------------------------------------------------------

    def _spawn(self, state: MemberState) -> None:
        state.on_change = self._on_change
        self._tg.start_soon(self._run_member, state, name=f"member {state.team}/{state.name}")

    async def _stop_member(self, state: MemberState) -> None:
        state.launch = "stopping" if state.process else state.launch
        state.notify()
        if state.scope is not None:
            state.scope.cancel()
        await state.done.wait()

    async def _run_member(self, state: MemberState) -> None:
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
            spec = await self._launch_spec(state, runtime)
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
            state.notify()
        state.process_turns = 0
        if state.recycle is not None:
            return opened.exit_code if opened is not None else exit_code
        state.last_exit = {"code": exit_code, "at": time.time()}
        state.turn = None
        log.warning("member_exited", team=state.team, member=state.name, exit=exit_code,
                    signal=_signal_name(exit_code), turn=cut_turn, stderr_tail=stderr_tail)
        return exit_code

    async def _watch(self, state: MemberState, process: RuntimeProcess) -> int | None:
        """Until the process exits: prove it alive while idle (``_probe_loop``), and leave it
        when a recycle is wanted."""
        async with anyio.create_task_group() as tg:
            async def recycle_wanted() -> None:
                while True:
                    changed = state.changed()
                    if state.recycle is not None:
                        tg.cancel_scope.cancel()  # leave the runtime: its stop ladder runs
                        return
                    await changed.wait()

            tg.start_soon(self._probe_loop, state, process, state.epoch)
            tg.start_soon(recycle_wanted)
            exit_code = await process.wait()
            tg.cancel_scope.cancel()
        return exit_code if state.recycle is None else process.exit_code

    async def _probe_loop(self, state: MemberState, process: RuntimeProcess,
                          epoch: int) -> None:
        """Every ``liveness_interval``, an idle member proves it is alive: its runtime's
        cheapest real channel (Claude's ``mcp_status`` control request, the app-server's
        ``thread/read``, OpenCode's ``GET /session/status``) and, on an SSH host, the master
        (``ssh -O check``) answer within ``liveness_deadline``. One that does not (frozen,
        SIGSTOPped, deadlocked, a wedged master) is ``unresponsive``: killed, so the restart
        policy brings it back; its queue waits and goes to the new process. A busy member
        is not probed (its turn's idle watchdog covers it)."""
        interval, deadline = state.config.liveness_interval, state.config.liveness_deadline
        while True:
            await anyio.sleep(interval)
            if state.busy or not process.usable:
                continue
            turns = state.turns_started
            state.probing = True
            try:
                answered = await self._prove(state, process, deadline)
            finally:
                state.probing = False
                state.notify()
            if answered or state.busy or state.turns_started != turns:
                continue
            if not self._is_current(state, epoch):
                log.warning("stale_event_ignored", team=state.team, member=state.name,
                            what="probe_unanswered", epoch=epoch, current=state.epoch)
                return
            state.liveness = "unresponsive"
            state.notify()
            log.warning("member_unresponsive", team=state.team, member=state.name,
                        pid=process.pid, deadline=deadline, interval=interval,
                        stopped=process_stopped(process.pid))
            process.kill()
            return

    async def _prove(self, state: MemberState, process: RuntimeProcess,
                     deadline: float) -> bool:
        """One probe within ``deadline``; an answer past half of it is logged (late), and
        so is the late answer that still came in time (recovered)."""
        started = time.monotonic()
        late = anyio.Event()

        async def warn_late() -> None:
            await anyio.sleep(deadline / 2)
            late.set()
            log.warning("member_probe_late", team=state.team, member=state.name,
                        pid=process.pid, waited=round(deadline / 2, 3), deadline=deadline)

        answered = False
        with anyio.move_on_after(deadline):
            async with anyio.create_task_group() as tg:
                tg.start_soon(warn_late)
                answered = await _answers(process, state.host, deadline)
                tg.cancel_scope.cancel()
        if answered and late.is_set():
            log.info("member_probe_recovered", team=state.team, member=state.name,
                     pid=process.pid, seconds=round(time.monotonic() - started, 3))
        return answered

    async def _launch_spec(self, state: MemberState, runtime: Runtime) -> LaunchSpec:
        config = state.config
        if state.host is not None:  # found on its host (host_runtime_missing if not)
            executable = config.command or runtime.default_executable
        else:
            executable = resolve_executable(
                state.name, config.command, env_var=runtime.env_var,
                default=runtime.default_executable,
            )
        if state.host is None and not await anyio.Path(state.workdir).is_dir():
            raise MemberStartFailed(state.name, f"its workdir {state.workdir} is not a "
                                    "directory (create it, or fix workdir in the team file)")
        try:
            state_dir = ensure_private_dir(self._home.member_dir(state.team, state.name))
        except OSError as exc:
            raise MemberStartFailed(state.name, f"cannot create its private directory: "
                                    f"{exc.strerror}") from exc
        inherited = {k: os.environ[k] for k in config.pass_env if k in os.environ}
        state.token = secrets.token_urlsafe(24)  # a new launch: earlier tokens stop working
        return LaunchSpec(
            team=state.team, member=state.name, executable=executable, model=config.model,
            prompt=config.prompt, workdir=Path(state.workdir),
            state_dir=state_dir, args=tuple(config.args), env={**inherited, **config.env},
            config=dict(config.config),
            session_id=await self._load_session(state.team, state.name),
            start_timeout=config.start_timeout, turn_idle_timeout=config.turn_idle_timeout,
            image_input=self._vision(config.runtime, config.model, config.vision),
            login=state.login, permissions=state.permissions,
            mcp=None if not config.messaging else self._mcp(state) if state.host is None
            else self._remote_mcp(state, state_dir),
            transport=config.transport, approver=self._approver(state),
            meter=None if self._ledger is None else await self._ledger.meter(
                state.team, state.name, config.runtime, config.model),
            max_budget_usd=None if self._ledger is None or config.runtime != "claude"
            else self._ledger.backstop_usd(state.team, state.name),
            host=state.host,
        )

    def _approver(self, state: MemberState) -> MemberApprover | None:
        """The ``ask`` profile's channel to the operator, for this launch only."""
        if state.permissions != "ask" or self._approvals is None:
            state.approver = None
            return None
        state.approver = self._approvals.approver(
            state.team, state.name, state.config.runtime,
            allow=[parse_rule(rule) for rule in state.allow],
            current_message=lambda: state.turn,
            workdir=None if state.host is not None else state.workdir)  # path rules' root
        return state.approver

    def _mcp(self, state: MemberState) -> McpServer:
        """``teamctl mcp`` with this launch's token (it acts as this member only)."""
        assert state.token is not None
        env = {"TEAMCTL_MEMBER_TOKEN": state.token, "TEAMCTL_MCP_HOME": str(self._home.root)}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return McpServer((sys.executable, "-m", "orchestrator", "mcp"), env)

    def _remote_mcp(self, state: MemberState, state_dir: Path) -> McpServer:
        """``teamctl mcp`` on the member's host: its standard-library modules shipped in the
        member's private dir (mirrored there), the daemon's socket forwarded to a new path
        for this launch; the token acts as this member only, as here."""
        assert state.token is not None and state.host is not None
        shipped = state_dir / "py"
        package = Path(__file__).resolve().parents[1]
        for module in _MCP_MODULES:
            target = shipped / "orchestrator" / module
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            target.write_text((package / module).read_text(encoding="utf-8"), encoding="utf-8")
        forwarded = state_dir / f"mcp-{secrets.token_hex(4)}"
        state.host.forward_socket(str(self._home.socket), str(forwarded / "teamctl.sock"))
        return McpServer(("python3", "-c", _MCP_BOOT, str(shipped)),
                         {"TEAMCTL_MEMBER_TOKEN": state.token,
                          "TEAMCTL_MCP_HOME": str(forwarded)})

    async def _record_session(self, state: MemberState, session_id: str | None) -> None:
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
            await self._record_session(state, process.session_id)
        log.info("member_ready", team=state.team, member=state.name, pid=process.pid,
                 session_id=process.session_id)
        state.settled.set()
        state.notify()


async def _answers(process: RuntimeProcess, host: RemoteHost | None, deadline: float) -> bool:
    """The runtime answered its probe, and the host's master too (an SSH member)."""
    try:
        return await process.probe(deadline) and (
            host is None or await host.master_answers(deadline))
    except TeamctlError as exc:  # a runtime's probe should say False; never end the watch
        log.warning("member_probe_failed", code=exc.code, error=exc.message)
        return False


def recycle_reason(config: MemberConfig, pid: int | None, turns: int, *,
                   table_age: float = 0.0) -> str | None:
    """Why a long-lived member process should be recycled now (hygiene, not a crash), or
    None: ``recycle_turns`` turns served, or it and its descendants above ``recycle_rss_mb``
    or ``recycle_children`` (a runtime with no process between turns: turns only).
    ``table_age``: how old a shared scan of /proc may be (one scan serves every member)."""
    if config.recycle_turns and turns >= config.recycle_turns:
        return f"{turns} turns (recycle_turns = {config.recycle_turns})"
    if pid is None or not (config.recycle_rss_mb or config.recycle_children):
        return None
    tree = process_tree(pid, max_age=table_age)
    if tree is None:
        return None
    rss_mb = tree.rss_bytes / 2**20
    if config.recycle_rss_mb and rss_mb > config.recycle_rss_mb:
        return f"{rss_mb:.0f} MiB resident (recycle_rss_mb = {config.recycle_rss_mb})"
    if config.recycle_children and tree.children > config.recycle_children:
        return (f"{tree.children} child processes (recycle_children = "
                f"{config.recycle_children})")
    return None
