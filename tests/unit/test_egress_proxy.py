"""A member's egress proxy with real sockets (orchestrator/daemon/egress/_proxy.py): it tunnels
to an allowed local server, refuses the rest with a typed answer and a logged
``egress_denied``, and no bad input — garbage, a 1 MB request line, a silent or half-open
connection, a thousand connections — does more than end that connection."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.daemon.egress import EgressProxies
from orchestrator.daemon.egress._policy import EgressPolicy
from orchestrator.daemon.egress._proxies import socket_dir
from orchestrator.daemon.egress._proxy import EgressLimits, EgressProxy
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from anyio.abc import SocketStream

pytestmark = pytest.mark.anyio


async def _echo(stream: SocketStream) -> None:
    """A fake provider: answers each chunk with ``echo:`` and the chunk."""
    async with stream:
        try:
            while True:
                await stream.send(b"echo:" + await stream.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass


@asynccontextmanager
async def _world(*, allow_second: bool = False,
                 limits: EgressLimits | None = None) -> AsyncIterator[tuple[Path, int, int,
                                                                           EgressProxy]]:
    """Two local servers (the first allowed, the second not unless ``allow_second``) and a
    proxy on a Unix socket in a private directory."""
    with tempfile.TemporaryDirectory(prefix="tc-eg-") as folder:
        os.chmod(folder, 0o700)
        first = await anyio.create_tcp_listener(local_host="127.0.0.1")
        second = await anyio.create_tcp_listener(local_host="127.0.0.1")
        ports = [int(listener.extra(anyio.abc.SocketAttribute.local_port))
                 for listener in (first, second)]
        allowed = [f"127.0.0.1:{ports[0]}"] + ([f"127.0.0.1:{ports[1]}"] if allow_second
                                               else [])
        proxy = EgressProxy("t", "m", EgressPolicy.from_strings(allowed),
                            Path(folder) / "egress.sock", limits=limits)
        async with first, second, anyio.create_task_group() as tg:
            for listener in (first, second):
                tg.start_soon(listener.serve, _echo)
            await tg.start(proxy.serve)
            yield proxy.path, ports[0], ports[1], proxy
            tg.cancel_scope.cancel()


async def _until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    """Until ``predicate`` holds (the proxy's counts change as it serves), at most
    ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while True:
            if predicate():
                return
            await anyio.sleep(0.01)


async def _head(stream: SocketStream) -> bytes:
    data = b""
    with anyio.fail_after(10):
        while b"\r\n\r\n" not in data:
            data += await stream.receive()
    return data


async def _request(path: Path, payload: bytes) -> bytes:
    """Everything the proxy answers to ``payload`` until it closes."""
    stream = await anyio.connect_unix(path)
    async with stream:
        await stream.send(payload)
        await stream.send_eof()
        answer = b""
        with anyio.fail_after(10):
            try:
                while True:
                    answer += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        return answer


async def test_the_proxy_tunnels_to_an_allowed_server() -> None:
    """CONNECT to a listed host:port is answered 200 and bytes pass both ways; the socket is
    0600 and the allowed connection counted."""
    async with _world() as (path, allowed, _, proxy):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        stream = await anyio.connect_unix(path)
        async with stream:
            await stream.send(f"CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\n\r\n".encode())
            assert (await _head(stream)).startswith(b"HTTP/1.1 200 ")
            await stream.send(b"hello")
            with anyio.fail_after(10):
                assert await stream.receive() == b"echo:hello"
        assert proxy.counts.allowed == 1 and proxy.counts.denied == 0


async def test_plain_http_to_an_allowed_server_is_forwarded_in_origin_form() -> None:
    async with _world() as (path, allowed, _, _proxy):
        answer = await _request(path, f"GET http://127.0.0.1:{allowed}/v1/models HTTP/1.1\r\n"
                                "Host: x\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n".encode())
        assert answer.startswith(b"echo:GET /v1/models HTTP/1.1\r\n")
        assert b"Proxy-Authorization" not in answer and b"Connection: close" in answer


async def test_a_denied_target_is_refused_with_a_logged_event() -> None:
    """A port not listed (the second local server) gets 403 ``egress_denied``; the denial is
    logged with team, member, host and port, counted, and nothing reaches that server."""
    async with _world() as (path, _, denied, proxy):
        with capture_logs() as logs:
            answer = await _request(path, f"CONNECT 127.0.0.1:{denied} HTTP/1.1\r\n"
                                    "Proxy-Authorization: Basic c2VjcmV0\r\n\r\n".encode())
            metadata = await _request(path, b"CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403 ") and b"X-Teamctl-Error: egress_denied" in answer
        assert b"echo" not in answer
        assert metadata.startswith(b"HTTP/1.1 403 ")
        events = [e for e in logs if e["event"] == "egress_denied"]
        assert [(e["team"], e["member"], e["host"], e["port"], e["reason"]) for e in events] == [
            ("t", "m", "127.0.0.1", denied, "ip_literal"),
            ("t", "m", "169.254.169.254", 80, "blocked_address")]
        assert "c2VjcmV0" not in repr(logs)  # no header of the request is logged
        assert proxy.counts.denied == 2 and proxy.counts.allowed == 0


async def test_a_name_resolving_to_loopback_is_not_connected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``localhost`` listed by name still never reaches the operator's loopback (the live
    view, any local service): only a loopback literal entry does. The name resolves to loopback
    here whatever the machine's ``/etc/hosts`` says (a fresh debootstrap root has none)."""
    real = anyio.getaddrinfo

    async def resolve(host: str, port: int, **kwargs: Any) -> Any:
        if host == "localhost":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return await real(host, port, **kwargs)

    monkeypatch.setattr(anyio, "getaddrinfo", resolve)
    async with _world() as (path, allowed, _, proxy):
        proxy.policy = EgressPolicy.from_strings([f"localhost:{allowed}"])
        with capture_logs() as logs:
            answer = await _request(path, f"CONNECT localhost:{allowed} HTTP/1.1\r\n\r\n"
                                    .encode())
        assert answer.startswith(b"HTTP/1.1 403 ")
        assert [e["reason"] for e in logs if e["event"] == "egress_denied"] == ["blocked_address"]


