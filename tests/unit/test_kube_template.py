"""A member's Sandbox rendered from an agent-sandbox SandboxTemplate
(runtimes/hosts/kubernetes/template.py):
the template's pod settings kept, the team file's keys over them, teamctl's essentials over
both — and the result still a Sandbox the published CRD and Kubernetes' PodSpec take
(tests/data/k8s; the same strict validation as tests/unit/test_kube_manifests.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.ceilings import Ceiling
from runtimes.hosts.kubernetes.manifests import HOME, LABEL_MEMBER, LABEL_OWNER, PodPlan, sandbox
from runtimes.hosts.kubernetes.template import TemplateError, agent_index, sandbox_from
from tests.support.k8s_schemas import core_errors, crd_schema, sandbox_errors, schema_errors

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
# the team file names only what it must: the template gives the image and the runtime class
_PLAN = PodPlan(team="web", member="builder", namespace="agents", image=None,
                secret="claude-key", template="gpu-agent", home="h0me")


def _template_schema() -> dict[str, Any]:
    return crd_schema("extensions.agents.x-k8s.io_sandboxtemplates.yaml")


def _template() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DATA / "sandboxtemplate_example.yaml").read_text())
    return loaded


def _agent(document: dict[str, Any]) -> dict[str, Any]:
    [agent] = [c for c in document["spec"]["podTemplate"]["spec"]["containers"]
               if c["name"] == "agent"]
    return agent


def test_the_template_fixture_validates_against_the_sandboxtemplate_crd() -> None:
    """The fixture is a SandboxTemplate the v1beta1 CRD (served, stored) and PodSpec take — and
    that check can fail (a v1alpha1-only field, a misspelt pod field)."""
    template = _template()
    assert schema_errors(template, _template_schema()) == []
    assert core_errors(template["spec"]["podTemplate"]["spec"], "io.k8s.api.core.v1.PodSpec") == []
    broken = copy.deepcopy(template)
    broken["spec"]["replicas"] = 1
    broken["spec"]["podTemplate"]["spec"]["nodeSelektor"] = {}
    assert len(schema_errors(broken, _template_schema())) == 2


def test_a_sandbox_from_a_template_validates_against_the_crd_and_podspec() -> None:
    """The rendered Sandbox (running and suspended) is one the Sandbox CRD and Kubernetes take:
    the template's claim-only fields (networkPolicyManagement…) are not carried into it."""
    assert sandbox_errors(sandbox_from(_PLAN, _template())) == []
    suspended = sandbox_from(_PLAN, _template(), running=False)
    assert sandbox_errors(suspended) == [] and suspended["spec"]["operatingMode"] == "Suspended"
    assert "networkPolicyManagement" not in sandbox_from(_PLAN, _template())["spec"]


