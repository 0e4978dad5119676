"""What a Kubernetes API answer means for a member in a pod (runtimes/hosts/kubernetes/host.py,
runtimes/hosts/kubernetes/forward.py): RBAC, a refused login, a refused manifest, or the API server
out of reach — each a typed ``HostUnavailable`` naming the fix (docs/scaling.md's table)."""

from __future__ import annotations

import json
import re
from typing import Any

from orchestrator.contracts import HostUnavailable

__all__ = ["classify"]

_FIX = ("grant the Role in docs/scaling.md (\"How to run it\") to the kubeconfig's user in "
        "namespace {ns}: get, list, create, patch, delete on sandboxes.agents.x-k8s.io, pods "
        "and persistentvolumeclaims, create on pods/exec; with a template, get on "
        "sandboxtemplates.extensions.agents.x-k8s.io; for OpenCode, create on "
        "pods/portforward")


def classify(member: str, host: str, namespace: str, exc: BaseException, verb: str,
             resource: str) -> HostUnavailable:
    """What a client error means: RBAC (fatal, the verb, the resource and the fix named), a
    login refused, a manifest refused (fatal), or the API server out of reach (retryable)."""
    if isinstance(exc, ImportError):
        return HostUnavailable(member, host, "kube_client_missing",
                               "the kubernetes Python client is not installed here; pip "
                               "install 'teamctl[kubernetes]'", retryable=False)
    status = getattr(exc, "status", None)
    text = " ".join(str(getattr(exc, "reason", None) or exc).split())[:300]
    handshake = re.search(r"Handshake status (\d{3})", text)
    if status == 0 and handshake:  # an exec's WebSocket upgrade refused
        status = int(handshake.group(1))
    body = _message(getattr(exc, "body", None))
    if status == 403:
        return HostUnavailable(
            member, host, "kube_forbidden",
            f"Kubernetes refused to {verb} {resource} in namespace {namespace} (RBAC: "
            f"{body or text}); " + _FIX.format(ns=namespace), retryable=False)
    if status == 401:
        return HostUnavailable(member, host, "kube_unauthorized",
                               f"the API server refused the kubeconfig's credentials "
                               f"({body or text}); log in again (kubectl get pods checks it)",
                               retryable=False)
    if status in (400, 404, 409, 422):
        return HostUnavailable(member, host, "kube_invalid",
                               f"{verb} {resource} in namespace {namespace} was refused "
                               f"({body or text}); check the [hosts.{host}] table and that "
                               "the namespace exists", retryable=False)
    return HostUnavailable(member, host, "kube_unreachable",
                           f"the Kubernetes API server did not answer {verb} {resource} "
                           f"({body or text}); is the cluster up and the kubeconfig's context "
                           "right? (kubectl cluster-info checks it)", retryable=True)


def _message(body: Any) -> str:
    try:
        return str(json.loads(body).get("message") or "")
    except (TypeError, ValueError, AttributeError):
        return ""
