"""The adapter kit: what every runtime adapter does the same way, so an adapter is the mapping of
its CLI's protocol and nothing else (docs/runtimes.md, "A new adapter").

- ``TurnWatch``: a turn's idle watchdog — silent for ``idle`` seconds it is stuck; the clock
  stands still while the operator is asked; a stuck turn is interrupted, given ``grace``
  seconds to end, then its process is killed (``RuntimeStuck`` either way).
- ``OperatorBridge``: asks the operator (the watch paused meanwhile) and keeps the answers the
  CLI has not yet confirmed applying.
- ``spawn_member`` and ``starting``: the start guard — a spawn error, the start deadline, and a
  process closed on any failure, each as ``MemberStartFailed``.
- ``retryable_status``: the one rule for which HTTP status a later attempt can pass.
- ``denied`` and ``UsageStop``: a refused tool call as a history note and a log line; the
  ledger's stop of a turn over budget, once.
- ``report_tool``: a tool call the runtime reported, to the daemon's record of them (a child
  span of its turn, docs/telemetry.md).
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog

from orchestrator.contracts import MemberStartFailed, ProtocolError, RuntimeExited, runtime_info
from runtimes.kit.base import Spawner, spawn_process

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from anyio.abc import Process

    from orchestrator.contracts import (
        ApprovalAnswer,
        ApprovalRequest,
        LaunchSpec,
        RuntimeInfo,
        ToolStatus,
    )
    from orchestrator.runtime_table import RuntimeName

__all__ = ["Adapter", "OperatorBridge", "TurnWatch", "UsageStop", "denied", "report_tool",
           "retryable_status",
           "spawn_member", "starting"]

log = structlog.get_logger("teamctl.runtime")

_POLL = 1.0  # how often a waiting turn looks at the clock (its process's exit wakes it: wake)


class Adapter:
    """A runtime adapter's class: its row of the runtime table (``class X(Adapter,
    runtime="claude")``) and the spawner it is built with (tests pass fakes)."""

    info: RuntimeInfo
    name: str
    default_executable: str
    env_var: str

    def __init_subclass__(cls, *, runtime: RuntimeName, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.info = runtime_info(runtime)
        cls.name, cls.default_executable = cls.info.name, cls.info.default_executable
        cls.env_var = cls.info.env_var

    def __init__(self, *, spawner: Spawner = spawn_process) -> None:
        self._spawner = spawner


class TurnWatch:
    """The idle watchdog of one member's turns. ``touch`` on every sign of life; ``wait`` for
    the turn's end; ``stop_turn`` interrupts a stuck one, then kills."""

    def __init__(self, spec: LaunchSpec, *, grace: float | None = None,
                 fields: Mapping[str, str] | None = None) -> None:
        self._spec = spec
        self.idle = spec.turn_idle_timeout
        self.grace = spec.interrupt_grace if grace is None else grace
        self._fields = dict(fields or {})  # more fields for the log lines (the transport)
        self.asking = 0  # questions waiting on the operator: the clock stands still
        self._last = time.monotonic()
        self._waiting: anyio.CancelScope | None = None  # wait()'s current look, for wake()

    def touch(self) -> None:
        self._last = time.monotonic()

    def begin(self) -> None:
        """A turn starts: its silence counts from now, not from the member's last line
        before it (an idle member prints nothing for as long as it is idle)."""
        self.touch()

    def remaining(self) -> float:
        if self.asking:  # the operator may take as long as they like
            self.touch()
        return self._last + self.idle - time.monotonic()

    async def wait(self, event: anyio.Event, *,
                   alive: Callable[[], None] | None = None) -> bool:
        """Until ``event`` (True), or until the turn has been silent for ``idle`` (False).
        ``alive`` raises when the turn cannot end any more (its process exited)."""
        while not event.is_set():
            if alive is not None:
                alive()
            remaining = self.remaining()
            if remaining <= 0:
                return False
            try:
                with anyio.move_on_after(min(remaining, _POLL)) as self._waiting:
                    await event.wait()
            finally:
                self._waiting = None
        return True

    def wake(self) -> None:
        """The process exited: a waiting turn calls ``alive`` now, not at its next look."""
        if self._waiting is not None:
            self._waiting.cancel()

    async def stop_turn(self, done: anyio.Event | None, interrupt: Callable[[], Awaitable[None]],
                        kill: Callable[[], None] | None, why: str | None = "turn_stuck") -> bool:
        """Interrupt the turn; wait ``grace`` for it to end (``done``; None: do not wait);
        else kill the process. Whether the turn ended. Each step is logged as ``why``."""
        self._log(why, "interrupt")
        with anyio.move_on_after(self.grace), suppress(RuntimeExited):
            await interrupt()
            if done is not None:
                await done.wait()
        if done is None or done.is_set():
            return True
        if kill is not None:
            self._log(why, "kill")
            kill()
        return False

    def _log(self, why: str | None, action: str) -> None:
        if why is not None:
            log.warning(why, team=self._spec.team, member=self._spec.member,
                        idle_timeout=self.idle, action=action, **self._fields)


