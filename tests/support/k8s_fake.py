"""A fake Kubernetes API server on 127.0.0.1: the documented subset teamctl's Kubernetes host
uses, for the real ``kubernetes`` Python client (and ``kubectl``) to talk to. Not a cluster.

What it serves (bearer token checked, JSON bodies, ``Status`` documents for errors):

- discovery: ``/api``, ``/apis`` (the ``agents.x-k8s.io`` group listed unless ``crd=False``:
  then a Sandbox request is a 404, as where the CRD is not installed);
- create/get/list/delete (+ merge patch of a Sandbox) of ``sandboxes`` (agents.x-k8s.io/v1beta1),
  ``sandboxtemplates`` (extensions.agents.x-k8s.io/v1beta1: tests create them, teamctl gets them),
  ``pods`` and ``persistentvolumeclaims`` in a namespace. A fake controller makes a Sandbox's pod
  at once (named after it, ``Running``, Ready) unless its ``operatingMode`` is ``Suspended``, and
  makes it again when it is deleted under a running Sandbox; a Pod is ``Running`` at once;
- ``pods/{name}/exec`` over WebSocket, the channel protocol ``v5.channel.k8s.io`` (falling back
  to ``v4``): 0 stdin, 1 stdout, 2 stderr, 3 the exit ``Status``, 255 + channel = close (v5).
  The command runs as a local process, in the pod's volume (``HOME`` = its ``home`` sub-path,
  cwd its ``workspace``), with the container's environment (``HOME`` and the ``envFrom``
  Secret's keys, from ``secrets``). A closed stream closes the process's stdin; a deleted pod
  kills its processes.
- ``pods/{name}/portforward`` over WebSocket (``v4.channel.k8s.io``): per port of the ``ports``
  query parameter a data (2i) and an error channel (2i+1), each opened by a frame carrying the
  port (2 bytes, little-endian); the pod's port is 127.0.0.1:port here ("pods" are local
  processes); a refused connect is told on the error channel, then the stream ends.

- ``selfsubjectaccessreviews`` (allowed unless ``forbid`` holds the verb and resource) and GET of
  a Secret of ``secrets`` (``teamctl doctor --host``).

Switches for tests: ``forbid`` ({(verb, resource)}: 403 with the RBAC Status body),
``drop_exec()`` (cut every open exec stream, no Status: a dropped connection), ``crd``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

if TYPE_CHECKING:
    from collections.abc import Iterator

    from starlette.requests import Request

GROUP, VERSION = "agents.x-k8s.io", "v1beta1"
EXTENSIONS = "extensions.agents.x-k8s.io"  # the SandboxTemplate's group (same version)
TOKEN = "fake-token-of-the-test"
_KINDS = {"pods": ("", "Pod"), "persistentvolumeclaims": ("", "PersistentVolumeClaim"),
          "sandboxes": (GROUP, "Sandbox"), "sandboxtemplates": (EXTENSIONS, "SandboxTemplate")}


def _status(code: int, reason: str, message: str, **details: Any) -> JSONResponse:
    return JSONResponse({"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Failure", "message": message, "reason": reason,
                         "details": details, "code": code}, status_code=code)


@dataclass
class _Exec:
    process: subprocess.Popen[bytes]
    pod: tuple[str, str]
    dropped: anyio.Event  # set from a test's thread through the server loop's token
    token: Any


@dataclass
class FakeCluster:
    """The state behind the fake API server (read and switched by tests)."""

    root: Path  # volumes live here: <root>/<namespace>/<claim>/{home,workspace}
    crd: bool = True
    # kubectl sends no bearer token over plain HTTP: False lets it in (bench/bench_kube.py)
    require_token: bool = True
    forbid: set[tuple[str, str]] = field(default_factory=set)
    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    execs: list[_Exec] = field(default_factory=list)
    exec_env: dict[str, str] = field(default_factory=dict)  # the container's base env
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- volumes ----------------------------------------------------------------------------

    def volume(self, namespace: str, claim: str) -> Path:
        path = self.root / namespace / claim
        for part in ("home", "workspace"):
            (path / part).mkdir(parents=True, exist_ok=True)
        return path

    def _claim_of(self, pod: dict[str, Any]) -> str | None:
        for volume in pod["spec"].get("volumes", []):
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            if claim:
                return str(claim)
        return None

    # -- the fake controller ----------------------------------------------------------------

    def _run_pod(self, namespace: str, document: dict[str, Any]) -> dict[str, Any]:
        pod = json.loads(json.dumps(document))
        pod.setdefault("metadata", {})["uid"] = str(uuid.uuid4())
        pod["metadata"]["namespace"] = namespace
        pod["status"] = {"phase": "Running", "podIP": "10.0.0.9",
                         "conditions": [{"type": "Ready", "status": "True"}]}
        self.objects[("pods", namespace, pod["metadata"]["name"])] = pod
        return pod

    def _reconcile(self, namespace: str, name: str) -> None:
        """A Sandbox's pod (and its claim's volume), as agent-sandbox's controller makes them."""
        box = self.objects.get(("sandboxes", namespace, name))
        if box is None:
            return
        running = box["spec"].get("operatingMode", "Running") == "Running"
        key = ("pods", namespace, name)
        if not running:
            self._delete_pod(key)
            box["status"] = {"conditions": [_condition("Ready", "False", "SandboxSuspended")]}
            return
        if key not in self.objects:
            template = box["spec"]["podTemplate"]
            spec = json.loads(json.dumps(template["spec"]))
            for claim in box["spec"].get("volumeClaimTemplates", []):
                claim_name = f"{claim['metadata']['name']}-{name}"
                self.volume(namespace, claim_name)
                spec.setdefault("volumes", []).append(
                    {"name": claim["metadata"]["name"],
                     "persistentVolumeClaim": {"claimName": claim_name}})
            self._run_pod(namespace, {"metadata": {"name": name, "labels": template.get(
                "metadata", {}).get("labels", {})}, "spec": spec})
        box["status"] = {"conditions": [_condition("Ready", "True", "DependenciesReady")]}

    def _delete_pod(self, key: tuple[str, str, str]) -> None:
        self.objects.pop(key, None)
        for running in [e for e in self.execs if e.pod == key[1:]]:
            _kill_tree(running.process.pid)

    def delete_pod(self, namespace: str, name: str) -> None:
        """A pod deleted under its member (kubectl delete pod): its processes killed; a
        running Sandbox's controller makes it again."""
        with self._lock:
            self._delete_pod(("pods", namespace, name))
            self._reconcile(namespace, name)

    # -- requests ---------------------------------------------------------------------------

    def handle(self, verb: str, resource: str, namespace: str, name: str | None,
               body: dict[str, Any] | None, selector: str | None) -> JSONResponse:
        group, kind = _KINDS[resource]
        self.requests.append((verb, resource))
        if (verb, resource) in self.forbid:
            what = f"{resource}.{group}" if group else resource
            return _status(403, "Forbidden",
                           f'{what}{" " + repr(name).replace(chr(39), chr(34)) if name else ""}'
                           f' is forbidden: User "system:serviceaccount:teamctl:operator" '
                           f'cannot {verb} resource "{resource}" in API group "{group}" in '
                           f'the namespace "{namespace}"', name=name or "", group=group,
                           kind=resource)
        with self._lock:
            return self._apply(verb, resource, kind, namespace, name, body, selector)

    def _apply(self, verb: str, resource: str, kind: str, namespace: str, name: str | None,
               body: dict[str, Any] | None, selector: str | None) -> JSONResponse:
        if verb == "list":
            wanted = dict(p.split("=", 1) for p in selector.split(",")) if selector else {}
            items = [o for (r, ns, _), o in self.objects.items() if r == resource and
                     ns == namespace and all(o["metadata"].get("labels", {}).get(k) == v
                                             for k, v in wanted.items())]
            return JSONResponse({"kind": f"{kind}List", "apiVersion": "v1",
                                 "metadata": {}, "items": items})
        if verb == "create":
            assert body is not None
            name = body["metadata"]["name"]
            if (resource, namespace, name) in self.objects:
                return _status(409, "AlreadyExists", f'{resource} "{name}" already exists',
                               name=name, kind=resource)
            return JSONResponse(self._create(resource, namespace, name, body), status_code=201)
        assert name is not None
        key = (resource, namespace, name)
        if key not in self.objects:
            return _status(404, "NotFound", f'{resource} "{name}" not found', name=name,
                           kind=resource)
        if verb == "get":
            return JSONResponse(self.objects[key])
        if verb == "patch":
            assert body is not None
            self.objects[key]["spec"].update(body.get("spec", {}))
            self._reconcile(namespace, name)
            return JSONResponse(self.objects[key])
        gone = self.objects[key]
        if resource == "pods":
            self._delete_pod(key)
        else:
            del self.objects[key]
        if resource == "sandboxes":
            self._delete_pod(("pods", namespace, name))
        return JSONResponse(gone)

    def _create(self, resource: str, namespace: str, name: str,
                body: dict[str, Any]) -> dict[str, Any]:
        document = json.loads(json.dumps(body))
        document["metadata"]["namespace"] = namespace
        document["metadata"]["uid"] = str(uuid.uuid4())
        if resource == "pods":
            claim = self._claim_of(document)
            if claim:
                self.volume(namespace, claim)
            return self._run_pod(namespace, document)
        self.objects[(resource, namespace, name)] = document
        if resource == "persistentvolumeclaims":
            self.volume(namespace, name)
            document["status"] = {"phase": "Bound"}
        if resource == "sandboxes":
            self._reconcile(namespace, name)
        return document

    # -- exec -------------------------------------------------------------------------------

    def exec_target(self, namespace: str, name: str) -> tuple[dict[str, str], Path] | None:
        """The container's environment and its working directory, None if no such pod."""
        with self._lock:
            pod = self.objects.get(("pods", namespace, name))
            if pod is None:
                return None
            claim = self._claim_of(pod)
        volume = self.volume(namespace, claim or f"ephemeral-{name}")
        env = {**self.exec_env, "HOME": str(volume / "home")}
        container = next((c for c in pod["spec"]["containers"] if c["name"] == "agent"),
                         pod["spec"]["containers"][0])  # the exec's container (teamctl's)
        for source in container.get("envFrom", []):
            if "secretRef" in source:  # a ConfigMap's (a template's) is not played
                env.update(self.secrets.get((namespace, source["secretRef"]["name"]), {}))
        return env, volume / "workspace"

    def drop_exec(self) -> int:
        """Cut every open exec stream as a dropped connection does (no Status); the processes
        get the end of their stdin, as the container runtime gives them. How many were cut."""
        cut = list(self.execs)
        for running in cut:
            anyio.from_thread.run_sync(running.dropped.set, token=running.token)
        return len(cut)


