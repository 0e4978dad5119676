"""A pod's port reached from here (runtimes/hosts/kubernetes/forward.py):
``KubernetesHost.forward_port``
against the fake API server (tests/support/k8s_fake.py, ``pods/{name}/portforward`` over WebSocket)
driven by the real ``kubernetes`` client; the "pod" is local, so its loopback port is ours.
Then the fake OpenCode served in a pod and answering a turn through it, the adapter alone."""

from __future__ import annotations

import gc
import os
import socket
import threading
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.config import KubernetesHostConfig
from orchestrator.contracts import HostUnavailable, LaunchSpec, TextPart, Turn
from runtimes.hosts.kubernetes.host import kubernetes_host
from runtimes.hosts.kubernetes.manifests import object_name
from runtimes.opencode.runtime import OpenCodeRuntime
from tests.support.driver import REPO, fakes_path
from tests.support.k8s_fake import fake_cluster, kubeconfig
from tests.support.members import opencode_member

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from runtimes.hosts.kubernetes.host import KubernetesHost
    from tests.support.driver import Teamctl
    from tests.support.k8s_fake import FakeCluster

# the host's side calls (runtimes/hosts/kubernetes/exec.py ``run``) leave their WebSocket's socket
# to the API server for the collector when the server closed first: not this module's, found here
# because this test runs the host in its own process (elsewhere it is the daemon's)
pytestmark = pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")

NS = "agents"
FAKE_OPENCODE = REPO / "fixtures" / "bin" / "opencode"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeCluster, str]]:
    with fake_cluster(tmp_path / "cluster") as found:
        yield found


