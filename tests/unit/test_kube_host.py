"""The Kubernetes host's typed failures and its place among the host classes (the exec stream
and the lifecycle are tested against the fake API server: tests/integration/test_kube_host.py)."""

from __future__ import annotations

import inspect
import json
from typing import TYPE_CHECKING

from orchestrator.contracts import Host
from runtimes.hosts.kubernetes.host import KubernetesHost, classify

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException


def _api_exception(status: int, reason: str) -> ApiException:
    # imported here: the kubernetes client is ~80 ms of import for each worker that collects
    # this module, and the daemon itself loads it only for a Kubernetes host (as here)
    from kubernetes.client.exceptions import ApiException

    return ApiException(status=status, reason=reason)


def _api_error(status: int, message: str) -> ApiException:
    error = _api_exception(status=status, reason="x")
    error.body = json.dumps({"kind": "Status", "message": message, "code": status})
    return error


def test_an_rbac_denial_is_fatal_and_names_verb_resource_and_role() -> None:
    """403: not retried (a restart loop cannot grant a Role); the message says what was
    refused, the API server's own words, and the Role to grant."""
    error = classify("far", "k8s", "agents", _api_error(403, 'pods is forbidden: User "u"'),
                     "create", "pods")
    assert (error.code, error.retryable) == ("kube_forbidden", False)
    assert "refused to create pods in namespace agents" in error.reason
    assert 'User "u"' in error.reason and "grant the Role" in error.reason


def test_an_exec_upgrade_refused_is_read_from_the_handshake() -> None:
    """The client reports a refused WebSocket upgrade as status 0 with the handshake's
    status in its reason: a 403 there is RBAC on pods/exec, not the network."""
    error = classify("far", "k8s", "agents", _api_exception(
        status=0, reason="Handshake status 403 Forbidden -+-+- {}"), "create", "pods/exec")
    assert (error.code, error.retryable) == ("kube_forbidden", False)


def test_an_api_server_out_of_reach_is_retried() -> None:
    """Connection refused (urllib3 raises, no status): retryable, with how to check it."""
    error = classify("far", "k8s", "agents", ConnectionRefusedError(111, "refused"), "get",
                     "pods")
    assert (error.code, error.retryable) == ("kube_unreachable", True)
    assert "kubectl cluster-info" in error.reason


def test_the_kubernetes_host_implements_every_member_of_the_protocol() -> None:
    """As tests/unit/test_hosts.py holds the other classes: each member, async where the
    protocol is async."""
    for name, declared in vars(Host).items():
        if name.startswith("_") or name == "copy_with":
            continue
        assert hasattr(KubernetesHost, name), name
        if inspect.isfunction(declared):
            assert inspect.iscoroutinefunction(getattr(KubernetesHost, name)) == \
                inspect.iscoroutinefunction(declared), name
