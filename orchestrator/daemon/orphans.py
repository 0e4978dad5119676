"""Member processes that outlived a dead daemon.

Members run in their own process groups, so a daemon killed with SIGKILL leaves them behind
(an ``opencode serve`` never exits by itself). The supervisor records each running member's pid
and its kernel start time in ``members/<team>/<member>/runtime.pid``; on start the daemon reads
those records and stops every process group that is still the one recorded (same pid *and*
start time, so a recycled pid is never touched) before it starts anything — a member is
resumed, never duplicated.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import structlog

__all__ = ["forget", "reap_orphans", "record"]

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
    """Remember a running member process (atomically replaced)."""
    started = _start_time(pid)
    if started is None:
        return
    tmp = member_dir / f".{_RECORD}.tmp"
    tmp.write_text(json.dumps({"pid": pid, "start_time": started}))
    os.replace(tmp, member_dir / _RECORD)


def forget(member_dir: Path) -> None:
    (member_dir / _RECORD).unlink(missing_ok=True)


def reap_orphans(members_root: Path, *, grace: float = 5.0) -> list[int]:
    """Stop every recorded member process group that is still alive; their pids."""
    reaped = []
    for path in sorted(members_root.glob(f"*/*/{_RECORD}")):
        try:
            entry = json.loads(path.read_text())
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
