"""The exec streams of a member in a pod, through the official ``kubernetes`` Python client
(``pods/exec`` over WebSocket: ``v5.channel.k8s.io``, else ``v4``; 0 stdin, 1 stdout, 2 stderr,
3 the exit Status, 255 close).

Two uses. **A side call** (``run``): one short command in the pod with its stdin given, its
stdout, stderr and exit code back, within a deadline (the pod's probe, an image copy, a glob, a
version). **The member's own stream**: ``connection`` resolves, once per start, what the light
relay process (``runtimes/hosts/kubernetes/relay.py``, no ``kubernetes`` import) needs to open it —
the URL, the ``Authorization`` header, the TLS files — sent on that process's stdin, never argv.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from runtimes.hosts.kubernetes.relay import DROPPED, exit_status

__all__ = ["DROPPED", "ExecTarget", "api_client", "connection", "open_stream", "relay_argv",
           "run"]

REQUEST_TIMEOUT = 10.0  # the relay's connect


@dataclass(frozen=True)
class ExecTarget:
    """Which cluster and pod (no credential: the kubeconfig file holds it)."""

    kubeconfig: str | None
    context: str | None
    namespace: str
    pod: str
    container: str


def api_client(kubeconfig: str | None, context: str | None) -> Any:
    """An ``ApiClient`` of the kubeconfig (``$KUBECONFIG``, ``~/.kube/config`` by default)."""
    from kubernetes import config

    return config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig, context=context)


def open_stream(api: Any, target: ExecTarget, command: list[str]) -> Any:
    """A ``WSClient`` exec'ing ``command`` in the pod, stdin open, bytes on every channel, as
    the client's ``stream`` opens it, without its generated ``CoreV1Api``
    (runtimes/hosts/kubernetes/rest.py says why). A failed upgrade raises ``ApiException`` (status
    0, the handshake's status in its
    text), as ``stream`` raises it. One thread at a time per ``api`` (its refresh hook)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream.ws_client import WSClient

    spec = connection(api, target, command)
    headers = {key: value for key, _, value in (line.partition(": ") for line in spec["header"])}
    try:
        return WSClient(api.configuration, spec["url"], headers,  # type: ignore[no-untyped-call]
                        True, binary=True)
    except Exception as exc:
        raise ApiException(status=0, reason=str(exc)) from None


def exit_code(ws: Any) -> int | None:
    """The command's exit code from channel 3's Status; None when none came (a cut stream)."""
    return exit_status(ws.read_channel(3))


def run(api: Any, target: ExecTarget, command: list[str], stdin: bytes,
        deadline: float) -> tuple[int | None, bytes, bytes]:
    """One side call (blocking: a worker thread's): exit code (None: cut or past the
    deadline), stdout, stderr."""
    ws = open_stream(api, target, command)
    try:
        if stdin:
            ws.write_stdin(stdin)
        ws.close_channel(0)  # v5: the end of stdin (v4 cannot say it: commands read no more)
        ws.run_forever(timeout=deadline)
        if ws.is_open():
            return None, b"", b"past the deadline"
        return exit_code(ws), bytes(ws.read_stdout() or b""), bytes(ws.read_stderr() or b"")
    finally:
        ws.close()


def connection(api: Any, target: ExecTarget, command: list[str]) -> dict[str, Any]:
    """What the member's relay (``runtimes/hosts/kubernetes/relay.py``) needs to open the exec
    stream, as
    the client would open it: the ``ws(s)://`` URL, the ``Authorization`` header (a token
    refreshed by the kubeconfig's hook first), the TLS options (file paths: the client's
    own 0600 copies of inline certificates) and a proxy. It holds the credential: it goes on the
    relay's stdin, never argv nor a file of its own."""
    from kubernetes.stream.ws_client import get_websocket_url

    conf = api.configuration
    query = [("command", command), ("container", target.container), ("stdin", "true"),
             ("stdout", "true"), ("stderr", "true"), ("tty", "false")]
    path = f"/api/v1/namespaces/{target.namespace}/pods/{target.pod}/exec"
    url: str = get_websocket_url(conf.host + path, query)  # type: ignore[no-untyped-call]
    bearer = conf.auth_settings().get("BearerToken", {}).get("value")
    sslopt: dict[str, Any] = {"cert_reqs": 0}  # ssl.CERT_NONE for ws:// or verify_ssl off
    if url.startswith("wss://") and conf.verify_ssl:
        import certifi

        sslopt = {"cert_reqs": 2, "ca_certs": conf.ssl_ca_cert or certifi.where()}
        if conf.assert_hostname is not None:
            sslopt["check_hostname"] = conf.assert_hostname
    for key, value in (("certfile", conf.cert_file), ("keyfile", conf.key_file),
                       ("server_hostname", conf.tls_server_name)):
        if value:
            sslopt[key] = value
    proxy: dict[str, Any] = {}
    if conf.proxy:
        parsed = urlparse(conf.proxy)
        proxy = {"http_proxy_host": parsed.hostname, "http_proxy_port": parsed.port,
                 "proxy_type": "http"}
        if conf.no_proxy:
            proxy["http_no_proxy"] = conf.no_proxy.split(",")
    return {"url": url, "pod": target.pod, "header": [f"authorization: {bearer}"] if bearer
            else [], "sslopt": sslopt, "proxy": proxy, "timeout": REQUEST_TIMEOUT}


def relay_argv(python: str) -> list[str]:
    """The member's stream as a local process; its first stdin line is ``connection``'s."""
    return [python, "-m", "runtimes.hosts.kubernetes.relay"]