@pytest.mark.parametrize(("payload", "status"), [
    (b"\x16\x03\x01\x02\x00garbage\r\n\r\n", b"400"),
    (b"GET " + b"a" * (1024 * 1024) + b" HTTP/1.1\r\n\r\n", b"431"),
    (b"CONNECT nowhere HTTP/1.1\r\n\r\n", b"400"),
    (b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n", b"400"),  # half a head, then the write side shut
])
async def test_bad_input_is_a_typed_refusal_and_the_proxy_stays_up(payload: bytes,
                                                                   status: bytes) -> None:
    async with _world() as (path, allowed, _, _proxy):
        stream = await anyio.connect_unix(path)
        async with stream:
            with anyio.fail_after(10):
                try:
                    await stream.send(payload)
                    await stream.send_eof()
                except anyio.BrokenResourceError:  # the proxy stopped reading at its bound
                    pass
                answer = await stream.receive()
        assert answer.startswith(b"HTTP/1.1 " + status + b" "), answer[:80]
        assert b"X-Teamctl-Error: egress_" in answer
        again = await _request(path, f"GET http://127.0.0.1:{allowed}/ok HTTP/1.1\r\n\r\n"
                               .encode())
        assert again.startswith(b"echo:GET /ok")


async def test_a_silent_connection_is_closed_at_the_head_deadline() -> None:
    async with _world(limits=EgressLimits(head_timeout=0.05)) as (path, _, _, _proxy):
        stream = await anyio.connect_unix(path)
        async with stream:
            await stream.send(b"CONNECT 127.0.0.1:1")
            assert (await _head(stream)).startswith(b"HTTP/1.1 408 ")


async def test_an_idle_tunnel_is_closed() -> None:
    """A tunnel where nothing moves either way for the idle timeout is ended (the client sees
    the end of its stream)."""
    async with _world(limits=EgressLimits(idle_timeout=0.05)) as (path, allowed, _, proxy):
        stream = await anyio.connect_unix(path)
        async with stream:
            await stream.send(f"CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\n\r\n".encode())
            await _head(stream)
            with anyio.fail_after(10), pytest.raises(anyio.EndOfStream):
                await stream.receive()
        await _until(lambda: not proxy.counts.open)


async def test_a_thousand_connections_are_capped_and_the_proxy_stays_up() -> None:
    """Over ``max_connections`` open at once, a new connection is answered 503 ``egress_busy``
    and closed; when they go, a request is served again."""
    async with _world(limits=EgressLimits(max_connections=16)) as (path, allowed, _, proxy):
        held = [await anyio.connect_unix(path) for _ in range(1000)]
        await _until(lambda: proxy.counts.open == 16)
        busy = await _request(path, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
        assert busy.startswith(b"HTTP/1.1 503 ") and b"egress_busy" in busy
        for stream in held:
            await stream.aclose()
        await _until(lambda: not proxy.counts.open)
        again = await _request(path, f"GET http://127.0.0.1:{allowed}/ok HTTP/1.1\r\n\r\n"
                               .encode())
        assert again.startswith(b"echo:GET /ok")


async def test_the_proxies_dir_made_in_the_temp_dir_goes_with_the_last_proxy(
        tmp_path: Path) -> None:
    """Where teamctl's home is too long for a socket path the proxies' sockets go to a fresh
    dir in the temp dir: it was left there at every daemon stop; it goes with the last proxy
    (closed, or the daemon stopping), and a later proxy makes a new one."""
    deep = tmp_path / ("x" * 90)
    async with anyio.create_task_group() as tg:
        proxies = EgressProxies(tg, deep)
        first = proxies.ensure("web", "a", ["example.com"])
        second = proxies.ensure("web", "b", ["example.com"])
        assert first.parent == second.parent and first.parent.name.startswith("tc-eg-")
        await proxies.close("web", "a")
        await all_blocked()
        assert second.parent.is_dir(), "one proxy still serves there"
        await proxies.close("web", "b")
        await all_blocked()
        assert not second.parent.exists()
        third = proxies.ensure("web", "c", ["example.com"])
        assert third.parent.is_dir() and third.parent != second.parent
        tg.cancel_scope.cancel()
    assert not third.parent.exists(), "the daemon stopping takes it too"


def test_a_killed_daemons_proxies_dir_is_used_again(tmp_path: Path) -> None:
    """The proxies' dir in the temp dir is recorded in teamctl's home: a daemon started after
    a ``kill -9`` (which removed nothing) binds its proxies there again, not in a new one."""
    root = tmp_path / ("x" * 90)
    root.mkdir()
    first = socket_dir(root)
    assert first.name.startswith("tc-eg-") and socket_dir(root) == first
    os.rmdir(first)
    assert socket_dir(root) != first
    os.rmdir(socket_dir(root))
