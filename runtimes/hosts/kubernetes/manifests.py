"""The Kubernetes objects of a member in a pod (docs/scaling.md, "On Kubernetes"): one
agent-sandbox ``Sandbox`` (``agents.x-k8s.io/v1beta1``), or — where that CRD is absent — a
``Pod`` and its ``PersistentVolumeClaim``. Plain dicts, as the API server takes them
(tests/unit/test_kube_manifests.py validates them against the CRD's and Kubernetes' schemas).

The pod only keeps a volume and waits: its main process sleeps, the runtime is started by an
exec (runtimes/hosts/kubernetes/host.py), so teamctl's restart policy — not the kubelet — decides
about it. One volume holds the working tree (``workdir``) and the runtime's home (its session files:
Claude's transcripts, for ``--resume`` after a reschedule), as two sub-paths. Credentials come
from the Secret the team file names, as environment (``envFrom``): never a value here. The pod
mounts no service-account token unless the team file names a service account. A member's
ceiling is its container's ``resources`` (``resources``): ``memory_max`` its memory limit,
``memory_high`` its memory request, ``cpu_weight`` its CPU request (weight × 10 millicores, as
the kubelet maps a request to a share: 100 is one CPU); ``pids_max`` has no per-pod field (the
launch refuses it for a member in a pod).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.contracts import Ceiling

__all__ = ["CONTAINER", "HOME", "LABEL_HOME", "LABEL_MEMBER", "LABEL_OWNER", "LABEL_TEAM",
           "POD_NAME_ANNOTATION",
           "SANDBOX_GROUP", "SANDBOX_PLURAL", "SANDBOX_VERSION", "VOLUME", "PodPlan", "object_name",
           "pod", "pvc", "resources", "sandbox"]

SANDBOX_GROUP = "agents.x-k8s.io"
SANDBOX_VERSION = "v1beta1"
SANDBOX_PLURAL = "sandboxes"
# the controller names a sandbox's pod after the sandbox, or here when it adopted a warm one
POD_NAME_ANNOTATION = "agents.x-k8s.io/pod-name"
LABEL_TEAM = "teamctl.dev/team"
LABEL_MEMBER = "teamctl.dev/member"
LABEL_OWNER = "app.kubernetes.io/managed-by"
# which teamctl home made it (its random id): two operators' teamctls in one namespace never
# list, reattach to or delete each other's objects (runtimes/hosts/kubernetes/host.py,
# daemon/orphans.py)
LABEL_HOME = "teamctl.dev/home"
HOME = "/home/teamctl"  # the runtime's home in the pod (on the volume)
CONTAINER = "agent"
VOLUME = "work"
# the pod's main process: wait, and end at once on SIGTERM (as PID 1 nothing else would)
_SLEEP = ("import signal, sys; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
          "signal.pause()")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class PodPlan:
    """What a member's pod is made of (a ``[hosts.NAME] kind = "kubernetes"`` table)."""

    team: str
    member: str
    namespace: str
    image: str | None  # None: the template's (runtimes/hosts/kubernetes/template.py)
    workdir: str = "/workspace"
    storage: str = "10Gi"
    storage_class: str | None = None
    runtime_class: str | None = None
    service_account: str | None = None
    secret: str | None = None
    template: str | None = None  # an agent-sandbox SandboxTemplate of the namespace
    home: str = ""  # the teamctl home's id (LABEL_HOME); "" for none (doctor)
    ceiling: Ceiling | None = None  # the member's ceiling: its container's resources

    @property
    def name(self) -> str:
        return object_name(self.team, self.member)

    @property
    def claim(self) -> str:
        """The volume's claim: the name agent-sandbox gives a ``volumeClaimTemplates`` entry
        (``<template>-<sandbox>``), kept for the fallback Pod too."""
        return f"{VOLUME}-{self.name}"

    @property
    def labels(self) -> dict[str, str]:
        home = {LABEL_HOME: self.home} if self.home else {}
        return {LABEL_TEAM: _label(self.team), LABEL_MEMBER: _label(self.member),
                LABEL_OWNER: "teamctl", **home}


