"""What every runtime adapter provides, and the process plumbing they share.

A runtime (``Runtime``) opens one member's process (``RuntimeProcess``) as an async context
manager: entering spawns it and waits for its readiness handshake; leaving runs the stop
ladder (EOF → 5 s → SIGTERM to the process group → 10 s → SIGKILL), shielded, and always reaps.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import deque
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol, TypeVar

import anyio
import structlog

from orchestrator.contracts import (
    DocumentText,
    ImagePart,
    LaunchSpec,
    OnSent,
    PreparedPart,
    Runtime,
    RuntimeProcess,
    Spawner,
    TreeUsage,
    Turn,
    process_stopped,
    process_tree,
    redact,
    resolve_executable,
    token_count,
    unwrap_group,
    write_beneath,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
    from pathlib import Path

    from anyio.abc import Process, TaskGroup

__all__ = [
    "BASE_ENV_NAMES",
    "MemberProcess",
    "OnSent",
    "Runtime",
    "RuntimeProcess",
    "Spawner",
    "StderrRing",
    "TreeUsage",
    "drain_stderr",
    "kill_group",
    "member_environ",
    "on_host",
    "owned_process",
    "private_file",
    "process_stopped",
    "process_tree",
    "resolve_executable",
    "spawn_process",
    "stop_process",
    "token_count",
    "unwrap_group",
]

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


# What a member inherits from the daemon's environment: enough for a CLI to run (find its
# interpreter, speak the user's language, reach a proxy) and nothing else — no credentials, no
# TEAMCTL_HOME, no variable some other shell exported. Its ``env`` and ``pass_env`` add to it.
BASE_ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "COLORTERM",
    "NO_COLOR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy",
    "https_proxy", "no_proxy", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
})


def member_environ(own: Mapping[str, str], member_env: Mapping[str, str],
                   *, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """A member's whole environment: the minimal inherited set (BASE_ENV_NAMES and ``LC_*``
    from ``source``, default the daemon's), then the runtime's ``own`` variables, then the
    member's ``env`` (which includes what its ``pass_env`` named)."""
    source = os.environ if source is None else source
    env = {k: v for k, v in source.items() if k in BASE_ENV_NAMES or k.startswith("LC_")}
    env.update(own)
    env.update(member_env)
    return env


def private_file(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` with mode 0600 (replaced atomically, never through a name
    another process made: ``runtimes.beneath``), for settings and prompts that must not go
    on a command line."""
    write_beneath(path.parent, path.name, text.encode("utf-8"))
    return path


async def stop_process(
    process: Process, *, eof_timeout: float = 5.0, term_timeout: float = 10.0,
    kill_timeout: float = 10.0,
) -> int | None:
    """The stop ladder; shielded from cancellation, bounded, and reaps the process — unless
    it outlives SIGKILL by ``kill_timeout`` (stuck in the kernel, D state): then it is logged
    and left, and the exit status is None."""
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
                break
        else:
            _signal_group(process.pid, signal.SIGKILL)
            with anyio.move_on_after(kill_timeout):
                await process.wait()
            if process.returncode is None:
                structlog.get_logger("teamctl.runtime").error(
                    "process_unkillable", pid=process.pid, kill_timeout=kill_timeout)
                return None
        _term_leftovers(process.pid)
    return process.returncode


def _term_leftovers(pgid: int) -> None:
    """SIGTERM what is left of a stopped member's process group — children it started and did
    not stop (stdio MCP servers, background commands), which would otherwise pile up."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


@asynccontextmanager
async def owned_process(start: Callable[[TaskGroup], Awaitable[C]]) -> AsyncIterator[C]:
    """The life of a long-lived member process: ``start`` spawns it and waits for readiness,
    with a task group for its readers; leaving closes it (the stop ladder) and stops the
    readers. Errors come out as themselves, not wrapped in an ExceptionGroup."""
    with unwrap_group():
        async with anyio.create_task_group() as tg:
            process = await start(tg)
            try:
                yield process
            finally:
                await process.close()
                tg.cancel_scope.cancel()


def kill_group(process: Process) -> None:
    """SIGKILL the whole process group at once (for a stuck or protocol-broken member)."""
    _signal_group(process.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with suppress(ProcessLookupError):
            os.kill(pid, sig)


class MemberProcess:
    """What every long-lived member process shares (Claude, OpenCode, Codex app-server): its
    pid and exit status, whether a turn may start on it, its stderr ring, waiting for its exit,
    and killing its process group. The subclass sets ``_exited`` once the process is reaped."""

    def __init__(self, process: Process) -> None:
        self._process = process
        self._ring = StderrRing()
        self._exited = anyio.Event()
        self._doomed = False
        self._session_id: str | None = None
        self._activity: str | None = None  # what the member does now, for ``status``

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def exit_code(self) -> int | None:
        return self._process.returncode

    @property
    def usable(self) -> bool:
        return not self._doomed and not self._exited.is_set()

    @property
    def healthy(self) -> bool:
        return self.usable

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def activity(self) -> str | None:
        return self._activity

    def stderr_tail(self) -> list[str]:
        return self._ring.tail()

    async def wait(self) -> int | None:
        await self._exited.wait()
        return self._process.returncode

    def kill(self) -> None:
        self._doomed = True
        kill_group(self._process)

    def send_probe(self, answered: Callable[[], None]) -> Callable[[], None] | None:
        """A probe that must be awaited (``probe``): none written at once."""
        return None


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


async def on_host(spec: LaunchSpec, turn: Turn) -> Turn:
    """The turn with its image files where the runtime reads them: on a member's SSH host, a
    verified content-addressed copy there; here, the artifact files (``Host.put_file``). A
    derived document's file goes there too, and its text says where (its tools can read it)."""
    parts: list[PreparedPart] = []
    for part in turn.parts:
        if isinstance(part, ImagePart):
            part = replace(part, path=await spec.host.put_file(part))
        elif isinstance(part, DocumentText) and part.original:
            placed = await spec.host.put_file(ImagePart(
                part.mime, 0, 0, part.sha256, part.original, part.path))
            if placed is not None:
                part = replace(part, text=f"{part.text}\n(the file itself, {part.name}, is at "
                               f"{placed}: your tools can read it)")
        parts.append(part)
    return replace(turn, parts=tuple(parts))
