"""The objects teamctl asks a cluster for are ones that cluster takes: each rendered manifest is
validated against the published agent-sandbox CRD and Kubernetes release-1.36's OpenAPI
definitions (tests/data/k8s, fetched, not hand-written) — strictly: an unknown field is an error,
as the API server's strict field validation (``kubectl``'s default) reports it."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from runtimes.kube_manifests import (
    LABEL_MEMBER,
    LABEL_TEAM,
    PodPlan,
    object_name,
    pod,
    pvc,
    sandbox,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_PLAN = PodPlan(team="web", member="builder", namespace="agents", image="ghcr.io/x/agent:1",
                storage="20Gi", storage_class="fast", runtime_class="gvisor",
                service_account="agent", secret="claude-key")


def _strict(schema: Any) -> Any:
    """Every object schema that lists its properties refuses others (strict field validation);
    the ``x-kubernetes-preserve-unknown-fields`` ones and maps keep theirs."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node and \
                    not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return schema


@cache
def _definitions() -> dict[str, Any]:
    loaded = json.loads((DATA / "core_v1_pod_pvc.json").read_text())
    return dict(_strict(loaded["definitions"]))


@cache
@cache
def crd_schema(file: str) -> dict[str, Any]:
    """The v1beta1 schema (served and stored) of one of agent-sandbox's CRDs, strict (read
    once per process, with libyaml: the pure-Python loader took seconds per read)."""
    crd = yaml.load((DATA / file).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    assert version["served"] and version["storage"]
    return dict(_strict(version["schema"]["openAPIV3Schema"]))


def _sandbox_schema() -> dict[str, Any]:
    return crd_schema("agents.x-k8s.io_sandboxes.yaml")


def _errors(document: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(document)]


def _core(document: dict[str, Any], definition: str) -> list[str]:
    return _errors(document, {"$ref": f"#/definitions/{definition}",
                              "definitions": _definitions()})


def _sandbox_errors(document: dict[str, Any]) -> list[str]:
    """The CRD's schema, then the parts it leaves open checked as the core types they are:
    the metadata (ObjectMeta) and the pod template's spec (PodSpec)."""
    return (_errors(document, _sandbox_schema())
            + _core(document["metadata"], _META)
            + _core(document["spec"]["podTemplate"]["spec"], "io.k8s.api.core.v1.PodSpec"))


def test_the_sandbox_validates_against_the_agent_sandbox_crd() -> None:
    """The member's Sandbox is one the v1beta1 CRD (served and stored) and Kubernetes take."""
    document = sandbox(_PLAN)
    assert _sandbox_errors(document) == []
    assert document["apiVersion"] == "agents.x-k8s.io/v1beta1"
    assert document["spec"]["operatingMode"] == "Running"
    assert _sandbox_errors(sandbox(_PLAN, running=False)) == []


def test_the_fallback_pod_and_claim_validate_against_core_v1() -> None:
    """Where the CRD is absent: a Pod and its PersistentVolumeClaim of core/v1."""
    assert _core(pod(_PLAN), "io.k8s.api.core.v1.Pod") == []
    assert _core(pvc(_PLAN), "io.k8s.api.core.v1.PersistentVolumeClaim") == []
    minimal = PodPlan(team="w", member="a", namespace="default", image="agent")
    assert _core(pod(minimal), "io.k8s.api.core.v1.Pod") == []
    assert _sandbox_errors(sandbox(minimal)) == []


def test_the_validation_can_fail() -> None:
    """The checks above can fail: a misspelt field, a wrong type, a missing image, an unknown
    operating mode are each reported."""
    broken = copy.deepcopy(pod(_PLAN))
    broken["spec"]["runtimeClasName"] = "gvisor"
    broken["spec"]["containers"][0]["ports"] = "80"
    del broken["spec"]["containers"][0]["name"]
    assert len(_core(broken, "io.k8s.api.core.v1.Pod")) == 3
    wrong = copy.deepcopy(sandbox(_PLAN))
    wrong["spec"]["operatingMode"] = "Paused"
    wrong["spec"]["replicas"] = 0  # v1alpha1's field, gone from v1beta1
    assert len(_sandbox_errors(wrong)) == 2


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
    assert _sandbox_errors(sandbox(odd)) == []


@pytest.mark.parametrize(("team", "member"), [("a", "b"), ("A_B", "c-d"), ("9" * 64, "x" * 64)])
def test_names_are_dns_labels(team: str, member: str) -> None:
    """Every name is an RFC 1123 label Kubernetes takes for a Pod, a Sandbox and a claim."""
    name = object_name(team, member)
    assert _core({"name": name, "generateName": ""}, _META) == []
    assert len(f"work-{name}") <= 63
    assert re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name), name
