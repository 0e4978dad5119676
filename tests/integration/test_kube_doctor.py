"""``teamctl doctor --host NAME`` for a Kubernetes host, against the fake API server
(tests/support/k8s_fake.py, the real ``kubernetes`` client); and its ``--json`` stdout kept a
document."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tests.support.k8s_fake import fake_cluster, kubeconfig
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

NS = "agents"


def test_doctor_host_json_stdout_stays_json_when_a_warning_is_logged(teamctl: Teamctl) -> None:
    """``doctor --host X --json`` prints one JSON document on stdout even when the CLI logs
    a warning (here: its ssh control dir refused, under a runtime dir that does not exist):
    the CLI's log goes to stderr."""
    done = teamctl.run("doctor", "--host", "nobody@nosuchhost.invalid", "--json",
                       extra_env={"XDG_RUNTIME_DIR": f"/tmp/tc-none-{uuid.uuid4().hex[:8]}"})
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert (report["reachable"], report["error"]["code"]) == (False, "host_unreachable")
    assert "ssh_control_dir_refused" in done.stderr


def _team(teamctl: Teamctl, url: str, **host: Any) -> Path:
    table = {"kind": "kubernetes", "namespace": NS, "image": "ghcr.io/example/agent:1",
             "kubeconfig": str(kubeconfig(teamctl.workdir / "kubeconfig", url)), **host}
    return teamctl.write_team("web", [fake_member("far", host="k8s")], hosts={"k8s": table},
                              login="isolated")


