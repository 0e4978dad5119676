"""The in-sandbox end of a member's network (docs/security.md, "The network boundary"): this
file's source runs as ``python3 -I -S -c`` first in a sandbox with ``network = "off" |
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
  passes SIGTERM, SIGINT and SIGHUP on to it, and exits with its status when it ends;
- unless, with ``--hand-over`` (on this machine, without ``--inbound``), the daemon takes its
  listeners: they are sent on the proxy's socket (``TEAMCTL-LISTENERS/1`` and the ports, the
  descriptors with them: orchestrator/daemon/egress/_handover.py checks them) and once the
  proxy answers 200 within ``HAND_OVER_TIMEOUT`` this process *becomes* the runtime
  (``exec``): the proxy accepts on them itself, no relay stays beside the runtime. Any other
  answer is said on stderr and the relay relays itself, as above.

Every listener is bound before the runtime starts (no race with its first request). At most
``MAX_CONNECTIONS`` connections at once; the proxy decides what is allowed and ends idle
tunnels. The runtime starts with SIGPIPE and SIGXFSZ at their defaults (the interpreter ignores
them; an ignored signal would stay ignored in everything the runtime runs).

Why one thread and these modules: one relay runs beside each such member's runtime, so it
loads only what it must: ``_socket``, ``os`` and ``select`` (``_signal``, ``sys`` and ``time``
are the interpreter's own, loaded at its start); no ``socket``, ``subprocess``, ``threading``,
``struct`` or ``typing`` (tests/unit/test_sandbox_relay.py holds the list; docs/dev/
performance.md, "teamctl's own cost per member"). Every socket is non-blocking, waited on by
one ``poll``; each direction of a connection holds at most one chunk (``CHUNK``) the other side
has not taken yet, and its source is not read again until it has (bounded memory); the
runtime's end is seen through the pipe the interpreter writes on a signal (SIGCHLD).
"""

from __future__ import annotations

import _socket
import os
import select
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal  # the same functions (``_signal`` has no stub)
    from collections.abc import Callable
else:
    import _signal

CHUNK = 64 * 1024
MAX_CONNECTIONS = 256
HEAD_LIMIT = 16 * 1024
CONNECT_TIMEOUT = 30.0
HAND_OVER_TIMEOUT = 10.0
_DEFAULTED = (_signal.SIGPIPE, _signal.SIGXFSZ)  # ignored by the interpreter, not the runtime
_IN, _OUT = select.POLLIN, select.POLLOUT
_GONE = select.POLLERR | select.POLLNVAL
_FORWARDED = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
_READ_BUFFER = memoryview(bytearray(CHUNK))  # every read lands here first: no allocation per read
_refused_uids: set[int] = set()  # said once each: another uid cannot fill the stderr ring


def _stream(family: int) -> _socket.socket:
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock


class _Link:
    """One connection: the ``client`` accepted here and its ``upstream``. ``to_client`` and
    ``to_upstream`` hold what one side sent and the other has not taken yet (at most a
    chunk); ``asking``: the proxy's answer to a CONNECT is awaited (``head``: what came of
    it); ``connecting``: the upstream's TCP connect is in progress; ``deadline``: when either
    gives up."""

    def __init__(self, client: _socket.socket, upstream: _socket.socket) -> None:
        self.client, self.upstream = client, upstream
        self.to_client = self.to_upstream = self.head = b""
        self.client_done = self.upstream_done = False  # that side sent its end
        self.asking = self.connecting = self.finishing = False
        self.deadline: float | None = None

    def events(self) -> tuple[int, int]:
        """What to wait for on the client and on the upstream."""
        if self.asking:
            return (0, _IN | (_OUT if self.to_upstream else 0))
        if self.connecting:
            return (0, _OUT)
        if self.finishing:  # the proxy's refusal handed over, what the client sent read to its end
            return (_OUT if self.to_client else 0 if self.client_done else _IN, 0)
        client = (_IN if not self.client_done and not self.to_upstream else 0) \
            | (_OUT if self.to_client else 0)
        upstream = (_IN if not self.upstream_done and not self.to_client else 0) \
            | (_OUT if self.to_upstream else 0)
        return (client, upstream)

    def over(self) -> bool:
        """Both directions ended and delivered (or the refusal delivered and the client's
        end read)."""
        if self.finishing:
            return self.client_done and not self.to_client
        return (self.client_done and self.upstream_done and not self.to_client
                and not self.to_upstream)