@pytest.fixture
async def host(tmp_path: Path, cluster: tuple[FakeCluster, str],
               monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[KubernetesHost]:
    """A member's pod on the fake cluster; let go of (its forward closed) at the end. The
    operator's home is apart from the checkout, as the daemon's is in these tests: a path under
    it is the pod's home there (a clone under ~ made the fake CLI "not in the image")."""
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    _, url = cluster
    state = tmp_path / "state" / "members" / "t" / "m"
    state.mkdir(parents=True, mode=0o700)
    config = KubernetesHostConfig(kind="kubernetes", namespace=NS, image="example/agent:1",
                                  kubeconfig=str(kubeconfig(tmp_path / "kc", url)),
                                  start_timeout=20.0)
    found = kubernetes_host("t", "m", "k8s", config, state, home="home-of-the-test")
    yield found
    await found.close()
    gc.collect()  # those side calls' sockets (above), while this module's filter holds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Echo:
    """The pod's server: 127.0.0.1:port here, each connection's bytes sent back."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _exchange(port: int, payload: bytes) -> bytes:
    """``payload`` through 127.0.0.1:port and back (blocking: a thread's), each read within
    60 s (the fake API server relays in Python: slow, never stuck, on a loaded machine)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        conn.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.mark.anyio
async def test_bytes_cross_a_pod_port_forward_both_ways(host: KubernetesHost) -> None:
    """``forward_port`` (it raised ``kube_unsupported``): a connection to 127.0.0.1:port here
    reaches the returned port on the pod's loopback, and 1 MiB (sixteen 64 KiB frames) goes
    there and back intact on each of two connections at once (each its own stream)."""
    local = _free_port()
    remote = await host.forward_port(local)
    echo = _Echo(remote)
    try:
        payloads = [os.urandom(1 << 20), os.urandom(1 << 20)]
        got: list[bytes] = [b"", b""]

        async def one(index: int) -> None:
            got[index] = await anyio.to_thread.run_sync(_exchange, local, payloads[index])

        async with anyio.create_task_group() as group:
            group.start_soon(one, 0)
            group.start_soon(one, 1)
        assert got == payloads
    finally:
        echo.close()


@pytest.mark.anyio
async def test_a_port_the_pod_refuses_is_told_typed_and_the_connection_ends(
        host: KubernetesHost) -> None:
    """Nothing listens on the pod's port: the API's error channel says so, the connection
    here ends (no hang) and the failure is logged typed, ``kube_forward_refused``."""
    local = _free_port()
    with capture_logs() as logs:
        await host.forward_port(local)
        got = await anyio.to_thread.run_sync(_exchange, local, b"hello?")
        assert got == b""  # ended after the failure was logged: no wait for the log
    [failed] = [e for e in logs if e["event"] == "kube_forward_failed"]
    assert failed["code"] == "kube_forward_refused"
    assert "connection refused" in failed["reason"].lower(), failed


@pytest.mark.anyio
async def test_the_listener_goes_with_the_next_launch_and_at_stop(
        host: KubernetesHost) -> None:
    """A second ``forward_port`` (the member's next launch) closes the first listener and
    cuts its carried connections — listeners never pile up; the host's close (stop) closes
    the last one."""
    first, second = _free_port(), _free_port()
    remote = await host.forward_port(first)
    echo = _Echo(remote)
    try:
        held = socket.create_connection(("127.0.0.1", first), timeout=20)
        held.sendall(b"ping")
        assert held.recv(4) == b"ping"
        await host.forward_port(second)
        assert _refused(first)
        assert held.recv(4) == b""  # cut, not left carried
        held.close()
        await host.close()
        assert _refused(second)
    finally:
        echo.close()


@pytest.mark.anyio
async def test_an_asleep_member_keeps_no_listener_here(host: KubernetesHost) -> None:
    """``pause_after``: when the asleep member's pod is suspended its forward's listener goes
    too (its runtime is stopped); the wake's start makes a new one."""
    local = _free_port()
    await host.forward_port(local)
    await host.suspend()
    assert _refused(local)


@pytest.mark.anyio
async def test_an_rbac_denial_of_portforward_is_fatal_and_names_the_role(
        host: KubernetesHost, cluster: tuple[FakeCluster, str]) -> None:
    """403 on ``create pods/portforward`` (the WebSocket upgrade refused): ``kube_forbidden``
    at the start, not retried, the Role's missing verb named; nothing listens here."""
    fake, _ = cluster
    fake.forbid.add(("create", "pods/portforward"))
    local = _free_port()
    with pytest.raises(HostUnavailable) as raised:
        await host.forward_port(local)
    assert (raised.value.code, raised.value.retryable) == ("kube_forbidden", False)
    assert "create pods/portforward" in raised.value.reason
    assert "for OpenCode, create on pods/portforward" in raised.value.reason
    assert _refused(local)


@pytest.mark.anyio
async def test_the_fake_opencode_in_a_pod_answers_a_turn_through_the_forward(
        host: KubernetesHost, cluster: tuple[FakeCluster, str], tmp_path: Path) -> None:
    """OpenCode's ``serve`` runs in the pod (exec'd there), the adapter reaches it only
    through the port-forward: it starts, opens its session, its event stream connects and a
    turn is answered."""
    fake, _ = cluster
    work = fake.volume(NS, f"work-{object_name('t', 'm')}") / "workspace"
    launch = LaunchSpec(team="t", member="m", executable=str(FAKE_OPENCODE), model="fake/text",
                        prompt=None, workdir=work, state_dir=host.state_dir,
                        start_timeout=20.0, env={"PATH": fakes_path(os.environ["PATH"])},
                        host=host)
    async with OpenCodeRuntime().open(launch) as server:
        result = await server.run_turn(Turn("m1", (TextPart("hello in the pod"),)),
                                       on_sent=_sent)
        assert "received: hello in the pod" in result.reply
    assert [e for e in fake.requests if e == ("create", "pods/portforward")]


async def _sent() -> None:
    pass


def test_an_opencode_member_in_a_pod_answers_and_its_forward_goes_at_stop(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str], tmp_path: Path) -> None:
    """Through the daemon: an OpenCode member placed on a Kubernetes host (it was refused,
    ``kube_unsupported``) launches in its Sandbox's pod, answers a turn, and stop leaves no
    listener of its forward here."""
    fake, url = cluster
    member = opencode_member("oc", host="k8s", workdir=str(
        fake.volume(NS, f"work-{object_name('web', 'oc')}") / "workspace"))
    team = teamctl.write_team("web", [member], login="isolated", hosts={"k8s": {
        "kind": "kubernetes", "kubeconfig": str(kubeconfig(tmp_path / "kc", url)),
        "namespace": NS, "image": "example/agent:1", "start_timeout": 20.0}})
    try:
        launched = teamctl.run("launch", str(team))
        assert launched.returncode == 0, launched.stderr + launched.stdout
        done = teamctl.run("send", "oc", "hello in the pod", "--wait")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == (
            "fake-opencode (openrouter/moonshotai/kimi-k2.6) received: hello in the pod")
        [ready] = [e for e in teamctl.log_events() if e["event"] == "runtime_ready"]
        assert teamctl.run("stop", "web").returncode == 0
        assert _refused(int(ready["port"]))
        assert not [k for k in fake.objects if k[1] == NS]
    finally:
        teamctl.shutdown()
