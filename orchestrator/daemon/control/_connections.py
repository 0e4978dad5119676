"""The control socket's connections: accepted, capped, bounded in time, and a socket that stays.

Nothing a local client does can take the daemon down or lock the operator out:

- a peer of another uid (SO_PEERCRED) is closed before a byte is read or written and before
  it takes or frees a slot, whatever the socket file's mode says (``peers.PeerRefusals``:
  ``socket_peer_refused``, logged without letting it flood the log);
- at most ``max_connections`` are open at once; at the cap the connection that has waited
  longest for a request is closed to make room (so thousands of idle connections cannot keep
  ``teamctl status`` out), and only when every slot is serving a request is a new one refused
  with a typed ``daemon_busy`` answer;
- each request line must arrive whole within ``idle_timeout`` (a slow or half-written request
  is closed), and is at most ``rpc.REQUEST_LIMIT_BYTES`` (a longer one is read to its end,
  discarded, and answered with a typed ``request_too_large``);
- an ``accept`` that fails (EMFILE: out of file descriptors) is logged and retried with a short
  backoff, never fatal;
- a handler that raises is logged and only that connection ends;
- the socket file is watched: deleted or replaced, it is bound again (the daemon holds the home's
  lock, so nobody else may serve it) — but never in a loop: a socket replaced again within a
  second of its bind is bound after a growing delay (two servers fighting over one name would
  otherwise re-bind hundreds of times a second), and a name that cannot be bound (a directory
  there) is retried with the same backoff, logged once per cause, never the daemon's end once
  it has served.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import stat
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import structlog
from anyio.abc import SocketAttribute, SocketListener
from anyio.streams.buffered import BufferedByteReceiveStream

from orchestrator import rpc
from orchestrator.daemon.control._name_watch import NameWatch
from orchestrator.daemon.control._peers import PeerRefusals
from orchestrator.errors import DaemonBusy, RequestTooLarge

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from anyio.abc import SocketStream, TaskGroup, TaskStatus

__all__ = ["Connection", "ControlSocket"]

log = structlog.get_logger("teamctl.connections")

_DISCARD_LIMIT_BYTES = 64 * 1024 * 1024
_DISCARD_TIMEOUT = 10.0
_BACKLOG = 4096  # queued connections before accept (the kernel caps it at somaxconn)
_ACCEPT_RETRY_FIRST, _ACCEPT_RETRY_MAX = 0.05, 1.0
_REBIND_QUIET = 1.0  # a socket that lasted this long is re-bound at once
_REBIND_FIRST, _REBIND_MAX = 0.1, 30.0


@dataclass(eq=False)
class Connection:
    """One accepted client connection, as the handler sees it."""

    stream: SocketStream
    idle_timeout: float
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    idle_since: float | None = None  # waiting for a request since (monotonic); None: serving
    _reader: BufferedByteReceiveStream = field(init=False)

    def __post_init__(self) -> None:
        self._reader = BufferedByteReceiveStream(self.stream)

    @property
    def raw_socket(self) -> socket.socket:
        return self.stream.extra(SocketAttribute.raw_socket)

    async def receive_line(self) -> bytes | None:
        """The next request line, or None once the client is gone or took too long.
        Raises RequestTooLarge (after discarding the rest of that line)."""
        self.idle_since = time.monotonic()
        try:
            with anyio.move_on_after(self.idle_timeout):
                return await self._reader.receive_until(b"\n", rpc.REQUEST_LIMIT_BYTES)
            log.info("control_connection_timed_out", idle_timeout=self.idle_timeout)
            return None
        except anyio.DelimiterNotFound:
            await self._discard_line()
            raise RequestTooLarge(rpc.REQUEST_LIMIT_BYTES) from None
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError,
                anyio.ClosedResourceError):
            return None
        finally:
            self.idle_since = None

    async def send(self, data: bytes) -> bool:
        """Send an answer; False if the client is gone."""
        try:
            with anyio.fail_after(self.idle_timeout):
                await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, TimeoutError, OSError):
            return False
        return True

    async def _discard_line(self) -> None:
        """Read and drop the rest of an oversized line, so the client finishes writing it and
        can read the answer (bounded in bytes and time)."""
        total = 0
        with anyio.move_on_after(_DISCARD_TIMEOUT), contextlib.suppress(
                anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            while total < _DISCARD_LIMIT_BYTES:
                chunk = await self._reader.receive(1 << 16)
                total += len(chunk)
                if b"\n" in chunk:
                    return


class ControlSocket:
    """Serves ``handler`` on the Unix socket at ``path`` until cancelled."""

    def __init__(self, path: Path, handler: Callable[[Connection], Awaitable[None]], *,
                 max_connections: int = 256, idle_timeout: float = 30.0,
                 watch_interval: float = 2.0, owns_name: bool = False,
                 rebind_delay: float = _REBIND_FIRST) -> None:
        """``owns_name``: the socket's directory is the daemon's alone (a member's socket
        dir), so whatever holds the name — a directory included — is removed to bind it;
        else a directory there is left to the operator (``run`` retries). ``rebind_delay``:
        the first pause before a socket replaced within a second of its bind is bound again
        (doubling up to 30 s)."""
        self.path = path
        self._owns_name = owns_name
        self._handler = handler
        self.max_connections = max_connections
        self._idle_timeout = idle_timeout
        self._watch_interval = watch_interval
        self._rebind_delay = rebind_delay
        self._open: set[Connection] = set()
        self.accept_failures = 0
        self.evicted = 0
        self.refused = 0
        self.binds = 0
        self.peers = PeerRefusals("socket_peer_refused", socket=str(path))
        self._bound = anyio.Event()

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def wait_bound(self, count: int) -> None:
        """Wait until the socket has been bound ``count`` times (1: the first bind)."""
        while self.binds < count:
            await self._bound.wait()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                  ) -> None:
        """Bind, serve, and bind again whenever the socket file is deleted or replaced.
        ``task_status.started()`` once the socket first accepts connections."""
        started = False
        backoff = _Backoff(self.path, self._rebind_delay)
        async with anyio.create_task_group() as connections:
            while True:
                try:
                    listener, identity = await self._bind()
                except OSError as exc:
                    if not started:
                        raise  # the first bind: the caller says why it cannot serve
                    await backoff.failed(exc)
                    continue
                if not started:
                    task_status.started()
                    started = True
                bound = time.monotonic()
                async with listener, anyio.create_task_group() as tg:
                    tg.start_soon(self._accept_loop, listener, connections)
                    await self._until_replaced(identity)
                    tg.cancel_scope.cancel()
                await backoff.replaced(time.monotonic() - bound)

    async def _bind(self) -> tuple[SocketListener, tuple[int, int]]:
        """Bind the name afresh, through a descriptor of its directory (a link in its way is
        never followed): a stale socket, or a file or link renamed over it, is removed (we
        hold the home's lock); a directory there is removed where the name is the daemon's
        alone (``owns_name``: its directory is made too, a link in its place removed), else
        OSError (EISDIR: never the daemon's end, ``run`` retries)."""
        directory = self._directory()
        try:
            self._clear_name(directory)
            raw = _bound_socket(directory, self.path.name)
            try:
                raw.listen(_BACKLOG)
                listener = await SocketListener.from_socket(raw)
            except BaseException:
                raw.close()
                raise
            info = os.stat(self.path.name, dir_fd=directory, follow_symlinks=False)
        finally:
            os.close(directory)
        self.binds += 1
        self._bound.set()
        self._bound = anyio.Event()
        return listener, (info.st_dev, info.st_ino)

    def _directory(self) -> int:
        """A descriptor of the socket's directory: for a name the daemon owns alone, made
        0700 without following a link there (a link or file in its place is removed)."""
        if not self._owns_name:
            return os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        parent = self.path.parent
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISDIR(os.lstat(parent).st_mode):
                log.warning("socket_name_cleared", socket=str(parent), held_by="not a dir")
                os.unlink(parent)
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent, 0o700)
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        os.fchmod(fd, 0o700)
        return fd

    def _clear_name(self, directory: int) -> None:
        name = self.path.name
        try:
            found = os.lstat(name, dir_fd=directory)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(found.st_mode):
            os.unlink(name, dir_fd=directory)
        elif self._owns_name:
            log.warning("socket_name_cleared", socket=str(self.path), held_by="directory")
            shutil.rmtree(name, dir_fd=directory)
        else:
            raise OSError(errno.EISDIR, f"a directory holds the socket's name {self.path}")

    async def _until_replaced(self, identity: tuple[int, int]) -> None:
        """Return once the socket's file is gone or another file holds its name: told by
        the kernel (``NameWatch``), polled every ``watch_interval`` where it cannot be."""
        with NameWatch(self.path, self._watch_interval) as watch:
            while True:  # looked at first: it may have gone before the watch began
                try:
                    info = os.stat(self.path)
                except OSError:
                    log.warning("control_socket_missing", socket=str(self.path))
                    return
                if (info.st_dev, info.st_ino) != identity:
                    log.warning("control_socket_replaced", socket=str(self.path))
                    return
                await watch.touched()

    async def _accept_loop(self, listener: SocketListener, connections: TaskGroup) -> None:
        delay = _ACCEPT_RETRY_FIRST
        while True:
            try:
                stream = await listener.accept()
            except anyio.BrokenResourceError as exc:
                cause = exc.__cause__
                self.accept_failures += 1
                log.warning("control_accept_failed", error=str(cause or exc),
                            errno=getattr(cause, "errno", None), retry_in=delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, _ACCEPT_RETRY_MAX)
                continue
            delay = _ACCEPT_RETRY_FIRST
            connections.start_soon(self._serve, stream)

    async def _serve(self, stream: SocketStream) -> None:
        connection = Connection(stream, self._idle_timeout)
        try:
            if not self.peers.admits(connection.raw_socket):
                return  # another uid: nothing read, nothing answered, no one evicted
            if self._make_room():
                self._open.add(connection)
                with connection.scope:
                    await self._handler(connection)
            else:
                self.refused += 1
                busy = DaemonBusy(self.max_connections)
                log.warning("control_connection_refused", open=len(self._open))
                await connection.send(rpc.error_response(None, rpc.APP_ERROR, busy.message,
                                                         busy.to_wire()))
        except Exception:  # the last line of defence: one connection ends, the daemon stays
            log.exception("control_connection_crashed")
        finally:
            self._open.discard(connection)
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await stream.aclose()

    def _make_room(self) -> bool:
        """True if a new connection may be served: below the cap, or once the longest-idle
        connection has been closed to make room."""
        if len(self._open) < self.max_connections:
            return True
        idle = [c for c in self._open if c.idle_since is not None]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.idle_since or 0.0)
        self._open.discard(oldest)
        oldest.scope.cancel()
        self.evicted += 1
        log.info("control_connection_evicted", open=len(self._open))
        return True