def _condition(kind: str, status: str, reason: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": reason,
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _authorized(request: Request | WebSocket, cluster: FakeCluster) -> bool:
    return not cluster.require_token or request.headers.get(
        "authorization") == f"Bearer {TOKEN}"


def build_app(cluster: FakeCluster) -> Starlette:
    async def api(request: Request) -> Response:
        return JSONResponse({"kind": "APIVersions", "versions": ["v1"],
                             "serverAddressByClientCIDRs": []})

    async def apis(request: Request) -> Response:
        groups = [{"name": group, "versions": [{"groupVersion": f"{group}/{VERSION}",
                                                "version": VERSION}],
                   "preferredVersion": {"groupVersion": f"{group}/{VERSION}",
                                        "version": VERSION}}
                  for group in (GROUP, EXTENSIONS)] if cluster.crd else []
        return JSONResponse({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})

    async def resources(request: Request) -> Response:
        """A group version's resource list (kubectl's discovery)."""
        if request.url.path == "/api/v1":
            listed = [("pods", "Pod"), ("pods/exec", "PodExecOptions"),
                      ("persistentvolumeclaims", "PersistentVolumeClaim")]
            version = "v1"
        elif cluster.crd:
            group = request.url.path.split("/")[2]
            listed = [(r, k) for r, (g, k) in _KINDS.items() if g == group]
            version = f"{group}/{VERSION}"
        else:
            return _status(404, "NotFound", "the server could not find the requested resource")
        return JSONResponse({"kind": "APIResourceList", "apiVersion": "v1",
                             "groupVersion": version, "resources": [
                                 {"name": name, "singularName": "", "namespaced": True,
                                  "kind": kind, "verbs": ["create", "delete", "get", "list",
                                                          "patch"]}
                                 for name, kind in listed]})

    async def objects(request: Request) -> Response:
        if not _authorized(request, cluster):
            return _status(401, "Unauthorized", "Unauthorized")
        params = request.path_params
        resource = params["resource"]
        if resource not in _KINDS or _KINDS[resource][0] != params.get("group", ""):
            return _status(404, "NotFound", "the server could not find the requested resource")
        if "group" in params and not cluster.crd:
            return _status(404, "NotFound", "the server could not find the requested resource")
        name = params.get("name")
        verb = {"GET": "get" if name else "list", "POST": "create", "DELETE": "delete",
                "PATCH": "patch"}[request.method]
        body = await request.json() if request.method in ("POST", "PATCH") else None
        return await anyio.to_thread.run_sync(
            cluster.handle, verb, resource, params["namespace"], name, body,
            request.query_params.get("labelSelector"))

    async def exec_stream(websocket: WebSocket) -> None:
        await _exec(cluster, websocket)

    async def access_review(request: Request) -> Response:
        """A SelfSubjectAccessReview: allowed unless ``forbid`` holds the verb and resource
        (``pods/exec`` with its subresource), as RBAC would answer it."""
        if not _authorized(request, cluster):
            return _status(401, "Unauthorized", "Unauthorized")
        review = await request.json()
        asked = review["spec"]["resourceAttributes"]
        resource = "/".join(filter(None, (asked.get("resource"), asked.get("subresource"))))
        cluster.requests.append(("review", f"{asked.get('verb')} {resource}"))
        allowed = (asked.get("verb"), resource) not in cluster.forbid
        review["status"] = {"allowed": allowed, "reason": "" if allowed else "no RBAC rule"}
        return JSONResponse(review, status_code=201)

    async def secret(request: Request) -> Response:
        """A Secret of ``secrets`` (its values base64, as the API gives them)."""
        if not _authorized(request, cluster):
            return _status(401, "Unauthorized", "Unauthorized")
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        if ("get", "secrets") in cluster.forbid:
            return _status(403, "Forbidden", f'secrets "{name}" is forbidden: cannot get '
                           f'resource "secrets" in the namespace "{namespace}"')
        found = cluster.secrets.get((namespace, name))
        if found is None:
            return _status(404, "NotFound", f'secrets "{name}" not found', name=name,
                           kind="secrets")
        return JSONResponse({"kind": "Secret", "apiVersion": "v1", "type": "Opaque",
                             "metadata": {"name": name, "namespace": namespace},
                             "data": {k: base64.b64encode(v.encode()).decode()
                                      for k, v in found.items()}})

    objects_paths = ["/api/v1/namespaces/{namespace}/{resource}",
                     "/api/v1/namespaces/{namespace}/{resource}/{name}",
                     "/apis/{group}/{version}/namespaces/{namespace}/{resource}",
                     "/apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}"]
    return Starlette(routes=[
        Route("/api", api), Route("/apis", apis), Route("/apis/", apis),  # the client's path
        Route("/api/v1", resources),
        Route(f"/apis/{GROUP}/{VERSION}", resources), Route(f"/apis/{EXTENSIONS}/{VERSION}",
                                                            resources),
        WebSocketRoute("/api/v1/namespaces/{namespace}/pods/{name}/exec", exec_stream),
        WebSocketRoute("/api/v1/namespaces/{namespace}/pods/{name}/portforward",
                       lambda websocket: _portforward(cluster, websocket)),
        Route("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", access_review,
              methods=["POST"]),
        Route("/api/v1/namespaces/{namespace}/secrets/{name}", secret),
        *(Route(p, objects, methods=["GET", "POST", "DELETE", "PATCH"]) for p in objects_paths),
    ])


async def _exec(cluster: FakeCluster, websocket: WebSocket) -> None:
    """One exec: the command as a local process in the pod's volume, its stdio on channels."""
    offered = list(websocket.scope.get("subprotocols", []))  # the Sec-WebSocket-Protocol list
    protocol = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered), None)
    namespace, name = websocket.path_params["namespace"], websocket.path_params["name"]
    if not _authorized(websocket, cluster) or protocol is None:
        await websocket.close(code=1008)
        return
    if ("create", "pods/exec") in cluster.forbid:
        await websocket.close(code=1008)
        return
    target = cluster.exec_target(namespace, name)
    if target is None:
        await websocket.close(code=1008)
        return
    env, cwd = target
    command = websocket.query_params.getlist("command")
    await websocket.accept(subprotocol=protocol)
    process = await anyio.to_thread.run_sync(lambda: subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
        env=env, start_new_session=True))
    running = _Exec(process, (namespace, name), anyio.Event(), anyio.lowlevel.current_token())
    cluster.execs.append(running)
    try:
        await _relay(websocket, process, protocol, running.dropped)
    finally:
        cluster.execs.remove(running)
        with contextlib.suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        await anyio.to_thread.run_sync(_reap, process)


