"""A sandboxed member's egress proxy: an HTTP CONNECT proxy in the daemon's loop, on a Unix
socket only that member's sandbox has (docs/security.md, "The network boundary").

One proxy per member with ``network = "off" | "allowlist"``. Its socket is 0600 in a 0700
directory and bound into the member's sandbox, where the relay (``runtimes/hosts/sandbox/relay.py``)
turns the CLI's TCP connections to ``127.0.0.1:PORT`` into connections to it; a peer of another
uid is refused before anything is read or answered, even a "busy" (``egress_peer_refused``,
peers.PeerRefusals). On this machine the relay hands its listeners over instead and becomes the
runtime (``_handover``: the head ``TEAMCTL-LISTENERS/1``, checked there; answered 200): the
proxy then accepts on them itself — on the proxy port as on its socket, on a mapped port as a
CONNECT to ``127.0.0.1:PORT`` (its refusal answered on that connection) — no process stays in
the sandbox to relay. Each hand-over's listeners are served as long as the process that handed
them over lives (the relay become the runtime, or a one-shot command the member's sandbox runs:
a pidfd of the socket's peer, watched) and closed when it ends or the proxy stops; at most
``handed_sets`` at once. Per connection:

- the request head, at most ``head_bytes`` within ``head_timeout``: ``CONNECT host:port`` (a
  tunnel: TLS end to end, the proxy sees no header or body of the member's), or a plain-HTTP
  request in absolute form (``GET http://host:port/...``, forwarded once with
  ``Connection: close``); anything else is answered 400/405/431 and closed;
- the policy (``_policy.EgressPolicy``) decides; a refused target is answered 403 and
  logged as ``egress_denied`` (team, member, host, port, reason — never a header or a body);
- the name is resolved once within ``connect_timeout`` and an address the policy passes is
  connected (502 when none answers, 504 past the deadline);
- then bytes both ways in chunks of at most ``chunk`` bytes (each waits for the other side to
  take the last: bounded memory), until both sides end or neither moves for ``idle_timeout``.

At most ``max_connections`` at once (more are answered 503 and closed). Nothing a member sends
stops the proxy or the daemon: each connection's failure ends that connection only.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.daemon.control import PeerRefusals, peer_pid
from orchestrator.daemon.egress._handover import HANDOVER, MAX_LISTENERS, Handed, take
from orchestrator.daemon.egress._policy import ip_literal, parse_target, split_host_port
from orchestrator.errors import EgressRefused

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from pathlib import Path

    from anyio.abc import TaskGroup, TaskStatus

    from orchestrator.daemon.egress._policy import EgressPolicy, IpAddress, Target

__all__ = ["EgressCounts", "EgressLimits", "EgressProxy"]

log = structlog.get_logger("teamctl.egress")

_REASONS = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed",
            408: "Request Timeout", 431: "Request Header Fields Too Large",
            502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
_HOP_HEADERS = (b"connection", b"proxy-connection", b"proxy-authorization", b"keep-alive")


@dataclass(frozen=True)
class EgressLimits:
    head_bytes: int = 16 * 1024
    head_timeout: float = 10.0
    connect_timeout: float = 10.0
    idle_timeout: float = 300.0
    max_connections: int = 128
    chunk: int = 64 * 1024
    handed_sets: int = 16  # hand-overs served at once (a sandbox each: the runtime, checks)


@dataclass
class EgressCounts:
    """What one member's proxy did since it started (status shows them)."""

    allowed: int = 0
    denied: int = 0
    refused: int = 0  # malformed, over a limit, unreachable: not a policy denial
    open: int = 0


@dataclass
class _Request:
    target: Target
    connect: bool
    head: bytes = b""  # plain HTTP: the head to send upstream
    rest: bytes = b""  # bytes the client sent after its head


@dataclass
class _Clock:
    idle: float
    last: float = field(default_factory=time.monotonic)

    def touch(self) -> None:
        self.last = time.monotonic()

    def remaining(self) -> float:
        return self.last + self.idle - time.monotonic()


