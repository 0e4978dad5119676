"""What every runtime adapter provides, and the process plumbing they share.

A runtime (``Runtime``) opens one member's process (``RuntimeProcess``) as an async context
manager: entering spawns it and waits for its readiness handshake; leaving runs the stop
ladder (EOF → 5 s → SIGTERM to the process group → 10 s → SIGKILL), shielded, and always reaps.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from typing import TYPE_CHECKING, Protocol, TypeVar

import anyio

from orchestrator.contracts import (
    Capabilities,
    ExecutableNotFound,
    LaunchSpec,
    Turn,
    TurnResult,
    redact,
)

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process, TaskGroup

__all__ = [
    "OnSent",
    "Runtime",
    "RuntimeProcess",
    "Spawner",
    "StderrRing",
    "drain_stderr",
    "kill_group",
    "owned_process",
    "resolve_executable",
    "spawn_process",
    "stop_process",
    "unwrapped_errors",
]

OnSent = Callable[[], Awaitable[None]]


class RuntimeProcess(Protocol):
    """A running member process, ready for turns (one at a time)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def exit_code(self) -> int | None:
        """The exit status once the process has exited (negative: killed by that signal)."""
        ...

    @property
    def usable(self) -> bool:
        """False once the process has exited or is being killed: no turn may start on it."""
        ...

    @property
    def healthy(self) -> bool:
        """Liveness evidence beyond the pid (e.g. OpenCode's event stream heartbeats)."""
        ...

    @property
    def activity(self) -> str | None:
        """What the runtime says it is doing now, for status (e.g. "retrying (attempt 2)")."""
        ...

    def stderr_tail(self) -> list[str]: ...

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        """Deliver ``turn``; call ``on_sent`` once the transport accepted it; return at the
        runtime's end-of-turn event. Raises RuntimeExited, RuntimeStuck or TurnFailed."""
        ...

    async def wait(self) -> int | None:
        """Wait until the process has exited; its exit status (negative: killed by signal)."""
        ...


class Runtime(Protocol):
    name: str
    default_executable: str
    env_var: str
    capabilities: Capabilities

    def open(self, spec: LaunchSpec) -> AbstractAsyncContextManager[RuntimeProcess]: ...


class Spawner(Protocol):
    async def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
    ) -> Process: ...


async def spawn_process(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Process:
    """Start ``argv`` in its own process group with all three pipes (never a shell)."""
    return await anyio.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
    )


def resolve_executable(
    member: str, command: str | None, *, env_var: str, default: str
) -> str:
    """The member's ``command``, else ``$env_var``, else ``default`` on PATH; absolute."""
    wanted = command or os.environ.get(env_var) or default
    found = shutil.which(wanted)
    if found is None:
        raise ExecutableNotFound(member, wanted, env_var)
    return os.path.abspath(found)


async def stop_process(
    process: Process, *, eof_timeout: float = 5.0, term_timeout: float = 10.0
) -> int | None:
    """The stop ladder; shielded from cancellation, bounded, and always reaps the process."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None and process.stdin is not None:
            with suppress(anyio.BrokenResourceError, OSError):
                await process.stdin.aclose()
        for signum, grace in ((None, eof_timeout), (signal.SIGTERM, term_timeout)):
            if signum is not None:
                _signal_group(process.pid, signum)
            with anyio.move_on_after(grace):
                await process.wait()
            if process.returncode is not None:
                return process.returncode
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()
    return process.returncode


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


@asynccontextmanager
async def owned_process(start: Callable[[TaskGroup], Awaitable[C]]) -> AsyncIterator[C]:
    """The life of a long-lived member process: ``start`` spawns it and waits for readiness,
    with a task group for its readers; leaving closes it (the stop ladder) and stops the
    readers. Errors come out as themselves, not wrapped in an ExceptionGroup."""
    with unwrapped_errors():
        async with anyio.create_task_group() as tg:
            process = await start(tg)
            try:
                yield process
            finally:
                await process.close()
                tg.cancel_scope.cancel()


@contextmanager
def unwrapped_errors() -> Iterator[None]:
    """Re-raise a task group's lone exception as itself, so callers catch their typed errors
    (MemberStartFailed, ...) rather than an ExceptionGroup around them."""
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from group


def kill_group(process: Process) -> None:
    """SIGKILL the whole process group at once (for a stuck or protocol-broken member)."""
    _signal_group(process.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with suppress(ProcessLookupError):
            os.kill(pid, sig)


class StderrRing:
    """The last ``max_lines`` lines a process wrote on stderr, each capped and redacted."""

    def __init__(self, *, max_lines: int = 50, max_line_chars: int = 2000) -> None:
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._partial = b""
        self._max_line_chars = max_line_chars

    def feed(self, chunk: bytes) -> None:
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        for raw in complete:
            self._add(raw)
        if len(self._partial) > self._max_line_chars * 4:
            self._add(self._partial)
            self._partial = b""

    def flush(self) -> None:
        if self._partial:
            self._add(self._partial)
            self._partial = b""

    def tail(self, count: int = 20) -> list[str]:
        return list(self._lines)[-count:]

    def _add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if line:
            self._lines.append(redact(line[: self._max_line_chars]))


async def drain_stderr(process: Process, ring: StderrRing) -> None:
    """Feed the process's stderr into ``ring`` until EOF."""
    if process.stderr is None:
        return
    try:
        async for chunk in process.stderr:
            ring.feed(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    ring.flush()
