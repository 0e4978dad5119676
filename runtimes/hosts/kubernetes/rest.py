"""The core API's objects teamctl reads and writes (pods, persistent volume claims, a Secret)
as JSON, through the official client's own transport (``ApiClient.rest_client``: its TLS,
proxy, connection pool and timeouts; the kubeconfig's token, refreshed by its hook) without
its generated ``CoreV1Api``: importing that module and the models it declares costs ~1.2 s of
CPU at its first use (kubernetes 37's pydantic classes) — in every daemon that starts a member
in a pod, in every ``teamctl doctor --host`` — for a handful of calls whose answers teamctl
reads as plain JSON anyway. Failures are the client's ``ApiException``, as the generated
methods raise them (``runtimes/hosts/kubernetes/errors.py`` reads its status and body).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

__all__ = ["path", "request"]


def path(namespace: str, resource: str, name: str | None = None) -> str:
    """``/api/v1/namespaces/NS/RESOURCE[/NAME]`` (names quoted as the client quotes them)."""
    base = f"/api/v1/namespaces/{quote(namespace, safe='')}/{resource}"
    return base if name is None else f"{base}/{quote(name, safe='')}"


def request(api: Any, method: str, where: str, *, timeout: float, body: Any = None,
            query: dict[str, str] | None = None) -> Any:
    """The API server's JSON answer to ``method where`` (blocking: a worker thread's); a
    non-2xx answer raises ``ApiException`` with its status and body."""
    from kubernetes.client.exceptions import ApiException

    conf = api.configuration
    headers = {**api.default_headers, "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    for auth in conf.auth_settings().values():  # the bearer token (refreshed by its hook)
        if auth.get("in") == "header" and auth.get("value"):
            headers[auth["key"]] = auth["value"]
    url = conf.host + where + (f"?{urlencode(query)}" if query else "")
    response = api.rest_client.request(method, url, headers=headers, body=body,
                                       _request_timeout=timeout)
    if getattr(response, "data", None) is None:  # newer clients read it on demand
        response.read()
    if not 200 <= response.status <= 299:  # older clients raised it themselves
        raise ApiException(http_resp=response)
    return json.loads(response.data) if response.data else None
