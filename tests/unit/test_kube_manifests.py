"""The objects teamctl asks a cluster for are ones that cluster takes: each rendered manifest is
validated against the published agent-sandbox CRD and Kubernetes release-1.36's OpenAPI
definitions (tests/data/k8s, fetched, not hand-written) — strictly: an unknown field is an error,
as the API server's strict field validation (``kubectl``'s default) reports it."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from orchestrator.ceilings import Ceiling
from runtimes.hosts.kubernetes.manifests import (
    LABEL_MEMBER,
    LABEL_TEAM,
    PodPlan,
    object_name,
    pod,
    pvc,
    resources,
    sandbox,
)
from tests.support.k8s_schemas import _META, core_errors, sandbox_errors

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
_PLAN = PodPlan(team="web", member="builder", namespace="agents", image="ghcr.io/x/agent:1",
                storage="20Gi", storage_class="fast", runtime_class="gvisor",
                service_account="agent", secret="claude-key")


def test_the_sandbox_validates_against_the_agent_sandbox_crd() -> None:
    """The member's Sandbox is one the v1beta1 CRD (served and stored) and Kubernetes take."""
    document = sandbox(_PLAN)
    assert sandbox_errors(document) == []
    assert document["apiVersion"] == "agents.x-k8s.io/v1beta1"
    assert document["spec"]["operatingMode"] == "Running"
    assert sandbox_errors(sandbox(_PLAN, running=False)) == []


def test_the_fallback_pod_and_claim_validate_against_core_v1() -> None:
    """Where the CRD is absent: a Pod and its PersistentVolumeClaim of core/v1."""
    assert core_errors(pod(_PLAN), "io.k8s.api.core.v1.Pod") == []
    assert core_errors(pvc(_PLAN), "io.k8s.api.core.v1.PersistentVolumeClaim") == []
    minimal = PodPlan(team="w", member="a", namespace="default", image="agent")
    assert core_errors(pod(minimal), "io.k8s.api.core.v1.Pod") == []
    assert sandbox_errors(sandbox(minimal)) == []


def test_the_validation_can_fail() -> None:
    """The checks above can fail: a misspelt field, a wrong type, a missing image, an unknown
    operating mode are each reported."""
    broken = copy.deepcopy(pod(_PLAN))
    broken["spec"]["runtimeClasName"] = "gvisor"
    broken["spec"]["containers"][0]["ports"] = "80"
    del broken["spec"]["containers"][0]["name"]
    assert len(core_errors(broken, "io.k8s.api.core.v1.Pod")) == 3
    wrong = copy.deepcopy(sandbox(_PLAN))
    wrong["spec"]["operatingMode"] = "Paused"
    wrong["spec"]["replicas"] = 0  # v1alpha1's field, gone from v1beta1
    assert len(sandbox_errors(wrong)) == 2


def test_credentials_are_a_secret_reference_and_nothing_else() -> None:
    """The member's API key reaches the pod from the Secret by name: no value in the
    manifest; the pod mounts no service-account token unless one is named."""
    container = pod(_PLAN)["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "claude-key"}}]
    assert [e["name"] for e in container["env"]] == ["HOME"]
    bare = pod(PodPlan(team="w", member="a", namespace="default", image="agent"))["spec"]
    assert bare["automountServiceAccountToken"] is False and "envFrom" not in bare[
        "containers"][0]


def test_objects_are_named_and_labelled_for_their_owner() -> None:
    """Named after team and member (a DNS label, distinct for names that lower-case alike),
    labelled so orphans are found by label, the exact names in annotations."""
    document = sandbox(_PLAN)
    assert document["metadata"]["labels"] == {LABEL_TEAM: "web", LABEL_MEMBER: "builder",
                                              "app.kubernetes.io/managed-by": "teamctl"}
    assert document["metadata"]["annotations"] == {LABEL_TEAM: "web", LABEL_MEMBER: "builder"}
    assert object_name("Web", "a") != object_name("web", "a")
    long = object_name("t" * 64, "m_" * 32)
    assert len(long) <= 63 and long == long.lower()
    odd = PodPlan(team="t_", member="-m", namespace="default", image="agent")
    assert sandbox_errors(sandbox(odd)) == []


@pytest.mark.parametrize(("team", "member"), [("a", "b"), ("A_B", "c-d"), ("9" * 64, "x" * 64)])
def test_names_are_dns_labels(team: str, member: str) -> None:
    """Every name is an RFC 1123 label Kubernetes takes for a Pod, a Sandbox and a claim."""
    name = object_name(team, member)
    assert core_errors({"name": name, "generateName": ""}, _META) == []
    assert len(f"work-{name}") <= 63
    assert re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name), name


def test_a_member_s_ceiling_is_its_container_s_resources() -> None:
    """memory_max the memory limit, memory_high the memory request, cpu_weight the CPU
    request (weight × 10 millicores: 100 is one CPU); quantities Kubernetes takes, in the
    Sandbox and the fallback Pod alike; no ceiling, no resources."""
    ceiling = Ceiling(memory_max=2 << 30, memory_high=3 << 29, cpu_weight=50)
    assert resources(ceiling) == {"limits": {"memory": str(2 << 30)},
                                  "requests": {"memory": str(3 << 29), "cpu": "500m"}}
    assert resources(Ceiling(memory_max=1 << 30)) == {"limits": {"memory": str(1 << 30)}}
    assert resources(None) == {}
    plan = PodPlan(team="web", member="builder", namespace="agents", image="agent",
                   ceiling=ceiling)
    [container] = sandbox(plan)["spec"]["podTemplate"]["spec"]["containers"]
    assert container["resources"] == resources(ceiling)
    assert sandbox_errors(sandbox(plan)) == []
    assert core_errors(pod(plan), "io.k8s.api.core.v1.Pod") == []
    assert "resources" not in pod(_PLAN)["spec"]["containers"][0]