class _Backoff:
    """How a socket is bound again: at once after a quiet while, else after a delay that
    doubles (``first`` → ``_REBIND_MAX``); each cause logged once, then counted."""

    def __init__(self, path: Path, first: float) -> None:
        self._path = path
        self._first = first
        self._delay = first
        self._causes: dict[str, int] = {}

    async def replaced(self, lasted: float) -> None:
        if lasted >= _REBIND_QUIET:
            self._delay = self._first
            self._causes.clear()
            log.warning("control_socket_recreated", socket=str(self._path))
            return
        await self._wait("control_socket_recreated", "replaced within a second of its bind")

    async def failed(self, exc: OSError) -> None:
        await self._wait("control_socket_rebind_failed", exc.strerror or str(exc))

    async def _wait(self, event: str, cause: str) -> None:
        seen = self._causes.get(cause, 0)
        self._causes[cause] = seen + 1
        if seen == 0 or self._delay >= _REBIND_MAX:
            log.warning(event, socket=str(self._path), cause=cause, times=seen + 1,
                        retry_in=round(self._delay, 2))
        await anyio.sleep(self._delay)
        self._delay = min(self._delay * 2, _REBIND_MAX)


def _bound_socket(directory: int, name: str) -> socket.socket:
    """A Unix socket bound at ``name`` in ``directory`` (its path through the descriptor:
    never through a link, and never longer than the kernel's 108 bytes), 0600 from birth —
    the umask is process-wide, so its window holds no await (bound in a worker thread, every
    other task of the loop would make files with it)."""
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        raw.bind(f"/proc/self/fd/{directory}/{name}")
    except OSError:
        raw.close()
        raise
    finally:
        os.umask(old_umask)
    return raw
