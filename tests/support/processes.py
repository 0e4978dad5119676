"""Waits on processes and paths for the tests, on events rather than polls: a pid's exit
(pidfd), a path's creation (inotify), and what a /proc scan says of a pid (alive, not a zombie;
its children; the cgroup it is in)."""

from __future__ import annotations

import os
import select
from pathlib import Path


def wait_pid_exit(pid: int, timeout: float) -> bool:
    """True once ``pid`` has exited (pidfd: an event, not a poll loop); False at the deadline."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def wait_for_path(path: Path, timeout: float) -> bool:
    """True once ``path`` exists (inotify through watchfiles: an event, not a poll loop)."""
    import time

    import watchfiles

    if path.exists():
        return True
    deadline = time.monotonic() + timeout
    for _changes in watchfiles.watch(path.parent, yield_on_timeout=True, rust_timeout=500,
                                     debounce=10, step=10):
        if path.exists():
            return True
        if time.monotonic() > deadline:
            return False
    return path.exists()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not _is_zombie(pid)


def children_of(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (a /proc scan: a reader or a runtime left
    running would be one)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


def cgroup_dir(pid: int, controller: str = "memory") -> Path:
    """The directory of ``pid``'s cgroup for ``controller``: in the v1 hierarchy that has
    it, else in v2's."""
    own = [line.split(":", 2) for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()]
    v1 = [path for _, names, path in own if controller in names.split(",")]
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, (fstype, _, options) = line.split(" - ")[0].split(), line.split(" - ")[1].split()
        if (fstype == "cgroup" and v1 and controller in options.split(",")) or \
                (fstype == "cgroup2" and not v1):
            path = v1[0] if v1 else next(p for n, names, p in own if n == "0" and not names)
            return Path(fields[4]) / path.removeprefix(fields[3]).lstrip("/")
    raise AssertionError(f"no cgroup hierarchy has {controller}")