_LIMITER: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar("k8s_fake_pipes")


async def _blocking(call: Any, *args: Any) -> Any:
    """A blocking call of an exec's pipes in a worker thread, on the server's own limiter:
    each running exec holds three threads (two reads, a wait), so anyio's default 40 would
    stall every stream past ~13 execs (a hundred members hold two hundred)."""
    try:
        limiter = _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(4096)
        _LIMITER.set(limiter)
    return await anyio.to_thread.run_sync(call, *args, abandon_on_cancel=True, limiter=limiter)


def _kill_tree(pid: int) -> None:
    """What a pod's end does to an exec'd command: it and every process under it killed,
    whatever session they made (the remote side runs the runtime in its own; a real container's
    end takes them all, and here they would outlive the test)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grown = {pid}, True
    while grown:
        more = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    for member in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)


def _reap(process: subprocess.Popen[bytes]) -> None:
    """The exec'd process ends with its stdin (the remote side's promise); then its pipes go."""
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


async def _relay(websocket: WebSocket, process: subprocess.Popen[bytes], protocol: str,
                 dropped: anyio.Event) -> None:
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    done = anyio.Event()

    async def out(stream: Any, channel: int) -> None:
        while True:
            chunk = await _blocking(os.read, stream.fileno(), 65536)
            if not chunk or dropped.is_set():
                return
            try:
                await websocket.send_bytes(bytes([channel]) + chunk)
            except (WebSocketDisconnect, OSError, RuntimeError):  # the client went
                return

    async def stdin() -> None:
        while True:
            try:
                message = await websocket.receive()
            except (WebSocketDisconnect, RuntimeError):
                break
            if message["type"] == "websocket.disconnect":
                break
            data = message.get("bytes") or (message.get("text") or "").encode()
            if not data:
                continue
            if data[0] == 255 and protocol.startswith("v5") and data[1:2] == b"\x00":
                process.stdin.close()  # type: ignore[union-attr]
                continue
            if data[0] == 0 and not process.stdin.closed:  # type: ignore[union-attr]
                with contextlib.suppress(OSError):
                    await _blocking(_write, process.stdin, data[1:])
        with contextlib.suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        done.set()

    async def watch_drop() -> None:
        await dropped.wait()
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(stdin)
        group.start_soon(watch_drop)

        async def outputs() -> None:
            async with anyio.create_task_group() as streams:
                streams.start_soon(out, process.stdout, 1)
                streams.start_soon(out, process.stderr, 2)
            done.set()

        group.start_soon(outputs)
        await done.wait()
        if dropped.is_set():
            with contextlib.suppress(OSError):
                process.stdin.close()
            group.cancel_scope.cancel()
            await _abort(websocket)
            return
        code = await _blocking(process.wait)
        group.cancel_scope.cancel()
    status: dict[str, Any] = {"metadata": {}, "status": "Success"} if code == 0 else {
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": f"command terminated with non-zero exit code: exit status {code}",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
    with contextlib.suppress(Exception):
        await websocket.send_bytes(b"\x03" + json.dumps(status).encode())
        await websocket.close()


async def _portforward(cluster: FakeCluster, websocket: WebSocket) -> None:
    """One port-forward stream: each port's data and error channels opened by a frame of the
    port number; then the pod's connections carried until either end closes (as the kubelet
    does: the stream ends when its ports' connections have)."""
    offered = list(websocket.scope.get("subprotocols", []))
    namespace, name = websocket.path_params["namespace"], websocket.path_params["name"]
    cluster.requests.append(("create", "pods/portforward"))
    if not _authorized(websocket, cluster) or "v4.channel.k8s.io" not in offered or (
            "create", "pods/portforward") in cluster.forbid or \
            cluster.exec_target(namespace, name) is None:
        await websocket.close(code=1008)  # before the upgrade: a 403 to the client
        return
    ports = [int(p) for p in websocket.query_params.get("ports", "").split(",") if p]
    await websocket.accept(subprotocol="v4.channel.k8s.io")
    conns: dict[int, Any] = {}
    try:
        for index, port in enumerate(ports):
            for channel in (2 * index, 2 * index + 1):
                await websocket.send_bytes(bytes([channel]) + port.to_bytes(2, "little"))
            try:
                conns[2 * index] = await anyio.connect_tcp("127.0.0.1", port)
            except OSError as exc:
                await websocket.send_bytes(bytes([2 * index + 1]) + (
                    f"error forwarding port {port} to pod {name}, uid : failed to execute "
                    f"portforward in network namespace: dial tcp4 127.0.0.1:{port}: "
                    f"connect: connection refused ({exc})").encode())
        async with anyio.create_task_group() as group:
            group.start_soon(_from_pod_ports, websocket, conns, group.cancel_scope)
            await _to_pod_ports(websocket, conns)
            group.cancel_scope.cancel()
        await websocket.close()
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass  # the client left first
    finally:
        for conn in conns.values():
            await conn.aclose()


