"""A member's Sandbox rendered from an agent-sandbox ``SandboxTemplate`` (``template = "NAME"``
in a ``[hosts.NAME] kind = "kubernetes"`` table; docs/scaling.md, "From a SandboxTemplate").

teamctl does not claim: a v1beta1 ``SandboxClaim`` reaches a template only through a
``SandboxWarmPool``, and a claim bringing its own volume claims starts cold anyway. It reads the
template (``runtimes/hosts/kubernetes/host.py``) and renders the member's own ``Sandbox`` from its
blueprint: the pod's settings are the template's (node selector, tolerations, affinity, the
container's resources, runtime class, security contexts, pull secrets, other containers,
volumes, env), the team file's keys win over them (``image``, ``runtime_class``,
``service_account``, ``secret``, ``workdir``, ``storage``), and teamctl's essentials are laid
over both (the sleeping main process, the ``work`` volume at ``workdir`` and the home, ``HOME``,
restart ``Always``, no service-account token unless the team file names an account, the
ownership labels). The agent's container is the template's one named ``agent``, else its first.
"""

from __future__ import annotations

import copy
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from runtimes.hosts.kubernetes.manifests import CONTAINER, HOME, VOLUME, sandbox

if TYPE_CHECKING:
    from collections.abc import Mapping

    from runtimes.hosts.kubernetes.manifests import PodPlan

__all__ = ["TEMPLATE_GROUP", "TEMPLATE_PLURAL", "TEMPLATE_RESOURCE", "TEMPLATE_VERSION",
           "TemplateError", "agent_index", "no_fallback", "sandbox_from"]

TEMPLATE_GROUP = "extensions.agents.x-k8s.io"
TEMPLATE_VERSION = "v1beta1"
TEMPLATE_PLURAL = "sandboxtemplates"
TEMPLATE_RESOURCE = f"{TEMPLATE_PLURAL}.{TEMPLATE_GROUP}"
# the controller's own note of a Sandbox's template (read by its metrics collector only)
TEMPLATE_ANNOTATION = "agents.x-k8s.io/sandbox-template-ref"
# they probe the template's server, which the sleeping main process replaces: a liveness probe
# would restart the container (and kill the member's runtime) over and over
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


class TemplateError(Exception):
    """The template cannot make the member's pod (``code``: ``kube_template_*``; fatal)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def no_fallback(plan: PodPlan) -> TemplateError:
    """Where agent-sandbox's CRDs are absent there is no SandboxTemplate either."""
    return TemplateError("kube_template_unsupported",
                         f"template = {plan.template!r} needs agent-sandbox, and this cluster "
                         "does not serve its API (no agents.x-k8s.io/v1beta1: the Pod + PVC "
                         "fallback); install agent-sandbox with its extensions, or remove "
                         "template and set image")


def agent_index(containers: list[dict[str, Any]]) -> int:
    """Which of the template's containers is the agent's: the one named ``agent``, else the
    first."""
    return next((i for i, c in enumerate(containers) if c.get("name") == CONTAINER), 0)


def sandbox_from(plan: PodPlan, template: Mapping[str, Any] | None, *,
                 running: bool = True) -> dict[str, Any]:
    """The member's Sandbox: the template's blueprint under teamctl's own ``sandbox(plan)``
    (``template`` as the API gave it; None: it is missing)."""
    if template is None:
        raise TemplateError("kube_template_missing",
                            f"SandboxTemplate {plan.template} is not in namespace "
                            f"{plan.namespace} (kubectl get sandboxtemplates -n {plan.namespace} "
                            "lists them; agent-sandbox's extensions serve them); create it, or "
                            "name another in template")
    blueprint = copy.deepcopy(dict(template.get("spec") or {}))
    theirs = dict((blueprint.get("podTemplate") or {}).get("spec") or {})
    containers = list(theirs.get("containers") or [])
    if not containers:
        raise TemplateError("kube_template_invalid",
                            f"SandboxTemplate {plan.template} has no containers in "
                            "spec.podTemplate.spec; give it one (the agent's)")
    document = sandbox(plan, running=running)
    document["metadata"]["annotations"][TEMPLATE_ANNOTATION] = str(plan.template)
    spec = document["spec"]
    ours = spec["podTemplate"]["spec"]
    index = agent_index(containers)
    containers[index] = _agent(plan, containers[index], ours["containers"][0])
    spec["podTemplate"] = {"metadata": _pod_metadata(blueprint, plan),
                           "spec": _pod_spec(theirs, ours, containers)}
    spec["volumeClaimTemplates"] = [*spec["volumeClaimTemplates"], *(
        claim for claim in blueprint.get("volumeClaimTemplates") or []
        if claim.get("metadata", {}).get("name") != VOLUME)]
    if "service" in blueprint:
        spec["service"] = blueprint["service"]
    return document


