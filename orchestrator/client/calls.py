"""The CLI's side of the control socket: one JSON-RPC call per connection, every wait bounded.

Standard library only (plus ``orchestrator.errors``/``rpc``), so ``teamctl`` starts fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

from orchestrator import protocol, rpc
from orchestrator.errors import (
    ConnectionLost,
    DaemonUnavailable,
    RequestTooLarge,
    TeamctlError,
    error_from_wire,
)
from orchestrator.paths import Home, ensure_private_dir

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from orchestrator.protocol import Method

__all__ = ["call", "daemon_exit", "ensure_daemon", "ping"]

_RESPONSE_LIMIT_BYTES = 256 * 1024 * 1024
_CONNECT_TIMEOUT = 5.0


def call(home: Home, row: Method, params: dict[str, Any], *, timeout: float = 30.0) -> Any:
    """Call the method of the protocol's ``row`` (``protocol.STATUS``) on the daemon; its
    result, or the daemon's error raised as TeamctlError."""
    path, method = str(home.socket), row.name
    try:
        data = rpc.request(1, method, params)
    except UnicodeEncodeError:
        raise TeamctlError("the request holds text that is not valid UTF-8") from None
    if len(data) > rpc.REQUEST_LIMIT_BYTES:
        raise RequestTooLarge(rpc.REQUEST_LIMIT_BYTES, len(data))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(min(_CONNECT_TIMEOUT, timeout))
        try:
            sock.connect(path)
        except FileNotFoundError:
            raise DaemonUnavailable(path, "no socket") from None
        except (TimeoutError, ConnectionRefusedError) as exc:
            raise DaemonUnavailable(path, type(exc).__name__) from None
        sock.settimeout(timeout)
        # the daemon may have answered before it closed (request_too_large): read it anyway
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            sock.sendall(data)
        try:
            response = _read_line(sock, path, method, timeout, params.get("member"))
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise ConnectionLost(path, method, exc.strerror or type(exc).__name__,
                                 member=params.get("member")) from None
    finally:
        sock.close()
    return _unwrap(response)


def _read_line(sock: socket.socket, path: str, method: str, timeout: float,
               member: str | None) -> dict[str, Any]:
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            raise TeamctlError(f"the daemon did not answer within {timeout:g}s") from None
        if not chunk:
            raise ConnectionLost(path, method, "the connection was closed", member=member)
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            break
        if size > _RESPONSE_LIMIT_BYTES:
            raise TeamctlError("the daemon's answer is larger than the client accepts")
    try:
        value = json.loads(b"".join(chunks))
    except ValueError:
        raise TeamctlError("the daemon answered something that is not JSON") from None
    if not isinstance(value, dict):
        raise TeamctlError("the daemon answered something that is not JSON-RPC")
    return value


def _unwrap(response: dict[str, Any]) -> Any:
    error = response.get("error")
    if error is None:
        return response.get("result")
    data = error.get("data")
    if isinstance(data, dict):
        raise error_from_wire(data)
    raise TeamctlError(f"the daemon refused the request: {error.get('message')}")


def ping(home: Home) -> bool:
    try:
        call(home, protocol.PING, {}, timeout=5.0)
    except DaemonUnavailable:
        return False
    return True


@contextlib.contextmanager
def daemon_exit(home: Home) -> Iterator[Callable[[float], bool]]:
    """While the block runs, ``wait(timeout)``: True once the daemon that answers now has
    exited (or when none answered), False past ``timeout``. A daemon told to stop answers
    first and exits after; a ``launch`` in between reached the daemon on its way out and its
    team stopped with it. The process is held (a pidfd, Linux 5.3+) before the block runs,
    so a pid reused later is never waited on; elsewhere its pid is polled."""
    try:
        pid: int | None = int(call(home, protocol.PING, {}, timeout=5.0)["pid"])
    except (DaemonUnavailable, KeyError, TypeError, ValueError):
        pid = None
    if pid is not None and pid <= 1:  # not a daemon's pid (0, -1: a group, all; 1: init)
        pid = None
    pidfd = None
    if pid is not None and hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):  # ESRCH: already gone
            pidfd = os.pidfd_open(pid)

    def wait(timeout: float) -> bool:
        if pid is None:
            return True
        if pidfd is not None:
            import select

            return bool(select.select([pidfd], [], [], timeout)[0])  # readable: it exited
        deadline = time.monotonic() + timeout
        while _alive(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    try:
        yield wait
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ensure_daemon(home: Home, *, timeout: float = 30.0) -> bool:
    """Start a detached daemon unless one answers; True when this call started it.

    Waits for the daemon's "ready" line on a pipe (never a sleep loop), at most ``timeout``."""
    if ping(home):
        return False
    import subprocess  # only here: keeps every other command's start-up lean

    ensure_private_dir(home.root)
    ensure_private_dir(home.logs)
    read_fd, write_fd = os.pipe()
    out_path = home.logs / "daemon.out"
    out = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    start_offset = os.fstat(out).st_size
    env = dict(os.environ, TEAMCTL_HOME=str(home.root))  # the operator's own daemon
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.daemon", "--notify-fd", str(write_fd)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, pass_fds=(write_fd,),
            start_new_session=True, env=env, close_fds=True,
        )
    finally:
        os.close(write_fd)
        os.close(out)
    try:
        if _wait_ready(read_fd, timeout):
            return True
    finally:
        os.close(read_fd)
    code = process.poll()
    detail = f"it exited {code}" if code is not None else f"no ready signal in {timeout:g}s"
    said = _daemon_said(out_path, start_offset)
    raise TeamctlError(
        f"the daemon did not start ({detail})" + (f": {said}" if said else "")
        + f"; see {out_path}"
    )


def _daemon_said(path: os.PathLike[str], offset: int) -> str:
    """The daemon's own last words (what it wrote to daemon.out since ``offset``), redacted."""
    from orchestrator.redaction import redact

    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("teamctl daemon:")]
    return redact(lines[-1].removeprefix("teamctl daemon:").strip()) if lines else ""


def _wait_ready(fd: int, timeout: float) -> bool:
    import select

    deadline = time.monotonic() + timeout
    data = b""
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            return False
        chunk = os.read(fd, 64)
        if not chunk:
            return False
        data += chunk
        if b"ready" in data:
            return True
    return False
