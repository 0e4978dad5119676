"""A member process spoken to in JSON lines on its stdio — the transport under Claude's control
protocol, Codex's app-server and ACP, kept apart from each protocol: one locked, deadlined write
with one error map, request ids with pending waiters, and the bounded read loop; and, for the two
JSON-RPC peers (ACP, the app-server), the dispatch of what the peer sends and the probe."""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.contracts import LineTooLong, ProtocolError, RuntimeExited, RuntimeStuck
from runtimes.kit import TurnWatch
from runtimes.kit.base import MemberProcess, drain_stderr, stop_process
from runtimes.kit.framing import decode_line, encode_line, iter_lines

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Mapping

    from anyio.abc import Process, TaskGroup

    from orchestrator.contracts import LaunchSpec

__all__ = ["JsonRpcProcess", "StdioJsonProcess", "Waiter"]

log = structlog.get_logger("teamctl.runtime")


class Waiter:
    """One request's answer, once it came (``on_done``: told when it does)."""

    def __init__(self, on_done: Callable[[], None] | None = None) -> None:
        self.done = anyio.Event()
        self.answer: dict[str, Any] = {}
        self.on_done = on_done


def _stream_writer(stdin: object) -> asyncio.StreamWriter | None:
    """The asyncio stream under anyio's process stdin (the daemon's loop), to write a line
    without an await: anyio's ``send`` yields to the loop after every write, and a hundred
    probes' yields were most of an idle round. None elsewhere (another backend, another
    anyio): the caller awaits the write (a test asserts the daemon's
    loop has it: tests/unit/test_probe_now.py)."""
    writer = getattr(stdin, "_stream", None)
    return writer if isinstance(writer, asyncio.StreamWriter) and not writer.is_closing() \
        else None