def object_name(team: str, member: str) -> str:
    """A DNS label (≤ 52 characters, lower case: room for the claim's ``work-``) naming the
    member's objects: readable, and unique by a hash of the exact names (lower-casing and
    ``_`` → ``-`` could make two names one)."""
    digest = hashlib.sha256(f"{team}\0{member}".encode()).hexdigest()[:8]
    readable = re.sub(r"[^a-z0-9]+", "-", f"{team}-{member}".lower())[:40].strip("-")
    return f"tc-{readable}-{digest}" if readable else f"tc-{digest}"


def _label(value: str) -> str:
    """A label value: the name itself when Kubernetes takes it, else a readable hashed form
    (the exact names are in the annotations)."""
    if len(value) <= 63 and _LABEL_VALUE.match(value):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9]+$", "", re.sub(r"^[^A-Za-z0-9]+", "", value[:50])) + "-" + digest


def resources(ceiling: Ceiling | None) -> dict[str, dict[str, str]]:
    """The container's ``resources`` for a member's ceiling ({}: none)."""
    if ceiling is None:
        return {}
    limits = {} if ceiling.memory_max is None else {"memory": str(ceiling.memory_max)}
    requests = {} if ceiling.memory_high is None else {"memory": str(ceiling.memory_high)}
    if ceiling.cpu_weight is not None:
        requests["cpu"] = f"{ceiling.cpu_weight * 10}m"
    return {key: value for key, value in (("limits", limits), ("requests", requests)) if value}


def _metadata(plan: PodPlan, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": plan.namespace, "labels": plan.labels,
            "annotations": {LABEL_TEAM: plan.team, LABEL_MEMBER: plan.member}}


def _pod_spec(plan: PodPlan, volumes: list[dict[str, Any]]) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": CONTAINER, **({"image": plan.image} if plan.image else {}),
        "command": ["python3", "-c", _SLEEP],
        "workingDir": plan.workdir,
        "env": [{"name": "HOME", "value": HOME}],
        "volumeMounts": [{"name": VOLUME, "mountPath": plan.workdir, "subPath": "workspace"},
                         {"name": VOLUME, "mountPath": HOME, "subPath": "home"}],
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    if plan.secret is not None:  # the member's API keys, by the Secret's name only
        container["envFrom"] = [{"secretRef": {"name": plan.secret}}]
    if resources(plan.ceiling):
        container["resources"] = resources(plan.ceiling)
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Always",  # the sleeper only: the runtime is an exec, never restarted here
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": plan.service_account is not None,
    }
    if volumes:
        spec["volumes"] = volumes
    if plan.runtime_class is not None:
        spec["runtimeClassName"] = plan.runtime_class
    if plan.service_account is not None:
        spec["serviceAccountName"] = plan.service_account
    return spec


def _claim_spec(plan: PodPlan) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": plan.storage}}}
    if plan.storage_class is not None:
        spec["storageClassName"] = plan.storage_class
    return spec


def sandbox(plan: PodPlan, *, running: bool = True) -> dict[str, Any]:
    """The member's ``Sandbox``: a pod template and one volume claim (the controller mounts
    it as the volume of the same name); ``running`` False: ``Suspended`` (pod gone, volume
    kept: ``keep = true`` at stop)."""
    return {
        "apiVersion": f"{SANDBOX_GROUP}/{SANDBOX_VERSION}", "kind": "Sandbox",
        "metadata": _metadata(plan, plan.name),
        "spec": {
            "operatingMode": "Running" if running else "Suspended",
            "podTemplate": {"metadata": {"labels": plan.labels},
                            "spec": _pod_spec(plan, [])},
            "volumeClaimTemplates": [{"metadata": {"name": VOLUME, "labels": plan.labels},
                                      "spec": _claim_spec(plan)}],
        },
    }


def pvc(plan: PodPlan) -> dict[str, Any]:
    """The fallback's volume (where the Sandbox CRD is absent), named as the controller would."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _metadata(plan, plan.claim), "spec": _claim_spec(plan)}


def pod(plan: PodPlan) -> dict[str, Any]:
    """The fallback's pod, on the claim ``pvc`` makes."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _metadata(plan, plan.name),
            "spec": _pod_spec(plan, [{"name": VOLUME,
                                      "persistentVolumeClaim": {"claimName": plan.claim}}])}
