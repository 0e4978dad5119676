"""The member's relay process (runtimes/hosts/kubernetes/relay.py) against the fake API server
(tests/support/k8s_fake.py): light (no ``kubernetes`` import), its credential only on stdin, the
command's exit code, a cut stream told apart."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from runtimes.hosts.kubernetes import exec as kube_exec
from runtimes.hosts.kubernetes.relay import DROPPED
from tests.support.k8s_fake import TOKEN, fake_cluster, kubeconfig

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.k8s_fake import FakeCluster

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def pod(tmp_path: Path) -> Iterator[tuple[FakeCluster, Any, kube_exec.ExecTarget]]:
    with fake_cluster(tmp_path / "cluster") as (fake, url):
        config = str(kubeconfig(tmp_path / "kc", url))
        api = kube_exec.api_client(config, None)
        from kubernetes import client

        client.CoreV1Api(api).create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
            "spec": {"containers": [{"name": "agent", "image": "x"}]}})
        yield fake, api, kube_exec.ExecTarget(config, None, "default", "p1", "agent")


def _relay(api: Any, target: kube_exec.ExecTarget, command: list[str],
           *extra: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([*kube_exec.relay_argv(sys.executable)[:1], *extra,
                                *kube_exec.relay_argv(sys.executable)[1:]],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=REPO)
    assert process.stdin is not None
    process.stdin.write(json.dumps(kube_exec.connection(api, target, command)).encode() + b"\n")
    process.stdin.flush()
    return process


def test_the_relay_starts_without_importing_the_kubernetes_package(
        pod: tuple[FakeCluster, Any, kube_exec.ExecTarget]) -> None:
    """The relay imported the whole ``kubernetes`` package (1.6–2.2 s, ~44 MiB a member):
    now the standard library and websocket-client only; the bearer token reaches it on stdin
    (never argv), the command's stdin, stdout and exit code pass through."""
    _, api, target = pod
    process = _relay(api, target, ["sh", "-c", "cat; exit 3"], "-X", "importtime")
    assert TOKEN.encode() not in Path(f"/proc/{process.pid}/cmdline").read_bytes()
    out, err = process.communicate(b"ping\n", timeout=30)
    assert (process.returncode, out) == (3, b"ping\n"), err
    imported = {line.split("|")[-1].strip() for line in err.decode().splitlines()
                if line.startswith("import time:")}
    assert "websocket" in imported
    assert not {m for m in imported if m.split(".")[0] == "kubernetes"}, imported


def test_a_stream_cut_without_a_status_exits_dropped_and_says_so(
        pod: tuple[FakeCluster, Any, kube_exec.ExecTarget]) -> None:
    """The connection cut (no exit Status): 255 and a line on stderr, so the daemon restarts
    the member rather than reading an exit of the runtime."""
    fake, api, target = pod
    process = _relay(api, target, ["sh", "-c", "echo up; exec cat"])
    assert process.stdout is not None
    assert process.stdout.readline() == b"up\n"
    cut = threading.Thread(target=fake.drop_exec)  # the fake's loop, from another thread
    cut.start()
    cut.join(timeout=30)
    _, err = process.communicate(timeout=30)
    assert process.returncode == DROPPED
    assert b"dropped" in err


def test_a_refused_upgrade_is_reported_with_its_handshake_status(
        pod: tuple[FakeCluster, Any, kube_exec.ExecTarget]) -> None:
    """A 403 on pods/exec: the relay cannot open the stream and says why on stderr."""
    fake, api, target = pod
    fake.forbid.add(("create", "pods/exec"))
    process = _relay(api, target, ["true"])
    _, err = process.communicate(b"", timeout=30)
    assert process.returncode == DROPPED
    assert b"cannot open the exec stream of pod p1" in err