async def _to_pod_ports(websocket: WebSocket, conns: dict[int, Any]) -> None:
    """The client's frames (channel 2i) to port i's connection, until the client closes."""
    while conns:
        try:
            message = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if message["type"] == "websocket.disconnect":
            return
        data = message.get("bytes") or b""
        if data and data[0] in conns and data[1:]:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await conns[data[0]].send(data[1:])


async def _from_pod_ports(websocket: WebSocket, conns: dict[int, Any], scope: Any) -> None:
    """Each port's bytes from the pod to its data channel; every port ended: the stream ends."""
    async def carry(channel: int, conn: Any) -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError,
                                 anyio.ClosedResourceError, OSError, WebSocketDisconnect,
                                 RuntimeError):
            while True:
                await websocket.send_bytes(bytes([channel]) + await conn.receive(65536))

    async with anyio.create_task_group() as group:
        for channel, conn in conns.items():
            group.start_soon(carry, channel, conn)
    scope.cancel()


def _write(stdin: Any, data: bytes) -> None:
    stdin.write(data)
    stdin.flush()


async def _abort(websocket: WebSocket) -> None:
    """End the stream without a Status, as a cut connection does: the client cannot tell the
    command's end (there is none to tell)."""
    with contextlib.suppress(Exception):
        await websocket.close(code=1011)


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # a thread of the test process
        return None