def test_doctor_host_of_a_kubernetes_host_lists_mode_rbac_and_the_secret(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """A cluster serving agent-sandbox, every verb allowed, the Secret there: reachable,
    ``sandbox``, one row per verb of the Role (each asked, none tried: no object made) and
    the Secret's key names (never a value); exit 0. The text is one table of the same."""
    with fake_cluster(tmp_path / "cluster") as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": "sk-ant-doctor-0000"}
        team = _team(teamctl, url, secret="claude-key")
        done = teamctl.run("doctor", str(team), "--host", "k8s", "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert (report["kind"], report["reachable"], report["mode"], report["namespace"]) == \
            ("kubernetes", True, "sandbox", NS)
        assert report["destination"] == url
        checks = {c["check"]: c for c in report["checks"]}
        assert all(c["ok"] for c in checks.values()), checks
        assert {"create sandboxes.agents.x-k8s.io", "delete sandboxes.agents.x-k8s.io",
                "patch sandboxes.agents.x-k8s.io", "create pods/exec",
                "get pods/exec"} <= set(checks)
        assert checks["secret claude-key"]["detail"] == "present, keys: ANTHROPIC_API_KEY"
        assert "sk-ant-doctor-0000" not in done.stdout + done.stderr
        assert fake.objects == {}
        text = teamctl.run("doctor", str(team), "--host", "k8s")
        assert text.returncode == 0, text.stderr
        assert "each member gets a Sandbox (agent-sandbox)" in text.stdout
        assert "create pods/exec" in text.stdout


def test_doctor_host_of_a_kubernetes_host_names_the_fallback_a_denied_verb_and_no_secret(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """Without the CRD: ``pod`` (Pod + PVC); a verb RBAC denies and a missing Secret are
    failed rows naming the fix; exit 1."""
    with fake_cluster(tmp_path / "plain", crd=False) as (fake, url):
        fake.forbid.add(("create", "pods/exec"))
        team = _team(teamctl, url, secret="claude-key")
        done = teamctl.run("doctor", str(team), "--host", "k8s", "--json")
        assert done.returncode == 1, done.stderr
        report = json.loads(done.stdout)
        assert (report["reachable"], report["mode"]) == (True, "pod")
        checks = {c["check"]: c for c in report["checks"]}
        assert "create persistentvolumeclaims" in checks
        failed = {name for name, c in checks.items() if not c["ok"]}
        assert failed == {"create pods/exec", "secret claude-key"}, checks
        assert "grant the Role" in checks["create pods/exec"]["detail"]
        assert "create secret generic claude-key" in checks["secret claude-key"]["detail"]


def test_doctor_host_of_an_unreachable_api_server_is_typed(teamctl: Teamctl) -> None:
    """Nothing listens at the kubeconfig's server: not reachable, ``kube_unreachable`` (retryable),
    exit 1, the JSON document still on stdout."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    team = _team(teamctl, f"http://127.0.0.1:{port}")
    done = teamctl.run("doctor", str(team), "--host", "k8s", "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert (report["reachable"], report["error"]["code"], report["error"]["retryable"]) == \
        (False, "kube_unreachable", True)


def test_doctor_host_with_a_template_checks_its_rbac_verb_and_that_it_renders(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``template = ...``: the Role's ``get sandboxtemplates`` is asked, and the template is
    read and rendered (its agent container's image named); a template not there is a failed
    row naming ``kubectl get sandboxtemplates``, exit 1."""
    from kubernetes import client, config

    fixture = Path(__file__).resolve().parents[1] / "data" / "k8s" / \
        "sandboxtemplate_example.yaml"
    with fake_cluster(tmp_path / "cluster") as (fake, url):
        api = config.new_client_from_config(str(kubeconfig(teamctl.workdir / "admin", url)))
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "extensions.agents.x-k8s.io", "v1beta1", NS, "sandboxtemplates",
            yaml.safe_load(fixture.read_text()))
        done = teamctl.run("doctor", str(_team(teamctl, url, template="gpu-agent")), "--host",
                           "k8s", "--json")
        assert done.returncode == 0, done.stderr
        checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
        assert checks["get sandboxtemplates.extensions.agents.x-k8s.io"]["ok"], checks
        assert checks["sandboxtemplate gpu-agent"]["detail"] == \
            "present; the agent's container gets image ghcr.io/example/agent:1"
        missing = teamctl.run("doctor", str(_team(teamctl, url, template="nope")), "--host",
                              "k8s", "--json")
        assert missing.returncode == 1, missing.stderr
        row = {c["check"]: c for c in json.loads(missing.stdout)["checks"]}["sandboxtemplate nope"]
        assert not row["ok"] and "kubectl get sandboxtemplates -n agents" in row["detail"], row
        assert fake.objects.keys() == {("sandboxtemplates", NS, "gpu-agent")}


def test_doctor_host_asks_for_portforward_only_where_an_opencode_member_runs(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """An OpenCode member on the host: ``create pods/portforward`` (its ``serve`` is reached
    through a port-forward) is asked, denied here: a failed row naming the Role, exit 1. A
    team with no OpenCode there is not asked it (its Role need not grant it)."""
    with fake_cluster(tmp_path / "cluster") as (fake, url):
        fake.forbid.add(("create", "pods/portforward"))
        table = {"kind": "kubernetes", "namespace": NS, "image": "ghcr.io/example/agent:1",
                 "kubeconfig": str(kubeconfig(teamctl.workdir / "kubeconfig", url))}
        opencode = {"name": "oc", "runtime": "opencode", "host": "k8s",
                    "model": "openrouter/moonshotai/kimi-k2.6"}
        team = teamctl.write_team("web", [opencode], hosts={"k8s": table}, login="isolated")
        done = teamctl.run("doctor", str(team), "--host", "k8s", "--json")
        assert done.returncode == 1, done.stderr
        checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
        assert {n for n, c in checks.items() if not c["ok"]} == {"create pods/portforward"}
        assert checks["get pods/portforward"]["ok"]
        assert "grant the Role" in checks["create pods/portforward"]["detail"]
        plain = teamctl.run("doctor", str(_team(teamctl, url)), "--host", "k8s", "--json")
        assert plain.returncode == 0, plain.stderr
        assert not [c for c in json.loads(plain.stdout)["checks"] if "portforward" in c["check"]]
