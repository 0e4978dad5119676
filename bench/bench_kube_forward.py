"""What OpenCode's port-forward into a pod costs (docs/scaling.md, "OpenCode in a pod"):
``KubernetesHost.forward_port`` against the fake API server on loopback (tests/support/k8s_fake.py,
the real ``kubernetes`` client), in front of a server that answers at once (one write, no
Nagle wait), against the same server reached directly.

- a request on a kept-alive connection (the adapter's httpx client keeps its connections),
  median and p90 of ``REQUESTS`` after a warm-up;
- a new connection's request (connect, request, whole answer; raw sockets): through the
  forward, a new ``pods/portforward`` stream each;
- ``forward_port`` itself (the pod's free port, the check stream, the listener).

Not a cluster: a real API server and kubelet add their own hops (two, in place of the fake's
one), so read the differences, not the absolute figures.

Measured in process against the fake API server: no member."""

from __future__ import annotations

import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_opencode_relay import _fast_server, _ms, _one_request

from orchestrator.config import KubernetesHostConfig
from runtimes.hosts.kubernetes.host import kubernetes_host
from tests.support.k8s_fake import fake_cluster, kubeconfig

REQUESTS = 50
FORWARDS = 10


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kept(port: int) -> list[float]:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        for _ in range(10):  # warm-up
            client.get("/")
        found = []
        for _ in range(REQUESTS):
            began = time.perf_counter()
            assert client.get("/").status_code == 200
            found.append((time.perf_counter() - began) * 1000)
    return found


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp, \
            fake_cluster(Path(tmp) / "cluster") as (_, url):
        root = Path(tmp)
        state = root / "state"
        state.mkdir()
        config = KubernetesHostConfig(kind="kubernetes", namespace="agents", image="e:1",
                                      kubeconfig=str(kubeconfig(root / "kc", url)))
        host = kubernetes_host("bench", "m", "k8s", config, state, home="bench")
        forwards = []
        for _ in range(FORWARDS):
            began = time.perf_counter()
            await host.forward_port(_free_port())
            forwards.append((time.perf_counter() - began) * 1000)
        direct = _fast_server()
        side = host._side

        async def freeport_is_the_server(*args: str, **kwargs: Any) -> str:
            # the "pod" is this machine: its free port is the fast server's
            return str(direct) if args == ("freeport",) else await side(*args, **kwargs)

        host._side = freeport_is_the_server  # type: ignore[method-assign]
        local = _free_port()
        assert await host.forward_port(local) == direct
        for name, port in (("direct", direct), ("through the forward", local)):
            kept = await anyio.to_thread.run_sync(_kept, port)
            fresh = [await anyio.to_thread.run_sync(_one_request, port, None)
                     for _ in range(REQUESTS)]
            print(f"{name}: request (kept-alive) {_ms(kept)}")
            print(f"{name}: request (new connection) {_ms(fresh)}")
        print(f"forward_port (the pod ensured, its free port, the check stream, the listener) "
              f"{_ms(forwards)}")
        await host.close()


if __name__ == "__main__":
    anyio.run(main)