@contextlib.contextmanager
def fake_cluster(root: Path, **switches: Any) -> Iterator[tuple[FakeCluster, str]]:
    """The fake API server in a thread of this process: (its state, its URL)."""
    cluster = FakeCluster(root, **switches)
    cluster.exec_env = {k: v for k, v in os.environ.items()
                        if k in ("PATH", "LANG", "PYTHONPATH") or k.startswith("LC_")}
    # the image's python3 is the interpreter itself, not a version manager's shim (pyenv's
    # costs ~0.3 s a start here: it was most of a re-attach's time, four starts in a row)
    image_bin = root / "image-bin"
    image_bin.mkdir(parents=True, exist_ok=True)
    if not (image_bin / "python3").exists():
        (image_bin / "python3").symlink_to(os.path.realpath(sys.executable))
    cluster.exec_env["PATH"] = f"{image_bin}:{cluster.exec_env.get('PATH', os.defpath)}"
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on connections of a socket whose proto
    # says TCP (socket.socket()'s is 0); without it each response's body (a second write)
    # waited out the client's delayed ACK of its headers, ~40 ms a request
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = _Server(uvicorn.Config(build_app(cluster), log_level="warning", ws="wsproto",
                                    lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the fake API server started"
        time.sleep(0.01)
    try:
        yield cluster, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        for running in list(cluster.execs):
            _kill_tree(running.process.pid)
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def kubeconfig(path: Path, url: str, *, namespace: str = "default") -> Path:
    """A kubeconfig for the fake server (bearer token, plain HTTP on loopback)."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "operator", "user": {"token": TOKEN}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "operator",
                                                  "namespace": namespace}}]}))
    path.chmod(0o600)
    return path
