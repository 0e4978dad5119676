"""Member processes that outlived a dead daemon.

Members run in their own process groups, so a daemon killed with SIGKILL leaves them behind
(an ``opencode serve`` never exits by itself). The supervisor records each running member's pid
and its kernel start time in ``members/<team>/<member>/runtime.pid``; on start the daemon reads
those records and stops every process group that is still the one recorded (same pid *and*
start time, so a recycled pid is never touched) before it starts anything — a member is
resumed, never duplicated.

Members in Kubernetes pods leave objects, not processes: each is labelled with this home's
random id (``home_id``). Once the daemon has resumed the teams it should run, the sweep
(``reap_pod_orphans``) lists, in each namespace a journalled team uses, the objects labelled
as this home's, and lets go of those no wanted team's member owns (a team stopped while the
API refused its delete, a member gone from its team file): deleted, or suspended where the
host says ``keep``. A wanted member's objects are its again at its start (re-attached by name,
never made twice).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from orchestrator.beneath import read_beneath, write_beneath

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from orchestrator.config import KubernetesHostConfig
    from orchestrator.daemon.journal import TeamRecord

__all__ = ["forget", "home_id", "reap_orphans", "reap_pod_orphans", "record"]

log = structlog.get_logger("teamctl.orphans")

_RECORD = "runtime.pid"


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def record(member_dir: Path, pid: int) -> None:
    """Remember a running member process (atomically replaced, in the member's private dir —
    the daemon's — never through a name someone made there)."""
    started = _start_time(pid)
    if started is None:
        return
    write_beneath(member_dir, _RECORD, json.dumps({"pid": pid, "start_time": started}).encode())


def forget(member_dir: Path) -> None:
    (member_dir / _RECORD).unlink(missing_ok=True)


def reap_orphans(members_root: Path, *, grace: float = 5.0) -> list[int]:
    """Stop every recorded member process group that is still alive; their pids."""
    reaped = []
    for path in sorted(members_root.glob(f"*/*/{_RECORD}")):
        try:  # never through a link, never blocking on a FIFO
            entry = json.loads(read_beneath(path.parent, path.name, limit_bytes=4096))
            pid, started = int(entry["pid"]), int(entry["start_time"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _start_time(pid) == started:
            _stop_group(pid, grace)
            reaped.append(pid)
            log.warning("orphan_stopped", team=path.parent.parent.name,
                        member=path.parent.name, pid=pid)
        path.unlink(missing_ok=True)
    return reaped


def _stop_group(pid: int, grace: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if _start_time(pid) is None or _is_zombie(pid):
                return
            time.sleep(0.05)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class PodHost(Protocol):
    """What the sweep needs of a member's Kubernetes host (``runtimes.hosts.kubernetes.host``)."""

    mode: Any

    async def owned(self) -> set[tuple[str, str]]: ...

    async def release(self) -> bool: ...


class PodHosts(Protocol):
    def __call__(self, team: str, member: str, host: str, config: KubernetesHostConfig,
                 state_dir: Path, *, home: str) -> PodHost: ...


def home_id(root: Path) -> str:
    """This teamctl home's random id (made once, 0600 ``home-id``): the label telling its
    Kubernetes objects from another operator's in the same namespace."""
    path = root / "home-id"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as out:
        value = secrets.token_hex(8)
        out.write(value + "\n")
    return value


async def reap_pod_orphans(records: list[TeamRecord], home: str, members_root: Path, *,
                           wanted: Callable[[], Awaitable[set[tuple[str, str]]]],
                           pods: PodHosts) -> int:
    """Let go of this home's Kubernetes objects that no wanted member owns (``wanted``: the
    (team, member) of the teams that should run, asked again before each one); how many.
    ``pods``: makes a member's Kubernetes host (the composition root passes
    ``runtimes.hosts.kubernetes.host.kubernetes_host``: the core imports no runtime module)."""
    from orchestrator.config import TeamConfig

    places: dict[tuple[str | None, str | None, str], tuple[str, KubernetesHostConfig]] = {}
    keeps: dict[tuple[str, str], tuple[str, KubernetesHostConfig]] = {}
    for record in records:
        config = TeamConfig.model_validate(record.config)
        for name, table in config.kubernetes_hosts.items():
            places.setdefault((table.kubeconfig, table.context, table.namespace), (name, table))
        for member in config.members:
            if member.host in config.kubernetes_hosts:
                keeps[(config.name, member.name)] = (member.host,
                                                     config.kubernetes_hosts[member.host])
    reaped = 0
    for name, table in places.values():
        reaped += await _sweep(name, table, home, members_root, keeps, wanted, pods)
    return reaped


async def _sweep(name: str, table: KubernetesHostConfig, home: str, members_root: Path,
                 keeps: dict[tuple[str, str], tuple[str, KubernetesHostConfig]],
                 wanted: Callable[[], Awaitable[set[tuple[str, str]]]], pods: PodHosts) -> int:
    from orchestrator.contracts import HostUnavailable

    lister = pods("", "", name, table, members_root, home=home)
    try:
        found = await lister.owned()
    except (HostUnavailable, TimeoutError) as exc:  # the cluster down: they wait for the next
        log.warning("kube_orphans_unlisted", host=name, namespace=table.namespace,
                    code=getattr(exc, "code", "kube_unreachable"),
                    reason=getattr(exc, "reason", "no answer in time"))
        return 0
    reaped = 0
    for team, member in sorted(found - await wanted()):
        if (team, member) in await wanted():  # launched meanwhile: its own again
            continue
        host, config = keeps.get((team, member), (name, table))
        orphan = pods(team, member, host, config, members_root / team / member, home=home)
        orphan.mode = lister.mode
        if await orphan.release():  # deleted, or suspended (keep); a refusal logged there
            log.warning("kube_orphan_reaped", host=host, namespace=table.namespace, team=team,
                        member=member, kept=config.keep)
            reaped += 1
    return reaped