class _Relay:
    """The listeners and the connections, waited on by one ``poll``."""

    def __init__(self) -> None:
        self.poller = select.poll()
        self.armed: dict[int, int] = {}
        self.listeners: dict[int, tuple[_socket.socket, Callable[[_socket.socket],
                                                                  _Link | None]]] = {}
        self.links: dict[int, _Link] = {}  # by both of its sockets' descriptors
        self.count = 0

    def listen(self, listener: _socket.socket,
               open_upstream: Callable[[_socket.socket], _Link | None]) -> None:
        self.listeners[listener.fileno()] = (listener, open_upstream)
        self._arm(listener.fileno(), _IN)

    def watch(self, fd: int) -> None:
        self._arm(fd, _IN)

    def _arm(self, fd: int, events: int) -> None:
        if events == self.armed.get(fd, 0):
            return
        if events:
            self.poller.register(fd, events)
            self.armed[fd] = events
        else:  # not even a hang-up is waited for: a closed peer cannot spin the loop
            self.poller.unregister(fd)
            del self.armed[fd]

    def _rearm(self, link: _Link) -> None:
        client, upstream = link.events()
        self._arm(link.client.fileno(), client)
        self._arm(link.upstream.fileno(), upstream)

    def add(self, link: _Link) -> None:
        self.count += 1
        self.links[link.client.fileno()] = self.links[link.upstream.fileno()] = link
        self._rearm(link)

    def close(self, link: _Link) -> None:
        for sock in (link.client, link.upstream):
            fd = sock.fileno()
            if fd >= 0:
                self._arm(fd, 0)
                self.links.pop(fd, None)
                sock.close()
        self.count -= 1

    def wait(self, now: float) -> list[tuple[int, int]]:
        """The ready descriptors, waiting until the nearest deadline at most."""
        deadlines = [link.deadline for link in self.links.values() if link.deadline is not None]
        timeout = None if not deadlines else max(0, int((min(deadlines) - now) * 1000) + 1)
        return self.poller.poll(timeout)

    def expire(self, now: float) -> None:
        """Close each link whose CONNECT answer or TCP connect did not come in time."""
        late = {id(link): link for link in self.links.values()
                if link.deadline is not None and link.deadline <= now}
        for link in late.values():
            self.close(link)

    def ready(self, fd: int, revents: int) -> None:
        entry = self.listeners.get(fd)
        if entry is not None:
            self._accept(*entry)
            return
        link = self.links.get(fd)
        if link is None:
            return
        try:
            if revents & _GONE and not revents & (_IN | _OUT):
                raise OSError("the connection failed")
            self._step(link, fd == link.client.fileno(), revents)
        except OSError:
            self.close(link)
            return
        if link.over():
            self.close(link)
        else:
            self._rearm(link)

    def _accept(self, listener: _socket.socket,
                open_upstream: Callable[[_socket.socket], _Link | None]) -> None:
        while True:
            try:
                client = _accepted(listener)
            except OSError:  # none waits, out of descriptors, reset before it was taken
                return
            if self.count >= MAX_CONNECTIONS:
                client.close()
                continue
            try:
                if listener.family == _socket.AF_INET:  # no Nagle delay
                    client.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                link = open_upstream(client)
            except OSError:
                link = None
            if link is None:
                client.close()
            else:
                self.add(link)

    def _step(self, link: _Link, client_side: bool, revents: int) -> None:
        if link.connecting:
            error = link.upstream.getsockopt(_socket.SOL_SOCKET, _socket.SO_ERROR)
            if error:
                raise OSError(error, os.strerror(error))
            link.connecting, link.deadline = False, None
            return
        if link.asking:
            _ask(link, revents)
            return
        mine, other = (link.client, link.upstream) if client_side else (link.upstream, link.client)
        if revents & _OUT:
            _flush(link, client_side, mine)
        if link.finishing:
            if revents & (_IN | select.POLLHUP) and not link.to_client:
                link.client_done = not mine.recv_into(_READ_BUFFER)  # dropped
            return
        if revents & (_IN | select.POLLHUP) and not _pending_to(link, not client_side):
            done = link.client_done if client_side else link.upstream_done
            if not done:
                _forward(link, client_side, mine, other)