class OperatorBridge:
    """The ``ask`` profile's questions: each goes to the operator (the watch paused while it
    waits), and the answer's approval id is kept until the CLI confirms it applied it."""

    def __init__(self, spec: LaunchSpec, watch: TurnWatch) -> None:
        self._spec = spec
        self._watch = watch
        self._unconfirmed: dict[str, str] = {}  # the CLI's request id -> approval id

    @property
    def asks(self) -> bool:
        return self._spec.approver is not None

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        approver = self._spec.approver
        assert approver is not None
        self._watch.asking += 1
        try:
            return await approver.ask(request)
        finally:
            self._watch.asking -= 1
            self._watch.touch()

    def answered(self, key: str, answer: ApprovalAnswer) -> None:
        """The answer was sent to the CLI under ``key``; confirm it when the CLI says so."""
        self._unconfirmed[key] = answer.request_id

    async def confirm(self, key: str | None = None) -> None:
        """The CLI applied the answer sent under ``key`` (None: every answer sent)."""
        keys = list(self._unconfirmed) if key is None else [key]
        for approval_id in [self._unconfirmed.pop(k) for k in keys if k in self._unconfirmed]:
            if self._spec.approver is not None:
                await self._spec.approver.confirmed(approval_id)


async def spawn_member(spec: LaunchSpec, argv: Sequence[str],
                       env: Mapping[str, str]) -> Process:
    """Spawn the member's process where it runs; an executable that cannot start fails the
    start with the OS's reason."""
    try:
        return await spec.host.spawn(argv, cwd=spec.workdir, env=env)
    except OSError as exc:
        raise MemberStartFailed(spec.member, f"cannot start {argv[0]}: {exc.strerror}") from exc


class _Starting(Protocol):
    async def close(self) -> None: ...

    def stderr_tail(self) -> list[str]: ...


@asynccontextmanager
async def starting(spec: LaunchSpec, process: _Starting, *, what: str = "not ready",
                   failures: Mapping[type[Exception], Callable[[Exception], str]] | None = None,
                   timeout: float | None = -1.0) -> AsyncIterator[None]:
    """The start-up of a spawned ``process`` within ``timeout`` (default
    ``spec.start_timeout``; None: the start-up keeps its own deadlines): past it, or on one of
    ``failures`` (exception type → reason), the process is closed and the start fails
    (``MemberStartFailed`` with its stderr); on anything else it is closed too."""
    reasons = dict(failures or {})
    deadline = spec.start_timeout if timeout == -1.0 else timeout
    try:
        with anyio.fail_after(deadline):
            yield
    except TimeoutError:
        await process.close()
        raise MemberStartFailed(spec.member, f"{what} within {spec.start_timeout:g}s",
                                process.stderr_tail()) from None
    except tuple(reasons) as exc:
        await process.close()
        reason = next(r for kind, r in reasons.items() if isinstance(exc, kind))(exc)
        raise MemberStartFailed(spec.member, reason, process.stderr_tail()) from None
    except BaseException:
        await process.close()
        raise


def rpc_start_failures(rpc_error: type[Exception], raw: Process,
                       who: str) -> dict[type[Exception], Callable[[Exception], str]]:
    """What ends a JSON-RPC runtime's start-up (``starting``'s ``failures``): its own error
    answer, a protocol violation, or its exit (``who`` exited, with the exit status)."""
    return {rpc_error: str, ProtocolError: lambda e: str(getattr(e, "message", e)),
            RuntimeExited: lambda _e: f"{who} exited during start-up (exit {raw.returncode})"}


# A later attempt can pass these: a timeout, a conflict, a rate limit, an overloaded or failing
# server (529: Anthropic's "overloaded"). Every other 4xx is the request's own fault.
_RETRYABLE_4XX = frozenset({408, 409, 429})


def retryable_status(status: int | None, *, unknown: bool = False) -> bool:
    """Whether a failure with this HTTP status is worth another attempt; ``unknown``: the
    answer when no status is known."""
    if status is None:
        return unknown
    return status in _RETRYABLE_4XX or status >= 500


def denied(spec: LaunchSpec, tool: str, target: str = "", message: str = "") -> str:
    """A tool call the member's permissions refused: logged (``permission_denied``) and the
    note its message's history shows."""
    log.warning("permission_denied", team=spec.team, member=spec.member, tool=tool,
                target=target[:300], message=message[:300])
    return (f"permission denied: {tool}" + (f" {target[:200]}" if target else "")
            + (f": {message[:300]}" if message else ""))


def report_tool(spec: LaunchSpec, message_id: str | None, call_id: object, name: object,
                status: ToolStatus, arguments: object = None) -> None:
    """Tell the daemon's record (``spec.tools``) what the runtime said of a tool call of turn
    ``message_id``; nothing without a record, a turn or a call id."""
    if spec.tools is not None and message_id and call_id:
        spec.tools.tool(message_id, str(call_id), str(name or "tool"), status, arguments)


class UsageStop:
    """The ledger's stop of one turn (a budget crossed by this member or another): ``stop``
    runs once, unless the turn is over (a turn that ended first stands)."""

    def __init__(self, spec: LaunchSpec, message_id: str, done: anyio.Event,
                 stop: Callable[[], None], action: str) -> None:
        self._spec, self._message_id, self._done = spec, message_id, done
        self._stop, self._action = stop, action
        self.requested = False
        if spec.meter is not None:
            spec.meter.on_stop(message_id, self.request)

    def request(self) -> None:
        if self.requested or self._done.is_set():
            return
        self.requested = True
        log.warning("turn_over_budget", team=self._spec.team, member=self._spec.member,
                    message_id=self._message_id, action=self._action)
        self._stop()