class StdioJsonProcess(MemberProcess):
    """The subclass maps the protocol: ``on_message`` for each decoded line, ``on_exit`` once
    the process is reaped (call ``super().on_exit()``)."""

    def __init__(self, process: Process, spec: LaunchSpec, *, write_timeout: float,
                 fields: Mapping[str, str] | None = None) -> None:
        super().__init__(process)
        self._spec = spec
        self.watch = TurnWatch(spec, fields=fields)
        self._write_timeout = write_timeout
        # fast_acquire: an uncontended write does not yield to the loop first (the stream's
        # send yields once after it anyway) — one loop pass less per line written, a probe's
        # or a turn's (bench_scale: idle CPU with 100 members)
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._pending: dict[Any, Waiter] = {}
        self._answering: set[anyio.CancelScope] = set()  # answer()s waiting: the exit ends them
        self._seq = 0
        self._tg: TaskGroup | None = None

    def start_readers(self, tg: TaskGroup) -> None:
        self._tg = tg
        tg.start_soon(self.read_stdout)
        tg.start_soon(drain_stderr, self._process, self._ring)
        tg.start_soon(self._end_group)

    async def _end_group(self) -> None:
        """Once the runtime's own process exits, its process group goes too. A launcher that
        runs the real program as its child on the same stdio (Qwen Code's ``qwen`` runs ``node
        cli.js``) leaves that child holding stdout when the launcher alone dies: no end of
        file, the member silently gone. Ending the group (each member leads its own: base.py
        spawns with a new session) ends the child, so the exit is seen and the member
        restarts."""
        await self._process.wait()
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)  # ESRCH: the group is already gone

    async def close(self) -> None:
        await stop_process(self._process)
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await self._exited.wait()

    def exited(self) -> RuntimeExited:
        """The error of a process that is gone (its exit status and stderr)."""
        return RuntimeExited(self._spec.member, self._process.returncode, self.stderr_tail())

    # -- writing ------------------------------------------------------------------------------

    async def write(self, message: dict[str, Any]) -> None:
        await self.write_line(encode_line(message))

    async def write_line(self, line: bytes) -> None:
        """Write one line within the write deadline: a CLI that stops reading its stdin (the
        pipe stays full) is stuck — killed, so the turn goes back to the queue; a closed pipe
        is an exited process."""
        stdin = self._process.stdin
        assert stdin is not None
        try:
            with anyio.fail_after(self._write_timeout):
                async with self._write_lock:
                    await stdin.send(line)
        except TimeoutError:
            log.warning("runtime_write_stuck", team=self._spec.team, member=self._spec.member,
                        bytes=len(line), write_timeout=self._write_timeout)
            self.kill()
            raise RuntimeStuck(self._spec.member, self._write_timeout) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise self.exited() from exc

    # -- requests -----------------------------------------------------------------------------

    def next_id(self) -> int:
        self._seq += 1
        return self._seq

    @contextmanager
    def pending(self, request_id: Any) -> Iterator[Waiter]:
        """A waiter for the answer to ``request_id`` while the block runs."""
        waiter = self._pending[request_id] = Waiter()
        try:
            yield waiter
        finally:
            self._pending.pop(request_id, None)

    def resolve(self, request_id: Any, answer: dict[str, Any]) -> None:
        waiter = self._pending.get(request_id)
        if waiter is not None:
            waiter.answer = answer
            waiter.done.set()
            if waiter.on_done is not None:
                waiter.on_done()

    def request_now(self, request_id: Any, message: dict[str, Any],
                    answered: Callable[[], None]) -> Callable[[], None] | None:
        """Write the request ``message`` (its id ``request_id``) at once, without awaiting,
        and call ``answered()`` when its answer is read: a liveness round's probe
        (``RuntimeProcess.send_probe``). The callable that forgets it; None when it cannot
        be written at once (a write holds the pipe or waits for room in it, the process is
        going, not the asyncio loop's stream) — the caller awaits ``probe`` instead."""
        writer = _stream_writer(self._process.stdin)
        if writer is None or self._write_lock.locked() or not self.usable \
                or writer.transport.get_write_buffer_size() > 0:
            return None
        line = encode_line(message)
        self._pending[request_id] = Waiter(answered)
        try:
            writer.write(line)
        except (OSError, RuntimeError):  # the pipe is closed: the awaited probe says so
            self._pending.pop(request_id, None)
            return None

        def forget() -> None:
            self._pending.pop(request_id, None)
        return forget

    async def answer(self, waiter: Waiter, timeout: float) -> bool:
        """Whether the answer came within ``timeout``; RuntimeExited if the process exited
        first — seen when it exits (``on_exit`` ends the wait), not at a later look."""
        with anyio.move_on_after(timeout):
            with anyio.CancelScope() as waiting:
                self._answering.add(waiting)
                try:
                    if not self._exited.is_set():
                        await waiter.done.wait()
                finally:
                    self._answering.discard(waiting)
            if not waiter.done.is_set():
                raise self.exited()
        return waiter.done.is_set()

    async def call(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send a JSON-RPC request (``message`` without its id) and return its answer, whole
        (``result`` or ``error``); TimeoutError past ``timeout``, RuntimeExited if the process
        exits first."""
        request_id = self.next_id()
        with self.pending(request_id) as waiter:
            await self.write({**message, "id": request_id})
            if not await self.answer(waiter, timeout):
                raise TimeoutError
        return waiter.answer

    # -- reading ------------------------------------------------------------------------------

    async def read_stdout(self) -> None:
        """Each line (bounded) is a sign of life and one message; a line past the bound kills
        the process; once it has exited and is reaped, ``on_exit``."""
        assert self._process.stdout is not None
        try:
            async for line in iter_lines(self._process.stdout):
                self.watch.touch()
                message = self._decode(line)
                # neither the line nor its message is held while the next one is awaited
                # (a hundred members' last events were ~0.3 MiB of the daemon)
                del line
                if message is not None:
                    await self.on_message(message)
                del message
        except LineTooLong as exc:
            log.error("runtime_protocol_error", team=self._spec.team, member=self._spec.member,
                      code=exc.code, error=exc.message)
            self.kill()
        finally:
            with anyio.CancelScope(shield=True):
                await self._process.wait()
            self.on_exit()

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        try:
            message = decode_line(line)
        except ProtocolError as exc:
            log.warning("runtime_corrupt_line", member=self._spec.member, error=exc.message)
            return None
        if message is None and line.strip():
            log.info("runtime_noise", member=self._spec.member, bytes=len(line))
        return message

    async def on_message(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_exit(self) -> None:
        self._exited.set()
        for waiting in self._answering:
            waiting.cancel()
        self.watch.wake()


class JsonRpcProcess(StdioJsonProcess):
    """A JSON-RPC peer on stdio (an ACP agent, Codex's app-server): an answer resolves the
    request waiting for it, a request of the peer's (a permission, a file) is answered in a
    task of its own (``answer_request``), a notification goes to ``on_notification``."""

    async def on_message(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method is None and isinstance(request_id, int):
            self.resolve(request_id, message)
        elif isinstance(method, str) and request_id is not None and self._tg is not None:
            self._tg.start_soon(self.answer_request, request_id, method, params)
        elif isinstance(method, str):
            self.on_notification(method, params)

    async def answer_request(self, request_id: Any, method: str,
                             params: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        raise NotImplementedError

    async def probe_by(self, ask: Callable[[], Awaitable[object]], timeout: float,
                       answers: tuple[type[Exception], ...]) -> bool:
        """Liveness: ``ask`` (a request no model call answers) within ``timeout``. Its answer,
        or an error answer among ``answers``, proves the process reads and answers."""
        with anyio.move_on_after(timeout):
            try:
                await ask()
            except answers:
                pass  # an error answer is an answer
            except (RuntimeExited, RuntimeStuck, TimeoutError):
                return False
            return self.usable
        return False