def _accepted(listener: _socket.socket) -> _socket.socket:
    """The next connection on ``listener``, non-blocking (``socket.accept``'s own C method,
    which has no stub)."""
    fd, _ = listener._accept()  # type: ignore[attr-defined]
    client = _socket.socket(listener.family, _socket.SOCK_STREAM, 0, fd)
    client.setblocking(False)
    return client


def _forward(link: _Link, client_side: bool, source: _socket.socket,
             sink: _socket.socket) -> None:
    """A chunk read from ``source`` and sent on to ``sink``: what ``sink`` does not take now
    waits in ``link`` (and ``source`` is not read again until it is taken); its end noted."""
    try:
        size = source.recv_into(_READ_BUFFER)
    except BlockingIOError:  # a wake-up with nothing to read: waited for again
        return
    if not size:
        _ended(link, client_side)
        return
    try:
        sent = sink.send(_READ_BUFFER[:size])
    except BlockingIOError:
        sent = 0
    if sent < size:
        _queue(link, not client_side, bytes(_READ_BUFFER[sent:size]))


def _pending_to(link: _Link, client_side: bool) -> bytes:
    return link.to_client if client_side else link.to_upstream


def _queue(link: _Link, client_side: bool, data: bytes) -> None:
    if client_side:
        link.to_client += data
    else:
        link.to_upstream += data


def _flush(link: _Link, client_side: bool, sock: _socket.socket) -> None:
    """Send what waits for ``sock`` (as much as it takes now); its write side is shut once the
    other side has ended and all of it is delivered."""
    pending = _pending_to(link, client_side)
    if pending:
        try:
            sent = sock.send(pending)
        except BlockingIOError:
            sent = 0
        if client_side:
            link.to_client = pending[sent:]
        else:
            link.to_upstream = pending[sent:]
    other_done = link.upstream_done if client_side else link.client_done
    if other_done and not _pending_to(link, client_side):
        _shut_write(sock)


def _shut_write(sock: _socket.socket) -> None:
    """Send ``sock``'s end (a second time, or to a peer gone, changes nothing)."""
    try:
        sock.shutdown(_socket.SHUT_WR)
    except OSError:
        return


def _ended(link: _Link, client_side: bool) -> None:
    """``client_side``'s end came: the other side's write side is shut once it has it all."""
    if client_side:
        link.client_done = True
        _flush(link, False, link.upstream)
    else:
        link.upstream_done = True
        _flush(link, True, link.client)


def _ask(link: _Link, revents: int) -> None:
    """The CONNECT sent and the proxy's answer read: on 200 the link is joined (what came
    after the answer goes to the client), else the answer is the client's (the proxy's typed
    refusal, for an HTTP client to show) and the link ends."""
    if revents & _OUT and link.to_upstream:
        link.to_upstream = link.to_upstream[link.upstream.send(link.to_upstream):]
    if not revents & (_IN | select.POLLHUP):
        return
    try:
        data = link.upstream.recv(4096)
    except BlockingIOError:
        return
    if not data or len(link.head) > HEAD_LIMIT:
        raise OSError("the proxy did not answer the CONNECT")
    link.head += data
    if b"\r\n\r\n" not in link.head:
        return
    answer, _, rest = link.head.partition(b"\r\n\r\n")
    link.asking, link.deadline = False, None
    if answer.split(b" ", 2)[1:2] == [b"200"]:
        link.to_client, link.head = rest, b""
    else:  # closed once the client has it and has ended (a close with its request unread
        # would reset the connection, the answer lost), within the deadline
        link.to_client, link.head, link.finishing = link.head, b"", True
        link.upstream_done, link.deadline = True, time.monotonic() + CONNECT_TIMEOUT