def _refusal(status: int, code: str, message: str) -> bytes:
    body = f"teamctl egress proxy: {code}: {message}\n".encode()
    return (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\nX-Teamctl-Error: {code}\r\n"
            "\r\n").encode() + body


def _bad(message: str) -> EgressRefused:
    return EgressRefused("egress_bad_request", 400, message)


def _target(authority: str, default_port: int | None) -> Target:
    found = split_host_port(authority, default_port)
    target = None if found is None else parse_target(*found)
    if target is None:
        raise _bad("the request's target is not a host:port")
    return target


def _plain_head(method: bytes, uri: str, version: bytes,
                lines: list[bytes]) -> tuple[Target, bytes]:
    """A plain-HTTP request in absolute form: its target and the head to send upstream (in
    origin form, hop-by-hop headers dropped, ``Connection: close``)."""
    if not uri.startswith("http://"):
        raise _bad("only CONNECT, or plain HTTP in absolute form (http://host/...)")
    authority, slash, path = uri[len("http://"):].partition("/")
    if "@" in authority:
        raise _bad("credentials in the request's URL")
    target = _target(authority, 80)
    kept = [line for line in lines
            if line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]
    head = b"\r\n".join([method + b" " + (slash + path).encode() + b" " + version, *kept,
                         b"Connection: close", b"", b""])
    return target, head


def parse_head(head: bytes) -> _Request:
    """The request line and headers of one proxy request (``head`` ends at the blank line)."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise _bad("the request head is not ASCII") from None
    lines = text.split("\r\n")[:-2]
    if not lines:
        raise _bad("an empty request")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _bad("not an HTTP/1.x request line")
    method, uri, version = parts
    if method == "CONNECT":
        return _Request(_target(uri, None), connect=True)
    if not method.isalpha() or not method.isupper():
        raise EgressRefused("egress_bad_method", 405, "not an HTTP method")
    target, upstream = _plain_head(method.encode(), uri, version.encode(),
                                   [line.encode() for line in lines[1:]])
    return _Request(target, connect=False, head=upstream)


class _Raw:
    """A non-blocking socket as a byte stream, waited on with ``anyio.wait_readable`` and
    ``wait_writable`` (anyio's own Unix stream sets a future twice when a pending receive is
    cancelled as its socket turns readable: an error in the loop's log, seen at every stop)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock

    async def receive(self, limit: int) -> bytes:
        while True:
            try:
                data = self.sock.recv(limit)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def receive_fds(self, limit: int, max_fds: int) -> tuple[bytes, list[int]]:
        """``receive``, with the descriptors that came with the bytes (a Unix socket's; past
        ``max_fds`` the kernel closes them)."""
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, limit, max_fds)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            if not data:
                for fd in fds:
                    os.close(fd)
                raise anyio.EndOfStream
            return data, fds

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)

    def shut(self, how: int = socket.SHUT_RDWR) -> None:
        """End the stream (``how``: a direction); a receive pending on it returns its end."""
        with suppress(OSError):
            self.sock.shutdown(how)


async def _connect(address: IpAddress, port: int) -> _Raw:
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a relay adds no Nagle delay
    stream = _Raw(sock)
    try:
        error = sock.connect_ex((str(address), port))
        if error == errno.EINPROGRESS:
            await anyio.wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise OSError(error, os.strerror(error))
    except BaseException:
        sock.close()
        raise
    return stream


