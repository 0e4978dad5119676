"""``teamctl doctor --host NAME`` for a Kubernetes host (docs/scaling.md, "On Kubernetes"): the
API server answers (discovery, timed), which objects a member would get (agent-sandbox's
``Sandbox``, or the Pod + PVC fallback), each verb teamctl needs on them as RBAC answers it
(a ``SelfSubjectAccessReview`` per verb: asked, never tried — a try of ``create`` would make a
pod), and the Secret named by the team file (present, its key names; never a value).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.contracts import HostUnavailable
from runtimes.kube_host import REQUEST_TIMEOUT
from runtimes.kube_manifests import SANDBOX_GROUP, SANDBOX_PLURAL

if TYPE_CHECKING:
    from runtimes.kube_host import KubernetesHost, Mode

__all__ = ["Check", "Findings", "inspect", "needed"]

_Verbs = list[tuple[str, str, tuple[str, ...]]]
_OBJECTS: dict[str, _Verbs] = {
    "sandbox": [(SANDBOX_GROUP, SANDBOX_PLURAL, ("get", "list", "create", "patch", "delete")),
                ("", "pods", ("get",))],
    "pod": [("", "pods", ("get", "list", "create", "delete")),
            ("", "persistentvolumeclaims", ("get", "list", "create", "delete"))]}
_EXEC = ("", "pods/exec", ("create", "get"))  # the WebSocket upgrade is a GET


@dataclass
class Check:
    check: str
    ok: bool
    detail: str


@dataclass
class Findings:
    mode: Mode | None = None
    seconds: float | None = None
    server: str = ""
    checks: list[Check] = field(default_factory=list)


def needed(mode: Mode) -> list[tuple[str, str, str]]:
    """(verb, API group, resource) teamctl uses in ``mode``: the Role in docs/scaling.md."""
    return [(verb, group, resource) for group, resource, verbs in [*_OBJECTS[mode], _EXEC]
            for verb in verbs]


async def inspect(host: KubernetesHost, secret: str | None) -> Findings:
    """Discovery (the API's round trip), then RBAC per verb, then the Secret. A typed
    ``HostUnavailable`` when the API server cannot be asked at all."""
    found = Findings()
    started = time.monotonic()
    found.mode = await host.discover()
    found.seconds = round(time.monotonic() - started, 3)
    found.server = str(getattr(getattr(host._api, "configuration", None), "host", "") or "")
    for verb, group, resource in needed(found.mode):
        found.checks.append(await _review(host, verb, group, resource))
    if secret is not None:
        found.checks.append(await _secret(host, secret))
    return found


async def _review(host: KubernetesHost, verb: str, group: str, resource: str) -> Check:
    from kubernetes import client

    plural, _, sub = resource.partition("/")
    body: Any = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": host.namespace, "verb": verb,
                                            "group": group, "resource": plural,
                                            **({"subresource": sub} if sub else {})}}}
    named = f"{resource}.{group}" if group else resource
    answer: Any = await host._call("create", "selfsubjectaccessreviews", lambda api: client.
                                   AuthorizationV1Api(api).create_self_subject_access_review(
                                       body, _request_timeout=REQUEST_TIMEOUT))
    allowed = bool(answer.status and answer.status.allowed)
    reason = (answer.status.reason if answer.status else "") or ""
    return Check(f"{verb} {named}", allowed, "allowed" if allowed else
                 f"denied{': ' + reason if reason else ''} — grant the Role in docs/scaling.md")


async def _secret(host: KubernetesHost, name: str) -> Check:
    from kubernetes import client

    what = f"secret {name}"
    try:
        found: Any = await host._call("get", "secrets", lambda api: client.CoreV1Api(
            api).read_namespaced_secret(name, host.namespace, _request_timeout=REQUEST_TIMEOUT))
    except HostUnavailable as exc:
        if exc.code == "kube_forbidden":  # members never read it: the pod's envFrom does
            return Check(what, True, "not readable by this login (teamctl does not need to: "
                         "the pod gets it by envFrom); kubectl get secret checks it")
        raise
    if found is None:
        return Check(what, False, f"missing in namespace {host.namespace}: kubectl -n "
                     f"{host.namespace} create secret generic {name} "
                     "--from-literal=ANTHROPIC_API_KEY=...")
    keys = sorted((found.data or {}).keys())
    return Check(what, bool(keys), f"present, keys: {', '.join(keys)}" if keys else
                 "present but empty: the member would start without its API key")