def _to_proxy(path: str, port: int | None) -> Callable[[_socket.socket], _Link | None]:
    """Outbound: the proxy's socket (for a mapped ``port``, asked for it by CONNECT first)."""
    def open_upstream(client: _socket.socket) -> _Link | None:
        upstream = _stream(_socket.AF_UNIX)
        try:
            upstream.connect(path)  # a Unix socket: at once, or refused (its backlog full)
        except OSError:
            upstream.close()
            return None
        link = _Link(client, upstream)
        if port is not None:
            link.asking, link.deadline = True, time.monotonic() + CONNECT_TIMEOUT
            link.to_upstream = (f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n"
                                f"Host: 127.0.0.1:{port}\r\n\r\n").encode()
        return link
    return open_upstream


def _peer_uid(client: _socket.socket) -> int:
    creds = client.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # pid, uid, gid
    return int.from_bytes(creds[4:8], sys.byteorder, signed=True)


def _to_server(port: int) -> Callable[[_socket.socket], _Link | None]:
    """Inbound: ``127.0.0.1:port`` in the sandbox, for a peer of this uid only (the daemon's,
    as this user namespace maps it; any other uid is closed before a byte is read)."""
    def open_upstream(client: _socket.socket) -> _Link | None:
        uid = _peer_uid(client)
        if uid != os.getuid():
            if uid not in _refused_uids:
                _refused_uids.add(uid)
                sys.stderr.write(f"sandbox_relay: refused a connection from uid {uid} "
                                 "(only the daemon's uid is served)\n")
                sys.stderr.flush()
            return None
        upstream = _stream(_socket.AF_INET)
        upstream.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        link = _Link(client, upstream)
        error = upstream.connect_ex(("127.0.0.1", port))
        if error == 0:
            return link
        if error in (_EINPROGRESS, _EAGAIN):
            link.connecting, link.deadline = True, time.monotonic() + CONNECT_TIMEOUT
            return link
        upstream.close()
        return None
    return open_upstream


_EINPROGRESS, _EAGAIN = 115, 11  # Linux's errno values (no ``errno`` module to load)


def _listen(port: int) -> _socket.socket:
    listener = _stream(_socket.AF_INET)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    return listener


def _listen_unix(path: str) -> _socket.socket:
    """A 0600 socket at ``path`` (a previous run's, left by a killed sandbox, replaced)."""
    _unlink(path)
    listener = _stream(_socket.AF_UNIX)
    mask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(mask)
    os.chmod(path, 0o600)
    listener.listen(128)
    return listener


def _unlink(path: str) -> None:
    """Remove ``path`` if it is there (no ``contextlib`` to load for a ``suppress``)."""
    try:
        os.unlink(path)
    except OSError:
        return


class _Options:
    def __init__(self) -> None:
        self.socket = ""
        self.maps: list[int] = []
        self.inbound: tuple[int, str] | None = None
        self.hand_over = False
        self.argv: list[str] = []


def _parse(args: list[str]) -> _Options:
    found = _Options()
    while args and args[0] != "--":
        if args[0] == "--hand-over":
            found.hand_over, args = True, args[1:]
            continue
        if len(args) < 2:
            break
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
                         "[--inbound PORT:PATH] [--hand-over] -- ARGV...")
    found.argv = args[1:]
    return found