class EgressProxy:
    """One member's proxy on ``path`` (its parent a private directory the caller made)."""

    def __init__(self, team: str, member: str, policy: EgressPolicy, path: Path, *,
                 limits: EgressLimits | None = None) -> None:
        self.team, self.member, self.policy, self.path = team, member, policy, path
        self.limits = limits or EgressLimits()
        self.counts = EgressCounts()
        self.peers = PeerRefusals("egress_peer_refused", team=team, member=member)
        self._listener: socket.socket | None = None
        self._tg: TaskGroup | None = None  # serve's, while it runs
        self._handed = 0  # hand-overs served now

    def bind(self) -> None:
        """Listen on ``path`` (0600) now, before the member that connects to it starts."""
        with suppress(FileNotFoundError):
            self.path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            os.chmod(self.path, 0o600)
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        listener.setblocking(False)
        self._listener = listener

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled (bound first if ``bind`` was not called); the socket file
        is removed at the end."""
        if self._listener is None:
            self.bind()
        assert self._listener is not None
        listener = self._listener
        try:
            task_status.started()
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self._accept(listener, tg, self._connection)
        finally:
            self._tg = None
            listener.close()
            with suppress(FileNotFoundError):
                self.path.unlink()

    async def _accept(self, listener: socket.socket, tg: TaskGroup,
                      serve: Callable[[socket.socket], Coroutine[Any, Any, None]]) -> None:
        """Each connection on ``listener`` served by ``serve`` in ``tg``, until cancelled."""
        while True:
            try:
                client, _ = listener.accept()
            except BlockingIOError:
                await anyio.wait_readable(listener)
                continue
            except OSError as exc:  # out of descriptors: the next accept may pass
                log.warning("egress_accept_failed", team=self.team, member=self.member,
                            error=str(exc))
                await anyio.sleep(0.1)
                continue
            tg.start_soon(serve, client)

    async def _connection(self, sock: socket.socket) -> None:
        """One connection on the proxy's Unix socket: its peer's uid checked first."""
        with sock:
            if not self.peers.admits(sock):
                return  # not the daemon's uid: nothing is read or answered
            await self._counted(sock, lambda client: self._serve_one(client, handover=True))

    async def _counted(self, sock: socket.socket,
                       serve: Callable[[_Raw], Coroutine[Any, Any, None]]) -> None:
        """``sock`` served by ``serve``, counted as an open connection — or told the proxy is
        busy."""
        client = _Raw(sock)
        if self.counts.open >= self.limits.max_connections:
            await self._answer(client, EgressRefused(
                "egress_busy", 503, f"{self.limits.max_connections} connections are open "
                "(the limit); try again", retryable=True))
            return
        self.counts.open += 1
        try:
            await serve(client)
        finally:
            self.counts.open -= 1

    async def _serve_one(self, client: _Raw, *, handover: bool = False) -> None:
        """A request read and served; ``handover``: it may be the relay's listeners."""
        try:
            head, rest, fds = await self._read_head(client, with_fds=handover)
            if handover and head.startswith(HANDOVER):
                await self._take(client, head, fds)
                return
            for fd in fds:  # nothing but a hand-over comes with descriptors
                os.close(fd)
            request = parse_head(head + b"\r\n\r\n")
            request.rest = rest
            upstream = await self._open(request.target)
        except EgressRefused as refusal:
            await self._answer(client, refusal)
            return
        with upstream.sock:
            self.counts.allowed += 1
            await self._tunnel(client, upstream, request)

    async def _read_head(self, client: _Raw, *,
                         with_fds: bool = False) -> tuple[bytes, bytes, list[int]]:
        """The request's head (to its blank line, without it), what came after it, and the
        descriptors that came with its first bytes (``with_fds``: a Unix socket's)."""
        buffer, fds = b"", list[int]()
        with anyio.move_on_after(self.limits.head_timeout):
            while b"\r\n\r\n" not in buffer:
                if len(buffer) > self.limits.head_bytes:
                    raise EgressRefused("egress_head_too_large", 431, "the request head is over "
                                        f"{self.limits.head_bytes} bytes")
                try:
                    if with_fds and not buffer:
                        data, fds = await client.receive_fds(self.limits.head_bytes,
                                                             MAX_LISTENERS)
                        buffer += data
                    else:
                        buffer += await client.receive(self.limits.head_bytes)
                except (anyio.EndOfStream, OSError):
                    raise _bad("the connection ended before the request's head") from None
            head, _, rest = buffer.partition(b"\r\n\r\n")
            if len(head) > self.limits.head_bytes:
                raise EgressRefused("egress_head_too_large", 431, "the request head is over "
                                    f"{self.limits.head_bytes} bytes")
            return head, rest, fds
        for fd in fds:
            os.close(fd)
        raise EgressRefused("egress_head_timeout", 408,
                            f"no request head within {self.limits.head_timeout:g}s")

    async def _take(self, client: _Raw, head: bytes, fds: list[int]) -> None:
        """The relay's listeners taken (``_handover.take``) and served while the process
        that sent them lives; answered 200 (a refusal raises EgressRefused, every descriptor
        closed)."""
        try:
            if self._tg is None:  # not serving: cannot happen while a connection is served
                raise EgressRefused("egress_handover_refused", 400, "the proxy is stopping")
            if self._handed >= self.limits.handed_sets:
                raise EgressRefused("egress_handover_refused", 400, f"{self._handed} sets "
                                    "of listeners are served (the limit)")
            pidfd = os.pidfd_open(peer_pid(client.sock))  # the relay's, soon the runtime's
        except (EgressRefused, OSError) as exc:
            for fd in fds:
                os.close(fd)
            refusal = exc if isinstance(exc, EgressRefused) else EgressRefused(
                "egress_handover_refused", 400, f"its sender cannot be watched ({exc})")
            log.warning("egress_handover_refused", team=self.team, member=self.member,
                        reason=refusal.message)
            raise refusal from None
        try:
            handed = take(head, fds)
        except EgressRefused as refusal:
            os.close(pidfd)
            log.warning("egress_handover_refused", team=self.team, member=self.member,
                        reason=refusal.message)
            raise
        self._handed += 1
        self._tg.start_soon(self._serve_handed, handed, pidfd)
        log.info("egress_listeners_taken", team=self.team, member=self.member,
                 ports=handed.ports())
        await client.send(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    async def _serve_handed(self, handed: Handed, pidfd: int) -> None:
        """Connections on the listeners handed over, until the process that handed them
        over ends (its pidfd turns readable) or the proxy stops; then they are closed."""
        ports = handed.ports()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._accept, handed.proxy, tg, self._proxy_port)
                for port, listener in handed.mapped:
                    tg.start_soon(self._accept, listener, tg, self._mapped(port))
                await anyio.wait_readable(pidfd)
                tg.cancel_scope.cancel()
        finally:
            self._handed -= 1
            handed.close()
            os.close(pidfd)
            log.info("egress_listeners_closed", team=self.team, member=self.member,
                     ports=ports)

    async def _proxy_port(self, sock: socket.socket) -> None:
        """A connection to the proxy port in the sandbox: served as one on the socket (no
        peer to check: only the sandbox reaches its own loopback)."""
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await self._counted(sock, self._serve_one)

    def _mapped(self, port: int) -> Callable[[socket.socket], Coroutine[Any, Any, None]]:
        """A connection to a mapped port in the sandbox: a CONNECT to ``127.0.0.1:port``."""
        async def serve(sock: socket.socket) -> None:
            with sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await self._counted(sock, lambda client: self._serve_mapped(client, port))
        return serve

    async def _serve_mapped(self, client: _Raw, port: int) -> None:
        target = parse_target("127.0.0.1", port)
        assert target is not None  # a port the hand-over checked
        try:
            upstream = await self._open(target)
        except EgressRefused as refusal:
            await self._answer(client, refusal, linger=True)
            return
        with upstream.sock:
            self.counts.allowed += 1
            await self._tunnel(client, upstream, _Request(target, connect=False))

    async def _open(self, target: Target) -> _Raw:
        decision = self.policy.decide(target)
        if not decision.allowed:
            self._denied(target, decision.reason)
        addresses = await self._resolve(target)
        if not addresses:
            self._denied(target, "blocked_address")
        with anyio.move_on_after(self.limits.connect_timeout):
            for address in addresses:
                with suppress(OSError):
                    return await _connect(address, target.port)
            raise EgressRefused("egress_connect_failed", 502, f"{target} did not accept a "
                                "connection", retryable=True)
        raise EgressRefused("egress_connect_timeout", 504, f"{target} did not answer within "
                            f"{self.limits.connect_timeout:g}s", retryable=True)

    async def _resolve(self, target: Target) -> list[IpAddress]:
        """The addresses to connect ``target`` to (resolved once: what is connected is what
        was checked), those the policy refuses left out."""
        if target.ip is not None:
            found: list[IpAddress] = [target.ip]
        else:
            infos: list[tuple[object, ...]] = []
            with anyio.move_on_after(self.limits.connect_timeout), suppress(OSError):
                infos = list(await anyio.getaddrinfo(target.host, target.port,
                                                     type=socket.SOCK_STREAM))
            if not infos:
                raise EgressRefused("egress_unresolved", 502, f"{target.host} did not resolve",
                                    retryable=True)
            addresses = (ip_literal(str(info[4][0])) for info in infos
                         if isinstance(info[4], tuple))
            found = list(dict.fromkeys(a for a in addresses if a is not None))
        return [a for a in found if self.policy.may_connect(target, a)]

    def _denied(self, target: Target, reason: str) -> None:
        self.counts.denied += 1
        log.warning("egress_denied", team=self.team, member=self.member, host=target.host,
                    port=target.port, reason=reason)
        raise EgressRefused("egress_denied", 403, f"{target} is not allowed for this member "
                            f"({reason}); the operator may add it to allow_hosts")

    async def _answer(self, client: _Raw, refusal: EgressRefused, *,
                      linger: bool = False) -> None:
        """``refusal`` sent as the answer; ``linger``: what the client sent is then read to
        its end (within the head timeout), so that the close does not reset the connection
        and lose the answer — a mapped port's client has sent its request unread."""
        if refusal.code != "egress_denied":
            self.counts.refused += 1
            log.info("egress_refused", team=self.team, member=self.member, code=refusal.code)
        with anyio.move_on_after(self.limits.head_timeout), suppress(OSError):
            await client.send(_refusal(refusal.status, refusal.code, refusal.message))
            if linger:
                client.shut(socket.SHUT_WR)
                with suppress(anyio.EndOfStream):
                    while True:
                        await client.receive(self.limits.chunk)

    async def _tunnel(self, client: _Raw, upstream: _Raw, request: _Request) -> None:
        """Both directions until both end, or until nothing moved for the idle timeout. A
        tunnel is ended by shutting its sockets down, never by cancelling a pending receive."""
        clock = _Clock(self.limits.idle_timeout)
        async with anyio.create_task_group() as watch:
            watch.start_soon(self._watch, clock, client, upstream)
            with suppress(OSError):
                if request.connect:
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await upstream.send(request.head + request.rest)
                async with anyio.create_task_group() as pumps:
                    pumps.start_soon(self._pump, client, upstream, clock, self.limits.chunk)
                    pumps.start_soon(self._pump, upstream, client, clock, self.limits.chunk)
            watch.cancel_scope.cancel()

    @staticmethod
    async def _watch(clock: _Clock, *streams: _Raw) -> None:
        while True:  # the deadline moves with every chunk
            remaining = clock.remaining()
            if remaining <= 0:
                break
            await anyio.sleep(remaining)
        for stream in streams:
            stream.shut()

    @staticmethod
    async def _pump(source: _Raw, sink: _Raw, clock: _Clock, chunk: int) -> None:
        """``source`` to ``sink`` until ``source`` ends (then ``sink``'s write side is shut);
        a broken side ends both. Each chunk waits for the sink to take the last one."""
        try:
            while True:
                data = await source.receive(chunk)
                clock.touch()
                await sink.send(data)
        except anyio.EndOfStream:
            sink.shut(socket.SHUT_WR)
        except OSError:
            source.shut()
            sink.shut()
