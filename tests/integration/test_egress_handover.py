"""A sandbox's listeners handed to its member's egress proxy (orchestrator/daemon/egress): real
listeners in a network namespace of their own (bubblewrap's, tests/support/netns.py), handed
over on the proxy's socket as the relay hands them. The proxy then serves them itself: the
proxy port as its socket (a CONNECT tunnelled, the policy deciding), a mapped port as a CONNECT
to ``127.0.0.1:PORT`` (an allowed one joined to the server, a denied one answered 403 on that
connection, the answer not lost to a reset). Each hand-over's listeners are served while the
process that handed them over lives, at most ``handed_sets`` at once, and closed when the proxy
stops; a listener of this machine's own loopback is refused."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.daemon.egress._policy import EgressPolicy
from orchestrator.daemon.egress._proxy import EgressLimits, EgressProxy
from tests.support.netns import namespace_sockets
from tests.support.settle import until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import SocketStream

pytestmark = pytest.mark.anyio


async def _echo(stream: SocketStream) -> None:
    async with stream:
        try:
            while True:
                await stream.send(b"echo:" + await stream.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass


@asynccontextmanager
async def _world(limits: EgressLimits | None = None) -> AsyncIterator[tuple[EgressProxy, int,
                                                                              int]]:
    """A proxy allowing one local server (its port), another server not allowed."""
    with tempfile.TemporaryDirectory(prefix="tc-eg-") as folder:
        os.chmod(folder, 0o700)
        allowed = await anyio.create_tcp_listener(local_host="127.0.0.1")
        denied = await anyio.create_tcp_listener(local_host="127.0.0.1")
        ports = [int(listener.extra(anyio.abc.SocketAttribute.local_port))
                 for listener in (allowed, denied)]
        proxy = EgressProxy("t", "m", EgressPolicy.from_strings([f"127.0.0.1:{ports[0]}"]),
                            Path(folder) / "egress.sock", limits=limits)
        async with allowed, denied, anyio.create_task_group() as tg:
            for listener in (allowed, denied):
                tg.start_soon(listener.serve, _echo)
            await tg.start(proxy.serve)
            yield proxy, ports[0], ports[1]
            tg.cancel_scope.cancel()


def _hand_over(path: Path, listeners: list[socket.socket]) -> bytes:
    """``listeners`` sent as the relay sends them; the proxy's answer."""
    ports = " ".join(str(s.getsockname()[1]) for s in listeners)
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(30)
        conn.connect(str(path))
        socket.send_fds(conn, [f"TEAMCTL-LISTENERS/1 {ports}\r\n\r\n".encode()],
                        [s.fileno() for s in listeners])
        answer = b""
        while data := conn.recv(4096):
            answer += data
    return answer


def _exchange(client: socket.socket, port: int, request: bytes) -> bytes:
    """``client`` (a socket of the namespace) connected to ``port`` there, ``request`` sent
    and the write side shut: everything it got back to the end."""
    with client:
        client.settimeout(30)
        client.connect(("127.0.0.1", port))
        client.sendall(request)
        client.shutdown(socket.SHUT_WR)
        got = b""
        while data := client.recv(65536):
            got += data
    return got


async def test_the_proxy_serves_the_listeners_a_sandbox_hands_it(tmp_path: Path) -> None:
    async with _world() as (proxy, allowed, denied):
        listeners, clients = await anyio.to_thread.run_sync(
            namespace_sockets, [0, allowed, denied], 4)
        with capture_logs() as logs:
            answer = await anyio.to_thread.run_sync(_hand_over, proxy.path, listeners)
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        proxy_port = listeners[0].getsockname()[1]
        for listener in listeners:  # the proxy holds its own copies
            listener.close()
        taken = [e for e in logs if e["event"] == "egress_listeners_taken"]
        assert [e["ports"] for e in taken] == [[proxy_port, allowed, denied]]

        def run() -> list[bytes]:
            return [_exchange(clients[0], proxy_port,
                              f"CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\n\r\nhi".encode()),
                    _exchange(clients[1], allowed, b"ping"),
                    _exchange(clients[2], denied, b"GET / HTTP/1.1\r\n\r\n" + b"x" * 200_000)]

        tunnelled, mapped, refused = await anyio.to_thread.run_sync(run)
        assert tunnelled == b"HTTP/1.1 200 Connection established\r\n\r\necho:hi"
        assert mapped == b"echo:ping"
        assert refused.startswith(b"HTTP/1.1 403 Forbidden\r\n") \
            and b"X-Teamctl-Error: egress_denied" in refused, refused
        assert (proxy.counts.allowed, proxy.counts.denied) == (2, 1)
    # the proxy stopped: its listeners closed (the namespace lives on in the last client)
    with pytest.raises(ConnectionRefusedError):
        await anyio.to_thread.run_sync(_exchange, clients[3], proxy_port, b"")