def _pod_metadata(blueprint: Mapping[str, Any], plan: PodPlan) -> dict[str, Any]:
    metadata = (blueprint.get("podTemplate") or {}).get("metadata") or {}
    kept: dict[str, Any] = {"labels": {**(metadata.get("labels") or {}), **plan.labels}}
    if metadata.get("annotations"):
        kept["annotations"] = metadata["annotations"]
    return kept


def _pod_spec(theirs: dict[str, Any], ours: Mapping[str, Any],
              containers: list[dict[str, Any]]) -> dict[str, Any]:
    """The template's pod, the team file's keys (runtime class, service account) and teamctl's
    rules (restart, the token) laid over it; its own volume named ``work`` replaced."""
    merged = {**theirs, "containers": containers}
    volumes = [v for v in theirs.get("volumes") or [] if v.get("name") != VOLUME]
    merged.pop("volumes", None)
    if volumes:
        merged["volumes"] = volumes
    merged.setdefault("terminationGracePeriodSeconds", ours["terminationGracePeriodSeconds"])
    for key in ("restartPolicy", "automountServiceAccountToken", "runtimeClassName",
                "serviceAccountName"):
        if key in ours:
            merged[key] = ours[key]
    return merged


def _agent(plan: PodPlan, theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's container: the template's (its resources, ports, env, mounts, security
    context), the team file's image and Secret over it, teamctl's command, working directory,
    ``HOME`` and volume mounts over all (a mount of its own at those paths dropped)."""
    image = plan.image or theirs.get("image")
    if not image:
        raise TemplateError("kube_template_invalid",
                            f"SandboxTemplate {plan.template}'s container "
                            f"{theirs.get('name')!r} names no image and the team file names "
                            "none; set image in the host's table")
    merged = {k: v for k, v in theirs.items() if k not in (*_PROBES, "args")}
    merged.update(name=CONTAINER, image=image, command=ours["command"],
                  workingDir=ours["workingDir"])
    merged["env"] = [*ours["env"], *(e for e in theirs.get("env") or [] if e.get("name") != "HOME")]
    if "resources" in ours:  # the member's ceiling over the template's, key by key
        merged["resources"] = _resources(ours["resources"], theirs.get("resources") or {})
    sources = [*(theirs.get("envFrom") or []), *(ours.get("envFrom") or [])]  # the last wins
    if sources:
        merged["envFrom"] = sources
    taken = {plan.workdir, HOME}
    merged["volumeMounts"] = [*ours["volumeMounts"], *(
        m for m in theirs.get("volumeMounts") or []
        if m.get("name") != VOLUME and m.get("mountPath") not in taken)]
    security = dict(theirs.get("securityContext") or {})
    if not _escalates(security):
        security.setdefault("allowPrivilegeEscalation", False)
    merged["securityContext"] = security
    return merged


def _resources(mine: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
    """The member's ceiling over the template's resources, key by key; a request the merge
    left above its limit (the template's 4Gi request under the ceiling's 1Gi limit) lowered to
    the limit, as the API server takes no request above its limit."""
    merged = {**template, **{kind: {**(template.get(kind) or {}), **values}
                             for kind, values in mine.items()}}
    limits, requests = merged.get("limits") or {}, merged.get("requests") or {}
    for name in set(limits) & set(requests):
        limit, request = _quantity(str(limits[name])), _quantity(str(requests[name]))
        if limit is not None and request is not None and request > limit:
            requests[name] = limits[name]
    return merged


_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
             "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def _quantity(text: str) -> Decimal | None:
    """A Kubernetes quantity ("4Gi", "500m", "2", "1e3") as a number; None: not one."""
    try:
        for suffix, scale in _SUFFIXES.items():
            if text.endswith(suffix):
                return Decimal(text[:-len(suffix)]) * scale
        if text.endswith("m"):
            return Decimal(text[:-1]) / 1000
        return Decimal(text)
    except InvalidOperation:
        return None


def _escalates(security: Mapping[str, Any]) -> bool:
    """A context the API server refuses with ``allowPrivilegeEscalation: false`` beside it."""
    added = (security.get("capabilities") or {}).get("add") or []
    return bool(security.get("privileged")) or "SYS_ADMIN" in added or "CAP_SYS_ADMIN" in added
