"""``teamctl doctor --host NAME`` for a Kubernetes host (docs/scaling.md, "On Kubernetes"): the
API server answers (discovery, timed), which objects a member would get (agent-sandbox's
``Sandbox``, or the Pod + PVC fallback), each verb teamctl needs on them as RBAC answers it
(a ``SelfSubjectAccessReview`` per verb: asked, never tried — a try of ``create`` would make a
pod), the Secret named by the team file (present, its key names; never a value), and the
SandboxTemplate it names (present, and a member's Sandbox renders from it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.contracts import HostUnavailable
from runtimes.hosts.kubernetes.host import REQUEST_TIMEOUT
from runtimes.hosts.kubernetes.manifests import SANDBOX_GROUP, SANDBOX_PLURAL
from runtimes.hosts.kubernetes.template import (
    TEMPLATE_GROUP,
    TEMPLATE_PLURAL,
    TemplateError,
    no_fallback,
    sandbox_from,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from runtimes.hosts.kubernetes.host import KubernetesHost, Mode

__all__ = ["Check", "Findings", "inspect", "needed"]

_Verbs = list[tuple[str, str, tuple[str, ...]]]
_OBJECTS: dict[str, _Verbs] = {
    "sandbox": [(SANDBOX_GROUP, SANDBOX_PLURAL, ("get", "list", "create", "patch", "delete")),
                ("", "pods", ("get",))],
    "pod": [("", "pods", ("get", "list", "create", "delete")),
            ("", "persistentvolumeclaims", ("get", "list", "create", "delete"))]}
_EXEC = ("", "pods/exec", ("create", "get"))  # the WebSocket upgrade is a GET
_TEMPLATE = (TEMPLATE_GROUP, TEMPLATE_PLURAL, ("get",))  # with ``template``, in sandbox mode
_FORWARD = ("", "pods/portforward", ("create", "get"))  # OpenCode's serve (kube_forward.py)


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


def needed(mode: Mode, *, template: bool = False,
           forward: bool = False) -> list[tuple[str, str, str]]:
    """(verb, API group, resource) teamctl uses in ``mode`` (and with a ``template``; with
    ``forward``, a member reached through a port-forward: OpenCode): the Role in
    docs/scaling.md."""
    extra = [_TEMPLATE] if template and mode == "sandbox" else []
    return [(verb, group, resource) for group, resource, verbs in [*_OBJECTS[mode], *extra,
                                                                    _EXEC]
            for verb in verbs] + [(verb, "", _FORWARD[1]) for verb in _FORWARD[2] if forward]


async def inspect(host: KubernetesHost, secret: str | None, *,
                  forward: bool = False) -> Findings:
    """Discovery (the API's round trip), then RBAC per verb (``pods/portforward`` too with
    ``forward``: an OpenCode member there), then the Secret. A typed ``HostUnavailable`` when
    the API server cannot be asked at all."""
    found = Findings()
    started = time.monotonic()
    found.mode = await host.discover()
    found.seconds = round(time.monotonic() - started, 3)
    found.server = str(getattr(getattr(host._api, "configuration", None), "host", "") or "")
    for verb, group, resource in needed(found.mode, template=host.plan.template is not None,
                                        forward=forward):
        found.checks.append(await _review(host, verb, group, resource))
    if secret is not None:
        found.checks.append(await _secret(host, secret))
    if host.plan.template is not None:
        found.checks.append(await _template(host, found.mode))
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
    what = f"secret {name}"
    try:
        found: Any = await host._call("get", "secrets", host._core_call("GET", "secrets", name))
    except HostUnavailable as exc:
        if exc.code == "kube_forbidden":  # members never read it: the pod's envFrom does
            return Check(what, True, "not readable by this login (teamctl does not need to: "
                         "the pod gets it by envFrom); kubectl get secret checks it")
        raise
    if found is None:
        return Check(what, False, f"missing in namespace {host.namespace}: kubectl -n "
                     f"{host.namespace} create secret generic {name} "
                     "--from-literal=ANTHROPIC_API_KEY=...")
    keys = sorted((found.get("data") or {}).keys())
    return Check(what, bool(keys), f"present, keys: {', '.join(keys)}" if keys else
                 "present but empty: the member would start without its API key")


async def _template(host: KubernetesHost, mode: Mode) -> Check:
    """The SandboxTemplate named: there, readable, and a member's Sandbox renders from it."""
    what = f"sandboxtemplate {host.plan.template}"
    if mode == "pod":
        return Check(what, False, str(no_fallback(host.plan)))
    try:
        found = await host.read_template()
    except HostUnavailable as exc:
        if exc.code == "kube_forbidden":
            return Check(what, False, "not readable by this login — grant the Role in "
                         "docs/scaling.md (get on sandboxtemplates.extensions.agents.x-k8s.io)")
        raise
    try:
        box = sandbox_from(host.plan, found)
    except TemplateError as exc:
        return Check(what, False, str(exc))
    [agent] = [c for c in box["spec"]["podTemplate"]["spec"]["containers"]
               if c["name"] == "agent"]
    return Check(what, True, f"present; the agent's container gets image {agent['image']}")


async def checks(host: KubernetesHost, found: dict[str, Any], *, commands: Mapping[str, str],
                 forward: bool = False) -> None:
    """The wing's ``check`` for a pod's host: ``inspect`` with the Secret the team file names,
    as a HostReport's fields (the CLIs are the image's: ``commands`` is not asked here)."""
    del commands
    found.update(kind="kubernetes", namespace=host.namespace, reachable=False,
                 destination=host.context or "the kubeconfig's current context")
    seen = await inspect(host, host.plan.secret, forward=forward)
    found.update(reachable=True, mode=seen.mode, seconds=seen.seconds,
                 destination=seen.server or found["destination"],
                 checks=[{"check": c.check, "ok": c.ok, "detail": c.detail}
                         for c in seen.checks])
