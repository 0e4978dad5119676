"""The way in to a sandboxed OpenCode with its network cut (docs/security.md, "The network
boundary"): the fake ``opencode serve`` in the real bubblewrap, driven by the adapter alone
(tests/support/opencode_sandbox.py), with ``network = "on"`` (the daemon's httpx over TCP to its
loopback port) and ``"off"`` (over the relay's Unix socket, joined inside to that port).

- a request's round trip: ``GET /global/health`` on the member's own client (kept-alive
  connection, as the daemon's are), median and p90 of ``REQUESTS``, after a warm-up;
- the relay alone (no sandbox) in front of a server that answers at once: a kept-alive
  request and a new connection's (raw sockets: connect, request, answer), direct TCP
  against the relay's socket;
- a member's start (spawn → ready: listening, health, session, event stream), median of
  ``STARTS``.

``--real``: the real OpenCode (``make e2e`` installs it) instead of the fake, whose Python
HTTP server answers every request ~40 ms late (its header and body in two writes: Nagle
against delayed ACKs), which hides a difference of a millisecond; ``REAL_STARTS`` starts.

The adapter is driven in process, as the daemon drives it: no daemon."""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtimes.opencode.runtime import OpenCodeRuntime
from tests.support.opencode_sandbox import sandbox_host, spec

REQUESTS = 100
STARTS = 20
REAL_STARTS = 3
REPO = Path(__file__).resolve().parents[1]
REAL_OPENCODE = REPO / ".cache/e2e/opencode/node_modules/.bin/opencode"
_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n{\"healthy\":true}"


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    return (f"median {statistics.median(ordered):.2f} ms, "
            f"p90 {ordered[int(len(ordered) * 0.9) - 1]:.2f} ms (n={len(ordered)})")


async def _round_trips(client: httpx.AsyncClient) -> list[float]:
    for _ in range(10):  # warm-up
        await client.get("/global/health")
    found = []
    for _ in range(REQUESTS):
        began = time.perf_counter()
        response = await client.get("/global/health")
        found.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200
    return found


async def _member(network: str, real: bool) -> tuple[list[float], list[float]]:
    starts: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        root = Path(tmp)
        with sandbox_host(root, network) as host:
            launch = spec(root, host)
            if real:
                launch = replace(launch, executable=str(REAL_OPENCODE), model=None,
                                 start_timeout=120.0)
            for _ in range(REAL_STARTS if real else STARTS):
                began = time.perf_counter()
                async with OpenCodeRuntime(stop_grace=0).open(launch) as server:
                    starts.append((time.perf_counter() - began) * 1000)
                    kept = await _round_trips(server._http)
                await server._process.aclose()
            await host.close()
    return kept, starts


def _fast_server() -> int:
    """A keep-alive HTTP server answering each request in one write (no Nagle wait)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            buffer = b""
            while data := conn.recv(65536):
                buffer += data
                while b"\r\n\r\n" in buffer:
                    _, _, buffer = buffer.partition(b"\r\n\r\n")
                    conn.sendall(_ANSWER)

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return int(listener.getsockname()[1])


def _one_request(port: int, uds: str | None) -> float:
    """A new connection, one request, its whole answer (ms): raw sockets, no client."""
    began = time.perf_counter()
    with (socket.socket(socket.AF_UNIX) if uds else socket.socket()) as sock:
        sock.connect(uds or ("127.0.0.1", port))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while len(answer) < len(_ANSWER):
            answer += sock.recv(4096)
    return (time.perf_counter() - began) * 1000


def _relay_alone() -> None:
    """The relay's own cost, apart from any server's: direct TCP against the relay's socket
    in front of the same fast server (the relay run here, without a sandbox)."""
    port = _fast_server()
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        path = f"{tmp}/server.sock"
        relay = subprocess.Popen([sys.executable, "-I", str(REPO /
        "runtimes/hosts/sandbox/relay.py"),
                                  "--socket", f"{tmp}/none.sock", "--inbound",
                                  f"{port}:{path}", "--", "sleep", "600"])
        try:
            while not Path(path).exists():
                time.sleep(0.01)
            for name, uds in (("direct TCP", None), ("relay socket", path)):
                with httpx.Client(base_url=f"http://127.0.0.1:{port}",
                                  transport=httpx.HTTPTransport(uds=uds)) as client:
                    for _ in range(10):
                        client.get("/")
                    kept = []
                    for _ in range(REQUESTS):
                        began = time.perf_counter()
                        client.get("/")
                        kept.append((time.perf_counter() - began) * 1000)
                fresh = [_one_request(port, uds) for _ in range(REQUESTS)]
                print(f"relay alone: {name} (kept-alive) {_ms(kept)}")
                print(f"relay alone: {name} (new connection) {_ms(fresh)}")
        finally:
            relay.terminate()
            relay.wait()


async def main() -> None:
    real = "--real" in sys.argv
    _relay_alone()
    for network in ("on", "off"):
        kept, starts = await _member(network, real)
        print(f"network {network}: request (kept-alive) {_ms(kept)}")
        print(f"network {network}: start {_ms(starts)}")


if __name__ == "__main__":
    anyio.run(main)