def test_the_templates_pod_settings_are_kept() -> None:
    """What a cluster admin put in the template reaches the member's pod: node selector,
    tolerations, affinity, pod security context, pull secrets, runtime class, its service
    account, the sidecar, the agent container's resources, ports, env and other mounts, its
    image (the team file names none), its other volume claims, its pod labels."""
    template = _template()
    theirs = template["spec"]["podTemplate"]["spec"]
    document = sandbox_from(_PLAN, template)
    spec = document["spec"]["podTemplate"]["spec"]
    for key in ("nodeSelector", "tolerations", "affinity", "securityContext",
                "imagePullSecrets", "runtimeClassName", "serviceAccountName"):
        assert spec[key] == theirs[key], key
    assert [c["name"] for c in spec["containers"]] == ["log-shipper", "agent"]
    assert spec["containers"][0] == theirs["containers"][0]
    agent = _agent(document)
    assert agent["image"] == "ghcr.io/example/template-agent:2"
    assert agent["resources"] == theirs["containers"][1]["resources"]
    assert agent["ports"] == [{"name": "http", "containerPort": 8888}]
    assert {"name": "PIP_INDEX_URL", "value": "https://pypi.internal.example/simple"} in agent[
        "env"]
    assert {"name": "cache", "mountPath": "/cache"} in agent["volumeMounts"]
    assert agent["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert [v["name"] for v in spec["volumes"]] == ["cache", "scratch"]
    assert [c["metadata"]["name"] for c in document["spec"]["volumeClaimTemplates"]] == [
        "work", "datasets"]
    assert document["spec"]["podTemplate"]["metadata"]["labels"]["cost-center"] == "research"
    assert document["metadata"]["annotations"]["agents.x-k8s.io/sandbox-template-ref"] == \
        "gpu-agent"


def test_teamctls_essentials_win_over_the_template() -> None:
    """Whatever the template says, the agent's container sleeps (no args, no probes of a
    server it no longer runs), works in ``workdir`` on the ``work`` volume with its home there
    (a template mount or volume in their way dropped; ``HOME`` teamctl's), takes the Secret
    last (its keys win), restarts ``Always``, mounts no service-account token unless the team
    file names an account, and carries teamctl's ownership labels."""
    own = sandbox(PodPlan(team="web", member="builder", namespace="agents", image="x",
                          secret="claude-key", home="h0me"))
    ours = own["spec"]["podTemplate"]["spec"]
    document = sandbox_from(_PLAN, _template())
    spec, agent = document["spec"]["podTemplate"]["spec"], _agent(document)
    assert agent["command"] == ours["containers"][0]["command"]
    assert not {"args", "readinessProbe", "livenessProbe"} & set(agent)
    assert agent["workingDir"] == "/workspace"
    assert agent["volumeMounts"][:2] == ours["containers"][0]["volumeMounts"]
    assert [m["mountPath"] for m in agent["volumeMounts"]] == ["/workspace", HOME, "/cache"]
    assert [e for e in agent["env"] if e["name"] == "HOME"] == [{"name": "HOME", "value": HOME}]
    assert agent["envFrom"] == [{"configMapRef": {"name": "agent-settings"}},
                                {"secretRef": {"name": "claude-key"}}]
    assert agent["securityContext"]["allowPrivilegeEscalation"] is False
    assert (spec["restartPolicy"], spec["automountServiceAccountToken"]) == ("Always", False)
    work = document["spec"]["volumeClaimTemplates"][0]
    assert work == own["spec"]["volumeClaimTemplates"][0]  # the template's `work` claim replaced
    assert document["metadata"]["labels"] == own["metadata"]["labels"]
    labels = document["spec"]["podTemplate"]["metadata"]["labels"]
    assert (labels[LABEL_MEMBER], labels[LABEL_OWNER]) == ("builder", "teamctl")


def test_the_team_files_keys_win_over_the_template() -> None:
    """A key the team file sets is the one used: image, runtime class, service account (and
    then its token), workdir, storage."""
    plan = PodPlan(team="web", member="builder", namespace="agents", image="ghcr.io/me/mine:1",
                   runtime_class="gvisor", service_account="agent", workdir="/src",
                   storage="50Gi", storage_class="fast", template="gpu-agent")
    document = sandbox_from(plan, _template())
    spec, agent = document["spec"]["podTemplate"]["spec"], _agent(document)
    assert agent["image"] == "ghcr.io/me/mine:1"
    assert (spec["runtimeClassName"], spec["serviceAccountName"]) == ("gvisor", "agent")
    assert spec["automountServiceAccountToken"] is True
    assert (agent["workingDir"], agent["volumeMounts"][0]["mountPath"]) == ("/src", "/src")
    assert {"name": "scratch", "mountPath": "/workspace"} in agent["volumeMounts"]  # not ours
    work = document["spec"]["volumeClaimTemplates"][0]["spec"]
    assert (work["resources"]["requests"]["storage"], work["storageClassName"]) == (
        "50Gi", "fast")
    assert sandbox_errors(document) == []


def test_the_agents_container_is_the_one_named_agent_else_the_first() -> None:
    """``agent`` by name wherever it is; without one, the first container (renamed
    ``agent``, the exec's target), the others untouched."""
    assert agent_index([{"name": "side"}, {"name": "agent"}]) == 1
    assert agent_index([{"name": "runtime"}, {"name": "side"}]) == 0
    template = _template()
    containers = template["spec"]["podTemplate"]["spec"]["containers"]
    containers.reverse()
    containers[0]["name"] = "python-runtime"
    spec = sandbox_from(_PLAN, template)["spec"]["podTemplate"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["agent", "log-shipper"]
    assert spec["containers"][0]["image"] == "ghcr.io/example/template-agent:2"


def test_a_privileged_template_container_keeps_its_escalation() -> None:
    """teamctl's ``allowPrivilegeEscalation: false`` is a default: beside ``privileged`` or
    ``SYS_ADMIN`` (which the API server refuses with it) the template's context is kept as is."""
    template = _template()
    agent = template["spec"]["podTemplate"]["spec"]["containers"][1]
    agent["securityContext"] = {"privileged": True}
    assert _agent(sandbox_from(_PLAN, template))["securityContext"] == {"privileged": True}


@pytest.mark.parametrize(("change", "code"), [
    (lambda t: t["spec"]["podTemplate"]["spec"].update(containers=[]), "kube_template_invalid"),
    (lambda t: t["spec"]["podTemplate"]["spec"]["containers"][1].pop("image"),
     "kube_template_invalid"),
])
def test_a_template_that_cannot_make_the_pod_is_refused(change: Any, code: str) -> None:
    """No containers, or no image in the agent's container nor in the team file: a typed
    refusal saying what to fix, never a Sandbox the API server would refuse later."""
    template = _template()
    change(template)
    with pytest.raises(TemplateError) as info:
        sandbox_from(_PLAN, template)
    assert info.value.code == code and "gpu-agent" in str(info.value)


def test_a_missing_template_names_the_command_that_lists_them() -> None:
    """The API said 404: ``kube_template_missing``, naming ``kubectl get sandboxtemplates``."""
    with pytest.raises(TemplateError) as info:
        sandbox_from(_PLAN, None)
    assert info.value.code == "kube_template_missing"
    assert "kubectl get sandboxtemplates -n agents" in str(info.value)


def test_a_member_s_ceiling_wins_over_the_template_s_resources_key_by_key() -> None:
    """The template's resources stay where the ceiling names nothing (a GPU); the ceiling's
    memory limit and CPU request replace the template's, and the template's memory request
    (4Gi) above the ceiling's limit (1Gi) is lowered to it: the API server takes no request
    above its limit."""
    plan = PodPlan(team="web", member="builder", namespace="agents", image=None,
                   template="gpu-agent", ceiling=Ceiling(memory_max=1 << 30, cpu_weight=200))
    theirs = _template()["spec"]["podTemplate"]["spec"]["containers"][1]["resources"]
    document = sandbox_from(plan, _template())
    got = _agent(document)["resources"]
    assert got["limits"] == {**theirs.get("limits", {}), "memory": str(1 << 30)}
    assert got["requests"] == {**theirs.get("requests", {}), "cpu": "2000m",
                               "memory": str(1 << 30)}
    assert sandbox_errors(document) == []
