"""The in-sandbox end of a member's network (docs/security.md, "The network boundary"): this
file's source runs as ``python3 -I -c`` first in a sandbox with ``network = "off" |
"allowlist"`` (standard library only, any python3 >= 3.8; nothing of teamctl is imported or
installed there), and starts the runtime.

The sandbox's network namespace is empty but for its own loopback, so nothing in it reaches a
TCP port outside. The daemon's egress proxy for this member listens on a Unix socket bound into
the sandbox (``--socket``). This relay

- listens on ``127.0.0.1:<a free port>`` and joins each connection to that socket: the proxy
  port, given to the runtime as ``HTTPS_PROXY``/``HTTP_PROXY`` (and lower-case);
- for each ``--map PORT``, listens on ``127.0.0.1:PORT`` too and opens each connection as
  ``CONNECT 127.0.0.1:PORT`` on the proxy (a provider API on the operator's loopback — a test's
  fake API — is then reached at the same URL inside, whatever the CLI does with proxies);
- sets ``NO_PROXY`` to the loopback names (the sandbox's own services and mapped ports);
- with ``--inbound PORT:PATH``, the other way: listens on the Unix socket ``PATH`` (0600, in a
  0700 directory bound in from outside) and joins each connection from the daemon's uid to
  ``127.0.0.1:PORT`` in the sandbox (a peer of another uid, by SO_PEERCRED, is closed before a
  byte is read, and the first refusal of each uid is said on stderr, which the daemon keeps
  as the runtime's) — the server a runtime runs there (``opencode serve``),
  which the daemon cannot reach over TCP across the namespace; the socket is removed when the
  runtime ends (and by the daemon after a stop that kills the sandbox);
- then starts ``argv`` (after ``--``) as its child with that environment and the same stdio,
  passes SIGTERM, SIGINT and SIGHUP on to it, and exits with its status when it ends.

Every listener is bound before the runtime starts (no race with its first request). A
connection's two directions are copied by two threads in chunks of 64 KiB; at most 256
connections at once; the proxy decides what is allowed and ends idle tunnels.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

CHUNK = 64 * 1024
MAX_CONNECTIONS = 256
HEAD_LIMIT = 16 * 1024
CONNECT_TIMEOUT = 30.0
_slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
_refused_uids: set[int] = set()  # said once each: another uid cannot fill the stderr ring


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _join(client: socket.socket, upstream: socket.socket) -> None:
    other = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    other.start()
    _pump(client, upstream)
    other.join()


def _connect_through(upstream: socket.socket, client: socket.socket, port: int) -> bool:
    """Ask the proxy for ``127.0.0.1:port``; on a refusal, hand its answer to the client."""
    upstream.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
                     .encode())
    upstream.settimeout(CONNECT_TIMEOUT)
    head = b""
    while b"\r\n\r\n" not in head:
        data = upstream.recv(4096)
        if not data or len(head) > HEAD_LIMIT:
            return False
        head += data
    upstream.settimeout(None)
    answer, _, rest = head.partition(b"\r\n\r\n")
    if answer.split(b" ", 2)[1:2] != [b"200"]:
        client.sendall(head)  # the proxy's typed refusal, for an HTTP client to show
        return False
    if rest:
        client.sendall(rest)
    return True


def _to_proxy(path: str, port: int | None) -> Callable[[socket.socket], socket.socket | None]:
    """Outbound: the proxy's socket (for a mapped ``port``, asked for it by CONNECT first)."""
    def open_upstream(client: socket.socket) -> socket.socket | None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
            if port is None or _connect_through(upstream, client, port):
                return upstream
        except OSError:
            pass
        upstream.close()
        return None
    return open_upstream


def _peer_uid(client: socket.socket) -> int:
    creds = client.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _to_server(port: int) -> Callable[[socket.socket], socket.socket | None]:
    """Inbound: ``127.0.0.1:port`` in the sandbox, for a peer of this uid only (the daemon's,
    as this user namespace maps it; any other uid is closed before a byte is read)."""
    def open_upstream(client: socket.socket) -> socket.socket | None:
        uid = _peer_uid(client)
        if uid != os.getuid():
            if uid not in _refused_uids:
                _refused_uids.add(uid)
                sys.stderr.write(f"sandbox_relay: refused a connection from uid {uid} "
                                 "(only the daemon's uid is served)\n")
                sys.stderr.flush()
            return None
        upstream = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT)
        upstream.settimeout(None)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return upstream
    return open_upstream


def _serve(client: socket.socket,
           open_upstream: Callable[[socket.socket], socket.socket | None]) -> None:
    upstream = None
    try:
        upstream = open_upstream(client)
        if upstream is not None:
            _join(client, upstream)
    except OSError:
        pass
    finally:
        if upstream is not None:
            upstream.close()
        client.close()
        _slots.release()


def _accept(listener: socket.socket,
            open_upstream: Callable[[socket.socket], socket.socket | None]) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            continue
        if not _slots.acquire(blocking=False):
            client.close()
            continue
        if listener.family == socket.AF_INET:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle delay
        threading.Thread(target=_serve, args=(client, open_upstream), daemon=True).start()


def _listen(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    return listener


def _listen_unix(path: str) -> socket.socket:
    """A 0600 socket at ``path`` (a previous run's, left by a killed sandbox, replaced)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(mask)
    os.chmod(path, 0o600)
    listener.listen(128)
    return listener


class _Options:
    def __init__(self) -> None:
        self.socket = ""
        self.maps: list[int] = []
        self.inbound: tuple[int, str] | None = None
        self.argv: list[str] = []


def _parse(args: list[str]) -> _Options:
    found = _Options()
    while args and args[0] != "--":
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--socket":
            found.socket = value
        elif flag == "--map":
            found.maps.append(int(value))
        elif flag == "--inbound":
            port, _, path = value.partition(":")
            found.inbound = (int(port), path)
        else:
            raise SystemExit(f"sandbox_relay: unknown option {flag}")
    if not found.socket or len(args) < 2:
        raise SystemExit("usage: sandbox_relay --socket PATH [--map PORT]... "
                         "[--inbound PORT:PATH] -- ARGV...")
    found.argv = args[1:]
    return found


def main(args: list[str]) -> int:
    options = _parse(args)
    path, argv = options.socket, options.argv
    try:
        proxy = _listen(0)
        listeners = [(proxy, _to_proxy(path, None)),
                     *((_listen(port), _to_proxy(path, port)) for port in options.maps)]
        if options.inbound is not None:
            listeners.append((_listen_unix(options.inbound[1]), _to_server(options.inbound[0])))
    except OSError as exc:
        sys.stderr.write(f"sandbox_relay: cannot listen: {exc}\n")
        return 70
    for listener, open_upstream in listeners:
        threading.Thread(target=_accept, args=(listener, open_upstream), daemon=True).start()
    url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    # this process is the member's own first process inside the sandbox, started with the
    # member's minimal environment (built by the adapter, never the daemon's): the runtime
    # inherits it, with the proxy variables only this process knows added
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        os.environ[name] = url
    for name in ("NO_PROXY", "no_proxy"):  # the sandbox's own loopback: its mapped ports too
        os.environ[name] = "localhost,127.0.0.1,::1"
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        sys.stderr.write(f"sandbox_relay: cannot start {argv[0]}: {exc}\n")
        return 127
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda signum, _frame: child.send_signal(signum))
    code = child.wait()
    if options.inbound is not None:  # the server is gone: so is its door
        with contextlib.suppress(OSError):
            os.unlink(options.inbound[1])
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