def _exit_code(status: int) -> int:
    """A shell's: the child's status, or 128 + the signal that ended it."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def main(args: list[str]) -> int:
    options = _parse(args)
    path, argv = options.socket, options.argv
    relay = _Relay()
    try:
        proxy = _listen(0)
        mapped = [(_listen(port), port) for port in options.maps]
    except OSError as exc:
        sys.stderr.write(f"sandbox_relay: cannot listen: {exc}\n")
        return 70
    url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    # this process is the member's own first process inside the sandbox, started with the
    # member's minimal environment (built by the adapter, never the daemon's): the runtime
    # inherits it, with the proxy variables only this process knows added
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        os.environ[name] = url
    for name in ("NO_PROXY", "no_proxy"):  # the sandbox's own loopback: its mapped ports too
        os.environ[name] = "localhost,127.0.0.1,::1"
    if options.hand_over and options.inbound is None:
        why = _hand_over(path, [proxy, *(listener for listener, _ in mapped)])
        if why is None:
            return _become(argv, [proxy, *(listener for listener, _ in mapped)])
        sys.stderr.write(f"sandbox_relay: the daemon did not take the listeners ({why}): "
                         "relayed here\n")
    relay.listen(proxy, _to_proxy(path, None))
    for listener, port in mapped:
        relay.listen(listener, _to_proxy(path, port))
    if options.inbound is not None:
        try:
            relay.listen(_listen_unix(options.inbound[1]), _to_server(options.inbound[0]))
        except OSError as exc:
            sys.stderr.write(f"sandbox_relay: cannot listen: {exc}\n")
            return 70
    wake, woken = os.pipe()  # the interpreter writes a byte to ``woken`` on each signal
    os.set_blocking(woken, False)
    _signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
    _signal.signal(_signal.SIGCHLD, lambda _signum, _frame: None)  # wakes the poll
    # forwarding is in place before the runtime exists: a stop that arrives while it is being
    # spawned is kept and passed on once it is (else it ended this process alone, the
    # runtime left running without it)
    spawned: list[int] = []
    early: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if spawned:
            os.kill(spawned[0], signum)
        else:
            early.append(signum)

    for number in _FORWARDED:
        _signal.signal(number, forward)
    try:
        child = os.posix_spawnp(argv[0], argv, os.environ, setsigdef=_DEFAULTED)
    except OSError as exc:
        sys.stderr.write(f"sandbox_relay: cannot start {argv[0]}: {exc}\n")
        return 127
    spawned.append(child)
    for signum in early:
        os.kill(child, signum)
    relay.watch(wake)
    status = _serve(relay, child, wake)
    if options.inbound is not None:  # the server is gone: so is its door
        _unlink(options.inbound[1])
    return _exit_code(status)


def _hand_over(path: str, listeners: list[_socket.socket]) -> str | None:
    """``listeners`` sent to the proxy at ``path`` with their ports; None once it answered
    200, else why not."""
    ports = " ".join(str(listener.getsockname()[1]) for listener in listeners)
    fds = b"".join(listener.fileno().to_bytes(4, sys.byteorder) for listener in listeners)
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    answer = b""
    try:
        conn.settimeout(HAND_OVER_TIMEOUT)
        conn.connect(path)
        conn.sendmsg([f"TEAMCTL-LISTENERS/1 {ports}\r\n\r\n".encode()],
                     [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        while b"\r\n\r\n" not in answer and len(answer) <= HEAD_LIMIT:
            data = conn.recv(4096)
            if not data:
                break
            answer += data
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    finally:
        conn.close()
    if answer.split(b" ", 2)[1:2] == [b"200"]:
        return None
    said = answer.partition(b"\r\n\r\n")[2].strip() or answer.partition(b"\r\n")[0]
    return said.decode("utf-8", "replace") or "no answer"


def _become(argv: list[str], listeners: list[_socket.socket]) -> int:
    """This process replaced by the runtime (the daemon has the listeners); 127 if it cannot
    be started."""
    for listener in listeners:
        listener.close()
    for number in _DEFAULTED:
        _signal.signal(number, _signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"sandbox_relay: cannot start {argv[0]}: {exc}\n")
    return 127


def _serve(relay: _Relay, child: int, wake: int) -> int:
    """Relay until the child ends; its wait status."""
    while True:
        ready = relay.wait(time.monotonic())
        for fd, revents in ready:
            if fd == wake:
                os.read(wake, 512)
                done, status = os.waitpid(child, os.WNOHANG)
                if done == child:
                    return status
            else:
                relay.ready(fd, revents)
        relay.expire(time.monotonic())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
