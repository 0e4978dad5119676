"""The published schemas a rendered Kubernetes manifest is checked against (tests/data/k8s:
agent-sandbox's CRDs and Kubernetes release-1.36's OpenAPI definitions, fetched, not
hand-written), strictly: an unknown field is an error, as the API server's strict field
validation reports it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


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
def crd_schema(file: str) -> dict[str, Any]:
    """The v1beta1 schema (served and stored) of one of agent-sandbox's CRDs, strict (read
    once per process, with libyaml: the pure-Python loader took seconds per read)."""
    crd = yaml.load((DATA / file).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    assert version["served"] and version["storage"]
    return dict(_strict(version["schema"]["openAPIV3Schema"]))


def _sandbox_schema() -> dict[str, Any]:
    return crd_schema("agents.x-k8s.io_sandboxes.yaml")


def schema_errors(document: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(document)]


def core_errors(document: dict[str, Any], definition: str) -> list[str]:
    return schema_errors(document, {"$ref": f"#/definitions/{definition}",
                              "definitions": _definitions()})


def sandbox_errors(document: dict[str, Any]) -> list[str]:
    """The CRD's schema, then the parts it leaves open checked as the core types they are:
    the metadata (ObjectMeta) and the pod template's spec (PodSpec)."""
    return (schema_errors(document, _sandbox_schema())
            + core_errors(document["metadata"], _META)
            + core_errors(document["spec"]["podTemplate"]["spec"], "io.k8s.api.core.v1.PodSpec"))
