"""The Kubernetes host's core-API calls (pods, claims, a Secret, the exec stream) against the
fake API server (tests/support/k8s_fake.py), in a process of their own: answered as JSON through the
client's transport (runtimes/hosts/kubernetes/rest.py), never through the generated ``CoreV1Api``,
whose import costs ~1.2 s of CPU in each daemon and each ``doctor --host``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from runtimes.hosts.kubernetes import exec as kube_exec
from runtimes.hosts.kubernetes import rest as kube_rest
from runtimes.hosts.kubernetes.errors import classify
from tests.support.k8s_fake import fake_cluster, kubeconfig

NS = "agents"
REPO = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path

    import anyio

    from runtimes.hosts.kubernetes import doctor as kube_doctor
    from runtimes.hosts.kubernetes.host import KubernetesHost
    from runtimes.hosts.kubernetes.manifests import PodPlan

    async def main() -> None:
        plan = PodPlan(team="web", member="far", namespace="agents", image="img:1",
                       secret="claude-key", home="0123456789abcdef")
        host = KubernetesHost("k8s", plan, Path(sys.argv[2]), kubeconfig=sys.argv[1])
        home = await host.connect()  # the claim, the pod, the remote side's probe (exec)
        owned = sorted(await host.owned())
        found = await kube_doctor.inspect(host, "claude-key")
        released = await host.release()
        print(json.dumps({"home": home, "owned": owned, "released": released,
                          "secret": [c.detail for c in found.checks
                                     if c.check == "secret claude-key"],
                          "core_v1_api": "kubernetes.client.api.core_v1_api" in sys.modules}))

    anyio.run(main)
""")


def test_a_pod_member_and_doctor_work_without_importing_the_generated_core_api(
        tmp_path: Path) -> None:
    """Without the CRD (every core call teamctl makes: claim and pod read and made, the probe
    exec'd, both listed by this home's label, the Secret read, both deleted): each works, and
    ``kubernetes.client.api.core_v1_api`` is never imported."""
    with fake_cluster(tmp_path / "cluster", crd=False) as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": "sk-ant-core-0000"}
        config = kubeconfig(tmp_path / "kubeconfig", url)
        (tmp_path / "state").mkdir()
        done = subprocess.run([sys.executable, "-c", _SCRIPT, str(config), str(tmp_path / "state")],
                              capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["home"].endswith("/home"), report
        assert report["owned"] == [["web", "far"]]
        assert report["secret"] == ["present, keys: ANTHROPIC_API_KEY"]
        assert report["released"] is True
        assert ("create", "pods") in fake.requests and ("delete", "pods") in fake.requests
        assert [key for key in fake.objects if key[1] == NS] == []
        assert report["core_v1_api"] is False


def test_a_refused_core_call_raises_the_clients_api_exception_with_the_servers_status(
        tmp_path: Path) -> None:
    """A core call the API server refuses raises the client's ``ApiException`` as the
    generated methods do — its status and the Status body — so a 403 is still read as RBAC
    (``kube_forbidden``, the server's words) and a 404 as not there."""
    with fake_cluster(tmp_path / "cluster", crd=False) as (fake, url):
        fake.forbid.add(("get", "pods"))
        api = kube_exec.api_client(str(kubeconfig(tmp_path / "kubeconfig", url)), None)
        with pytest.raises(ApiException) as refused:
            kube_rest.request(api, "GET", kube_rest.path(NS, "pods", "far"), timeout=10.0)
        error = classify("far", "k8s", NS, refused.value, "get", "pods")
        assert (refused.value.status, error.code) == (403, "kube_forbidden")
        assert 'cannot get resource "pods"' in error.reason
        with pytest.raises(ApiException) as missing:
            kube_rest.request(api, "GET", kube_rest.path(NS, "persistentvolumeclaims", "none"),
                              timeout=10.0)
        assert missing.value.status == 404
