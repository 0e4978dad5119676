"""A member in a Kubernetes pod (docs/scaling.md, "On Kubernetes"): ``contracts.Host`` over the
official ``kubernetes`` Python client.

Each member gets one agent-sandbox ``Sandbox`` (``runtimes/hosts/kubernetes/manifests.py``), or a
Pod and its PVC where the CRD is absent (discovery says which; ``mode``). Before each start the
object is made (or found, or resumed from ``Suspended``) and its pod waited for until ``Running``,
within the host's ``start_timeout``. The runtime is started by an exec stream running the same
remote side as over SSH (``runtimes/hosts/remote_side.py``, sent as ``python3 -c``): the member's
private dir mirrored under ``~/.teamctl-remote/<team>/<member>`` on the pod's volume, the
environment on the stream's stdin (never argv), the container's own environment (the Secret's keys)
kept, an earlier run of the member stopped first (its pid file: never two), the runtime dead with
its stream. The local process is the relay (``runtimes/hosts/kubernetes/relay.py``), as the ssh
client is.

Failures are typed ``HostUnavailable``: ``kube_forbidden`` (RBAC: the verb and resource named,
and the Role to grant), ``kube_unauthorized`` and ``kube_invalid`` are fatal;
``kube_unreachable`` (the API server does not answer) and ``kube_pod_not_running`` (past the
deadline) are retried by the restart policy.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import structlog

from orchestrator.contracts import HostProfile, HostUnavailable, McpServer
from runtimes.hosts.kubernetes import exec as kube_exec
from runtimes.hosts.kubernetes import manifests as kube_manifests
from runtimes.hosts.kubernetes import rest as kube_rest
from runtimes.hosts.kubernetes import template as kube_template
from runtimes.hosts.kubernetes.errors import classify
from runtimes.hosts.kubernetes.forward import Forward, open_forward
from runtimes.hosts.kubernetes.manifests import (
    CONTAINER,
    LABEL_HOME,
    LABEL_MEMBER,
    LABEL_OWNER,
    LABEL_TEAM,
    POD_NAME_ANNOTATION,
    SANDBOX_GROUP,
    SANDBOX_PLURAL,
    SANDBOX_VERSION,
    PodPlan,
)
from runtimes.hosts.local.host import place_here
from runtimes.hosts.remote_mcp import shipped_mcp_server
from runtimes.kit.base import BASE_ENV_NAMES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from anyio.abc import Process

    from orchestrator.config import KubernetesHostConfig
    from orchestrator.contracts import Ceiling, Confined, ImagePart, Placed
    from runtimes.hosts import HostRequest

__all__ = ["KubernetesHost", "build", "classify", "kubernetes_host"]

log = structlog.get_logger("teamctl.kube")

_SIDE = (Path(__file__).parents[1] / "remote_side.py").read_text(encoding="utf-8")
_MUX = Path(__file__).with_name("mux.py").read_text(encoding="utf-8")
# its own login (the Secret's), an asleep member's Sandbox suspended (``pause_after``), a
# member's ceiling its container's resources (kube_manifests.resources), and its memory the
# pod's own (no admission here)
_PROFILE = HostProfile(checks_local_login=False, pauses=True, holds_ceiling=True,
                       local_memory=False)
REQUEST_TIMEOUT = 10.0  # one API call
SIDE_TIMEOUT = 20.0  # one side call through exec
# the host's own (the runtime's temp dir, the pid record), or here only (the describer's
# dir, the member's socket dir)
_MIRROR_SKIP = {("runtime", "tmp"), ("runtime.pid",), ("describer",), ("mcp",)}
_MIRROR_MAX = 1 << 20
Mode = Literal["sandbox", "pod"]


@dataclass
class KubernetesHost:
    """A member's pod: implements ``contracts.Host`` (and ``PausingHost``) for one team
    member. The CLI there finds its own credentials (the Secret's environment): its profile's
    ``checks_local_login`` is False."""

    host: str  # the team file's name
    plan: PodPlan
    state_dir: Path  # the member's local private dir, mirrored there
    kubeconfig: str | None = None
    context: str | None = None
    keep: bool = False
    start_timeout: float = 300.0
    python: str = sys.executable  # runs the relay here
    # the daemon's socket of this member (orchestrator/daemon/control/_member_sockets.py): what
    # its teamctl mcp in the pod reaches, through the relay (runtimes/hosts/kubernetes/mux.py);
    # None: no tools
    mcp_socket: Path | None = None
    _mcp_path: str | None = field(default=None, repr=False)  # this launch's socket in the pod
    mode: Mode | None = field(default=None, repr=False)  # known after the first start
    pod_name: str | None = field(default=None, repr=False)
    _home: str | None = field(default=None, repr=False)
    _probed: tuple[str, ...] = field(default=(), repr=False)  # (pod uid, executables found)
    _uid: str | None = field(default=None, repr=False)
    _ours: bool = field(default=False, repr=False)  # its object seen labelled as this home's
    _api: Any = field(default=None, repr=False)
    _exec_api: Any = field(default=None, repr=False)
    _exec_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _forward: Forward | None = field(default=None, repr=False)  # this launch's port-forward

    @property
    def profile(self) -> HostProfile:
        return _PROFILE

    @property
    def name(self) -> str:
        return self.host

    @property
    def member(self) -> str:
        return self.plan.member

    @property
    def namespace(self) -> str:
        return self.plan.namespace

    # -- the API ------------------------------------------------------------------------------

    def _error(self, exc: BaseException, verb: str, resource: str) -> HostUnavailable:
        return classify(self.member, self.host, self.namespace, exc, verb, resource)

    async def _call(self, verb: str, resource: str, call: Callable[[Any], Any]) -> Any:
        """One API call in a worker thread; ``None`` for a 404; anything else typed."""
        def blocking() -> Any:
            from kubernetes.client.exceptions import ApiException

            try:
                if self._api is None:
                    self._api = kube_exec.api_client(self.kubeconfig, self.context)
                return call(self._api)
            except ApiException as exc:
                if exc.status == 404 and verb in ("get", "delete"):
                    return None
                raise self._error(exc, verb, resource) from None
            except HostUnavailable:
                raise
            except Exception as exc:  # urllib3's connection errors, a bad kubeconfig
                raise self._error(exc, verb, resource) from None

        with anyio.fail_after(REQUEST_TIMEOUT * 2):
            return await anyio.to_thread.run_sync(blocking, abandon_on_cancel=True)

    def _core_call(self, method: str, resource: str, name: str | None = None,
                   **kwargs: Any) -> Callable[[Any], Any]:
        """A core-API call answered as JSON (runtimes/hosts/kubernetes/rest.py: not
        ``CoreV1Api``)."""
        where = kube_rest.path(self.namespace, resource, name)
        return lambda api: kube_rest.request(api, method, where, timeout=REQUEST_TIMEOUT,
                                             **kwargs)

    @staticmethod
    def _custom(api: Any) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(api)

    async def discover(self) -> Mode:
        """``sandbox`` if the cluster serves agent-sandbox's group, else ``pod`` (doctor)."""
        from kubernetes import client

        groups = await self._call("list", "API groups", lambda api: client.ApisApi(
            api).get_api_versions(_request_timeout=REQUEST_TIMEOUT))
        versions = {v.group_version for g in groups.groups or [] for v in g.versions or []}
        self.mode = "sandbox" if f"{SANDBOX_GROUP}/{SANDBOX_VERSION}" in versions else "pod"
        return self.mode

    def _sandbox_call(self, method: str, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        return lambda api: getattr(self._custom(api), method)(
            SANDBOX_GROUP, SANDBOX_VERSION, self.namespace, SANDBOX_PLURAL, *args,
            _request_timeout=REQUEST_TIMEOUT, **kwargs)

    async def _ensure_sandbox(self) -> str:
        """The member's Sandbox, made or resumed; the name of its pod."""
        box = await self._call("get", "sandboxes.agents.x-k8s.io",
                               self._sandbox_call("get_namespaced_custom_object", self.plan.name))
        if box is not None:
            self._check_ours(box.get("metadata", {}).get("labels"), "sandbox")
        if box is None:
            box = await self._call("create", "sandboxes.agents.x-k8s.io", self._sandbox_call(
                "create_namespaced_custom_object", await self._manifest()))
            log.info("kube_sandbox_created", host=self.host, member=self.member,
                     sandbox=self.plan.name)
        elif box.get("spec", {}).get("operatingMode") == "Suspended":
            await self._call("patch", "sandboxes.agents.x-k8s.io", self._sandbox_call(
                "patch_namespaced_custom_object", self.plan.name,
                {"spec": {"operatingMode": "Running"}}))
            log.info("kube_sandbox_resumed", host=self.host, member=self.member)
        annotations = box.get("metadata", {}).get("annotations") or {}
        return str(annotations.get(POD_NAME_ANNOTATION) or self.plan.name)

    async def _manifest(self) -> dict[str, Any]:
        """The Sandbox to make: teamctl's own, or rendered from the SandboxTemplate the team
        file names (read now: a change to it reaches the next Sandbox made)."""
        if self.plan.template is None:
            return kube_manifests.sandbox(self.plan)
        try:
            return kube_template.sandbox_from(self.plan, await self.read_template())
        except kube_template.TemplateError as exc:
            raise self._refused(exc) from None

    async def read_template(self) -> Any:
        """The SandboxTemplate ``template`` names, as the API gives it; None: not there."""
        return await self._call("get", kube_template.TEMPLATE_RESOURCE, lambda api: self._custom(
            api).get_namespaced_custom_object(
            kube_template.TEMPLATE_GROUP, kube_template.TEMPLATE_VERSION, self.namespace,
            kube_template.TEMPLATE_PLURAL, self.plan.template, _request_timeout=REQUEST_TIMEOUT))

    def _refused(self, exc: kube_template.TemplateError) -> HostUnavailable:
        return HostUnavailable(self.member, self.host, exc.code, str(exc), retryable=False)

    async def _ensure_pod(self) -> str:
        """The fallback: the claim, then the pod (made again when it ended)."""
        plan = self.plan
        if await self._call("get", "persistentvolumeclaims", self._core_call(
                "GET", "persistentvolumeclaims", plan.claim)) is None:
            await self._call("create", "persistentvolumeclaims", self._core_call(
                "POST", "persistentvolumeclaims", body=kube_manifests.pvc(plan)))
        found = await self._read_pod(plan.name)
        if found is not None:
            self._check_ours(found["metadata"].get("labels"), "pod")
        if found is not None and _phase(found) in ("Succeeded", "Failed"):
            await self._delete_pod()
            found = None
        if found is None:
            await self._call("create", "pods", self._core_call("POST", "pods",
                                                               body=kube_manifests.pod(plan)))
            log.info("kube_pod_created", host=self.host, member=self.member, pod=plan.name)
        return plan.name

    def _check_ours(self, labels: Mapping[str, str] | None, kind: str) -> None:
        """An object of this name made by another teamctl home (its ``LABEL_HOME``) is never
        used, stopped or deleted: refused, fatal."""
        theirs = (labels or {}).get(LABEL_HOME)
        if theirs and self.plan.home and theirs != self.plan.home:
            raise HostUnavailable(
                self.member, self.host, "kube_name_taken",
                f"{kind} {self.plan.name} in namespace {self.namespace} belongs to another "
                f"teamctl home ({LABEL_HOME}={theirs}); give this team another name or use "
                "another namespace", retryable=False)

    async def owned(self) -> set[tuple[str, str]]:
        """(team, member) of every object in the namespace this teamctl home made (its
        labels; the exact names from the annotations): the orphan sweep's list."""
        selector = f"{LABEL_OWNER}=teamctl,{LABEL_HOME}={self.plan.home}"
        mode = self.mode or await self.discover()
        if mode == "sandbox":
            found = (await self._call("list", "sandboxes.agents.x-k8s.io", self._sandbox_call(
                "list_namespaced_custom_object", label_selector=selector)))["items"]
        else:
            found = [item for resource in ("pods", "persistentvolumeclaims")
                     for item in (await self._call("list", resource, self._core_call(
                         "GET", resource, query={"labelSelector": selector})))["items"]]
        metadata = [item.get("metadata", {}) for item in found]
        return {(str(m["annotations"][LABEL_TEAM]), str(m["annotations"][LABEL_MEMBER]))
                for m in metadata if {LABEL_TEAM, LABEL_MEMBER} <= set(
                    m.get("annotations") or {})}

    async def _read_pod(self, name: str) -> Any:
        """The pod as the API gives it (JSON); None: not there."""
        return await self._call("get", "pods", self._core_call("GET", "pods", name))

    async def _delete_pod(self) -> None:
        await self._call("delete", "pods", self._core_call("DELETE", "pods", self.plan.name))

    async def ensure(self) -> str:
        """The member's pod, made if missing and ``Running`` within ``start_timeout``."""
        mode = self.mode or await self.discover()
        if mode == "pod" and self.plan.template is not None:
            raise self._refused(kube_template.no_fallback(self.plan))
        pod = await (self._ensure_sandbox() if mode == "sandbox" else self._ensure_pod())
        deadline = time.monotonic() + self.start_timeout
        delay = 0.05
        while True:
            found = await self._read_pod(pod)
            if found is not None and _phase(found) == "Running" and \
                    found["metadata"].get("deletionTimestamp") is None:
                self.pod_name, self._uid, self._ours = pod, str(found["metadata"]["uid"]), True
                return pod
            if time.monotonic() > deadline:
                phase = None if found is None else _phase(found)
                raise HostUnavailable(
                    self.member, self.host, "kube_pod_not_running",
                    f"pod {pod} in namespace {self.namespace} is not Running after "
                    f"{self.start_timeout:g}s (phase: {phase or 'none yet'}); kubectl describe "
                    f"pod {pod} -n {self.namespace} says why (image, volume, quota)",
                    retryable=True)
            await anyio.sleep(delay)
            delay = min(delay * 2, 1.0)

    # -- exec ---------------------------------------------------------------------------------

    def _target(self) -> kube_exec.ExecTarget:
        assert self.pod_name is not None
        return kube_exec.ExecTarget(self.kubeconfig, self.context, self.namespace,
                                    self.pod_name, CONTAINER)

    async def _side(self, *args: str, stdin: bytes = b"",
                    deadline: float = SIDE_TIMEOUT) -> str:
        """One remote-side call in the pod (``python3 -c SIDE ARGS``): its stdout."""
        target, command = self._target(), ["python3", "-c", _SIDE, *args]

        def blocking() -> tuple[int | None, bytes, bytes]:
            with self._exec_lock:  # the kubeconfig's refresh hook may run: one at a time
                if self._exec_api is None:
                    self._exec_api = kube_exec.api_client(self.kubeconfig, self.context)
                try:
                    return kube_exec.run(self._exec_api, target, command, stdin, deadline)
                except Exception as exc:
                    raise self._error(exc, "create", "pods/exec") from None

        with anyio.fail_after(deadline + REQUEST_TIMEOUT):
            code, out, err = await anyio.to_thread.run_sync(blocking, abandon_on_cancel=True)
        if code is None:
            raise HostUnavailable(self.member, self.host, "kube_unreachable",
                                  f"{args[0]} in pod {target.pod} did not finish within "
                                  f"{deadline:g}s (the exec stream: {err.decode()[:200]})",
                                  retryable=True)
        if code != 0:
            reason = err.decode("utf-8", "replace").strip()[-300:]
            missing = code == 127 or "not found" in reason
            raise HostUnavailable(
                self.member, self.host, "host_runtime_missing" if missing else "kube_exec_failed",
                f"{shlex.join(args[:2])} in pod {target.pod} exited {code} ({reason}); the "
                "image needs python3 and the runtime's CLI on its PATH", retryable=not missing)
        return out.decode("utf-8", "replace")

    async def connect(self) -> str:
        """The pod ready, and its home (the remote side's probe), once per start."""
        await self.ensure()
        if self._home is not None and self._probed[:1] == (self._uid,):
            return self._home  # the same pod as at the last probe: its home has not moved
        probe = json.loads((await self._side("probe")).strip().splitlines()[-1])
        self._home, self._probed = str(probe["home"]), (str(self._uid),)
        return self._home

    # -- paths --------------------------------------------------------------------------------

    @property
    def remote_root(self) -> str:
        return f"{self._home or kube_manifests.HOME}/.teamctl-remote/{self.plan.team}/" \
               f"{self.member}"

    def rewrite(self, value: str) -> str:
        """A local path under the member's private dir or the operator's home as it is in the
        pod; ``~`` as the pod's home."""
        home = self._home or kube_manifests.HOME
        local_state, local_home = str(self.state_dir), os.path.expanduser("~")
        if value == "~" or value.startswith("~/"):
            return home + value[1:]
        return value.replace(local_state, self.remote_root).replace(local_home + "/",
                                                                     home + "/")

    # -- contracts.Host -----------------------------------------------------------------------

    def find_executable(self, member: str, command: str | None, *, env_var: str,
                        default: str) -> str:
        """Named as it is in the image: looked for at the start (``host_runtime_missing``)."""
        return command or default

    def local_path(self, path: str) -> str | None:
        return None  # the member's files are the pod's

    def remote_path(self, path: str) -> str:
        return self.rewrite(path)

    async def spawn(self, argv: Sequence[str], *, cwd: Path,
                    env: Mapping[str, str]) -> Process:
        """The relay (``runtimes/hosts/kubernetes/relay.py``) exec'ing the remote side in the pod,
        whose
        stdio is the runtime's: its first stdin line the connection (with the credential),
        then the remote side's header (the mirrored dir, argv, cwd, env)."""
        await self.connect()
        executable = self.rewrite(argv[0])
        if executable not in self._probed[1:]:  # once per pod: a restart in it skips the call
            if not (await self._side("which", executable)).strip():
                raise HostUnavailable(self.member, self.host, "host_runtime_missing",
                                      f"{argv[0]} is not in the image", retryable=False)
            self._probed = (*self._probed, executable)
        header = {"root": self.remote_root, **self._mirror(),
                  "argv": [self.rewrite(a) for a in argv], "cwd": self.rewrite(str(cwd)),
                  "env": {k: self.rewrite(v) for k, v in env.items()
                          if not (k in BASE_ENV_NAMES and os.environ.get(k) == v)},
                  "grace": 5, "inherit": "all"}
        connection = await self._connection(["python3", "-c", _SIDE, "run"])
        if self._mcp_path is not None and self.mcp_socket is not None:
            connection["mcp"] = {"socket": str(self.mcp_socket), "url": (await self._connection(
                ["python3", "-c", _MUX, "listen", self._mcp_path]))["url"]}
        relay_env = {k: v for k, v in os.environ.items()
                     if k in BASE_ENV_NAMES or k == "PYTHONPATH"}
        process = await anyio.open_process(
            kube_exec.relay_argv(self.python), stdin=-1, stdout=-1, stderr=-1, env=relay_env,
            start_new_session=True)
        assert process.stdin is not None
        await process.stdin.send(json.dumps(connection).encode("utf-8") + b"\n" +
                                 json.dumps(header).encode("utf-8") + b"\n")
        log.info("kube_spawned", host=self.host, team=self.plan.team, member=self.member,
                 pod=self.pod_name, pid=process.pid, mode=self.mode)
        return process

    async def _connection(self, command: list[str]) -> dict[str, Any]:
        """The exec stream's URL, header and TLS options for the relay, resolved here once
        per start with the client (its token refreshed by the kubeconfig's hook)."""
        target = self._target()

        def blocking() -> dict[str, Any]:
            try:
                if self._api is None:
                    self._api = kube_exec.api_client(self.kubeconfig, self.context)
                return kube_exec.connection(self._api, target, command)
            except Exception as exc:  # a bad kubeconfig, an exec plugin that failed
                raise self._error(exc, "create", "pods/exec") from None

        with anyio.fail_after(REQUEST_TIMEOUT * 2):
            return await anyio.to_thread.run_sync(blocking, abandon_on_cancel=True)

    def _mirror(self) -> dict[str, Any]:
        """The member's private dir for the header: dirs, small text files (paths
        rewritten), symlinks (re-pointed)."""
        mirror: dict[str, Any] = {"dirs": [], "files": {}, "links": {}}
        for path in sorted(self.state_dir.rglob("*")):
            relative = path.relative_to(self.state_dir)
            if relative.parts[:1] in _MIRROR_SKIP or relative.parts[:2] in _MIRROR_SKIP:
                continue
            if path.is_symlink():
                mirror["links"][str(relative)] = self.rewrite(os.readlink(path))
            elif path.is_dir():
                mirror["dirs"].append(str(relative))
            elif path.is_file() and path.stat().st_size <= _MIRROR_MAX:
                try:
                    mirror["files"][str(relative)] = self.rewrite(path.read_text("utf-8"))
                except (UnicodeDecodeError, OSError):
                    continue
        return mirror

    async def put_file(self, image: ImagePart) -> Path | None:
        """A content-addressed copy in the pod, verified against its sha256 there."""
        if self._home is None or self.pod_name is None:  # first, or after a pause
            await self.connect()
        out = await self._side("put", image.sha256, str(len(image.data)), stdin=image.data,
                               deadline=SIDE_TIMEOUT + len(image.data) / 1e6)
        return Path(out.strip())

    async def exists(self, pattern: str) -> bool:
        if self._home is None or self.pod_name is None:  # first, or after a pause
            await self.connect()
        return (await self._side("exists", self.rewrite(pattern))).strip() == "true"

    async def version(self, executable: str, *, env: Mapping[str, str] | None = None,
                      cwd: Path | None = None, timeout: float = 60.0) -> dict[str, Any]:
        if self._home is None or self.pod_name is None:  # first, or after a pause
            await self.connect()
        out = await self._side("version", self.rewrite(executable), deadline=timeout)
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def place(self, files: Sequence[Placed]) -> None:
        """Made in the member's private dir here, which is mirrored there at its start."""
        place_here(files)

    async def confine(self, argv: Sequence[str], *, env: Mapping[str, str],
                      workdir: Path | None = None) -> Confined | None:
        """The member runs on another machine: nothing of it runs here."""
        return None

    async def forward_port(self, port: int) -> int:
        """A free port on the pod's loopback, reached from ``127.0.0.1:port`` here by a
        ``pods/portforward`` stream per connection (runtimes/hosts/kubernetes/forward.py); the
        previous launch's listener closed first."""
        await self.connect()
        remote, target = int((await self._side("freeport")).strip()), self._target()
        self._unforward()
        self._forward = await open_forward(self.member, self.host, self._api, target, port,
                                           remote, self._error)
        return remote

    def _unforward(self) -> None:
        if self._forward is not None:
            self._forward.close()
            self._forward = None

    def mcp_server(self, token: str, *, home: Path, socket: Path,
                   state_dir: Path) -> McpServer:
        """``teamctl mcp`` in the pod: its standard-library modules shipped in the member's
        private dir (mirrored there); this launch's socket in the pod (``/tmp``: a short path,
        the pod's own), carried by the relay to this member's own socket of the daemon
        (``mcp_socket``: ``member.*`` calls with its token only — never the control socket
        ``socket``, whose other methods are the operator's)."""
        if self.mcp_socket is None:
            raise HostUnavailable(self.member, self.host, "kube_unsupported",
                                  "this daemon serves no member socket for a pod's MCP tools; "
                                  "set messaging = false", retryable=False)
        directory = f"/tmp/tc-mcp-{secrets.token_hex(8)}"
        self._mcp_path = f"{directory}/teamctl.sock"
        return shipped_mcp_server(state_dir, {"TEAMCTL_MEMBER_TOKEN": token,
                                              "TEAMCTL_MCP_HOME": directory})

    async def forwarder(self) -> int | None:
        return None

    async def answers(self, deadline: float) -> bool:
        """The pod is still there and Running (a GET within ``deadline``)."""
        if self.pod_name is None:
            return True
        with anyio.move_on_after(deadline):
            try:
                found = await self._read_pod(self.pod_name)
            except HostUnavailable:
                return False
            return found is not None and _phase(found) == "Running"
        return False

    async def close(self) -> None:
        """``teamctl stop``: the Sandbox deleted (``keep``: suspended, its volume kept); the
        fallback's pod deleted (and its claim, unless ``keep``)."""
        await self.release()

    async def release(self) -> bool:
        """``close``, saying whether the objects went (or were suspended): a refusal or an
        API server out of reach is logged and the objects stay (the orphan sweep at the
        daemon's next start tries again: orchestrator/daemon/orphans.py)."""
        self._unforward()
        if self.mode is None:
            return False
        try:
            with anyio.fail_after(REQUEST_TIMEOUT * 3):
                await self._confirm_ours()
                await self._let_go(keep=self.keep)
        except (HostUnavailable, TimeoutError) as exc:  # stop goes on; the objects stay
            log.warning("kube_close_failed", host=self.host, member=self.member,
                        sandbox=self.plan.name, reason=str(exc))
            return False
        log.info("kube_closed", host=self.host, member=self.member, mode=self.mode,
                 kept=self.keep)
        self.pod_name = None
        return True

    async def _confirm_ours(self) -> None:
        """Before a delete by name: the object is this home's (or unlabelled: made before the
        label was), unless this start already saw it so; another home's raises
        ``kube_name_taken``."""
        if self._ours:
            return
        if self.mode == "sandbox":
            box = await self._call("get", "sandboxes.agents.x-k8s.io", self._sandbox_call(
                "get_namespaced_custom_object", self.plan.name))
            self._check_ours(None if box is None else box.get("metadata", {}).get("labels"),
                             "sandbox")
        else:
            pod = await self._read_pod(self.plan.name)
            self._check_ours(None if pod is None else pod["metadata"].get("labels"), "pod")
        self._ours = True

    async def suspend(self) -> None:
        """The member asleep (``pause_after``, ``max_running``): the Sandbox suspended (its pod
        gone, its volume kept); the fallback's pod deleted, its claim kept. The next start
        resumes it (``ensure``)."""
        self._unforward()  # its runtime stopped: no listener kept for it here
        if self.mode is None:
            return
        with anyio.move_on_after(REQUEST_TIMEOUT * 3) as scope:
            await self._confirm_ours()
            await self._let_go(keep=True)
        if scope.cancelled_caught:
            raise HostUnavailable(self.member, self.host, "kube_unreachable",
                                  f"suspending {self.plan.name} took over "
                                  f"{REQUEST_TIMEOUT * 3:g}s; is the API server up?",
                                  retryable=True)
        log.info("kube_suspended", host=self.host, member=self.member, mode=self.mode)
        self.pod_name = None

    async def _let_go(self, *, keep: bool) -> None:
        if self.mode == "sandbox":
            if keep:
                await self._call("patch", "sandboxes.agents.x-k8s.io", self._sandbox_call(
                    "patch_namespaced_custom_object", self.plan.name,
                    {"spec": {"operatingMode": "Suspended"}}))
            else:
                await self._call("delete", "sandboxes.agents.x-k8s.io", self._sandbox_call(
                    "delete_namespaced_custom_object", self.plan.name))
        else:
            await self._delete_pod()
            if not keep:
                await self._call("delete", "persistentvolumeclaims", self._core_call(
                    "DELETE", "persistentvolumeclaims", self.plan.claim))


def _phase(pod: Mapping[str, Any]) -> str | None:
    """A pod's ``status.phase`` (None: no status yet)."""
    return (pod.get("status") or {}).get("phase")


def kubernetes_host(team: str, member: str, host: str, config: KubernetesHostConfig,
                    state_dir: Path, *, mcp_socket: Path | None = None,
                    home: str = "", ceiling: Ceiling | None = None) -> KubernetesHost:
    """The host of a member the team file puts on ``[hosts.NAME] kind = "kubernetes"``
    (``mcp_socket``: the daemon's socket of this member, for its MCP tools; ``home``: the
    teamctl home's id, labelled on its objects; ``ceiling``: its container's resources)."""
    plan = PodPlan(team=team, member=member, namespace=config.namespace, image=config.image,
                   workdir=config.workdir, storage=config.storage,
                   storage_class=config.storage_class, runtime_class=config.runtime_class,
                   service_account=config.service_account, secret=config.secret,
                   template=config.template, home=home, ceiling=ceiling)
    kubeconfig = os.path.expanduser(config.kubeconfig) if config.kubeconfig else None
    return KubernetesHost(host, plan, state_dir, kubeconfig=kubeconfig, context=config.context,
                          keep=config.keep, start_timeout=config.start_timeout,
                          mcp_socket=mcp_socket)


def build(request: HostRequest) -> KubernetesHost:
    """The member's pod (``runtimes.hosts.KINDS["kubernetes"]``) from the team file's
    ``[kubernetes_hosts.NAME]`` (``request.settings``); its MCP tools reach the member's own
    socket, not the control one."""
    mcp = (request.mcp_socket() if request.mcp_socket is not None and request.messaging
           else None)
    return kubernetes_host(request.team, request.member, request.name or "", request.settings,
                           request.state_dir, mcp_socket=mcp, home=request.home_id(),
                           ceiling=request.ceiling)