def _hand_over_from_a_child(path: Path, listeners: list[socket.socket]) -> subprocess.Popen[bytes]:
    """``listeners`` handed over by a child process (as the relay does, the test's own copies
    closed), which then waits for a line on its stdin; its first line: the answer's status."""
    ports = " ".join(str(s.getsockname()[1]) for s in listeners)
    fds = [s.fileno() for s in listeners]
    code = (f"import socket, sys\nconn = socket.socket(socket.AF_UNIX)\n"
            f"conn.connect({str(path)!r})\n"
            f"socket.send_fds(conn, [b'TEAMCTL-LISTENERS/1 {ports}\\r\\n\\r\\n'], {fds})\n"
            "print(conn.recv(12).decode(), flush=True)\nsys.stdin.readline()\n")
    child = subprocess.Popen([sys.executable, "-c", code], pass_fds=fds,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    for listener in listeners:
        listener.close()
    return child


async def test_each_hand_over_is_served_while_its_sender_lives(tmp_path: Path) -> None:
    """Two sandboxes of one member (its runtime and a check it runs) hand their listeners over:
    both are served at once; when the first one's process ends, its listeners are closed (a
    connection there refused), the other's still served. Past ``handed_sets`` a hand-over is
    refused (400), nothing taken."""
    async with _world(EgressLimits(handed_sets=2)) as (proxy, allowed, _):
        first, old = await anyio.to_thread.run_sync(namespace_sockets, [0], 2)
        second, new = await anyio.to_thread.run_sync(namespace_sockets, [0], 1)
        third, _ = await anyio.to_thread.run_sync(namespace_sockets, [0], 0)
        ports = [first[0].getsockname()[1], second[0].getsockname()[1]]
        senders = [_hand_over_from_a_child(proxy.path, first),
                   _hand_over_from_a_child(proxy.path, second)]
        for sender in senders:
            assert sender.stdout is not None
            said = await anyio.to_thread.run_sync(sender.stdout.readline)
            assert said == b"HTTP/1.1 200\n"
        with capture_logs() as logs:
            answer = await anyio.to_thread.run_sync(_hand_over, proxy.path, third)
        third[0].close()
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
        assert [e["reason"] for e in logs if e["event"] == "egress_handover_refused"] == [
            "2 sets of listeners are served (the limit)"]
        request = f"CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\n\r\n".encode()
        established = b"HTTP/1.1 200 Connection established\r\n\r\n"
        assert await anyio.to_thread.run_sync(_exchange, old[0], ports[0], request) \
            == established
        with capture_logs() as logs:
            await anyio.to_thread.run_sync(senders[0].communicate, b"\n", 30)

            async def closed() -> bool:
                return [e["ports"] for e in logs if e["event"] == "egress_listeners_closed"] \
                    == [[ports[0]]]

            await until(closed)
        with pytest.raises(ConnectionRefusedError):
            await anyio.to_thread.run_sync(_exchange, old[1], ports[0], b"")
        assert await anyio.to_thread.run_sync(_exchange, new[0], ports[1], request) \
            == established
        await anyio.to_thread.run_sync(senders[1].communicate, b"\n", 30)


async def test_a_listener_of_this_machines_own_loopback_is_refused(tmp_path: Path) -> None:
    async with _world() as (proxy, _, _):
        own = socket.create_server(("127.0.0.1", 0))
        with own, capture_logs() as logs:
            answer = await anyio.to_thread.run_sync(_hand_over, proxy.path, [own])
        assert answer.startswith(b"HTTP/1.1 400 ") \
            and b"X-Teamctl-Error: egress_handover_refused" in answer, answer
        assert [e["event"] for e in logs if e["event"].startswith("egress_listeners")] == []
