"""Facts about local processes the core and the adapters both need, from /proc and PATH:
whether a process is stopped (a frozen member), what a process tree holds (recycling), and
where a member's executable is (standard library only; ``orchestrator.contracts`` re-exports
them for the adapters)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ExecutableNotFound

__all__ = ["TreeUsage", "process_stopped", "process_tree", "resolve_executable"]


def resolve_executable(
    member: str, command: str | None, *, env_var: str, default: str
) -> str:
    """The member's ``command``, else ``$env_var``, else ``default`` on PATH; absolute."""
    wanted = command or os.environ.get(env_var) or default
    found = shutil.which(wanted)
    if found is None:
        raise ExecutableNotFound(member, wanted, env_var)
    return os.path.abspath(found)


def process_stopped(pid: int | None) -> bool:
    """True if the process is stopped (SIGSTOP, a debugger): it cannot answer anything."""
    if pid is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(") ")[2][:1] in ("T", "t")


@dataclass(frozen=True)
class TreeUsage:
    """A process and its descendants: their resident memory, and how many descendants."""

    rss_bytes: int
    children: int


_table_lock = threading.Lock()
_parents: dict[int, int] = {}  # pid -> parent pid, as last read
_full_scan_at = -float("inf")
_table: dict[int, list[int]] = {}  # the children table as last built
_table_at = -float("inf")


def _read_parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None  # it exited while we looked
    return int(stat.rpartition(b") ")[2].split(maxsplit=2)[1])


def _children_table(max_age: float, reuse: float = 0.0) -> dict[int, list[int]]:
    """Every process's children. Within ``max_age`` seconds of a full scan of /proc's ``stat``
    files, only the processes that appeared since are read (listing /proc's names is cheap; its
    files are not) and those that are gone dropped — so a hundred members' checks cost a hundred
    directory listings and one full scan, and a child born a moment ago is still seen. (A pid
    reused within ``max_age`` keeps its old parent until the next full scan.
    ``/proc/PID/task/TID/children`` would walk one tree only, but kernels without
    CONFIG_PROC_CHILDREN, and gVisor, lack it.) ``reuse``: a table built that many seconds ago
    or less is returned as it is — a hundred members' checks within it share one listing."""
    global _full_scan_at, _table, _table_at
    with _table_lock:
        now = time.monotonic()
        if now - _table_at < reuse:
            return _table
        pids = {int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()}
        if max_age <= 0 or now - _full_scan_at >= max_age:
            _parents.clear()
            _full_scan_at = now
        for gone in _parents.keys() - pids:
            del _parents[gone]
        for pid in pids - _parents.keys():
            parent = _read_parent(pid)
            if parent is not None:
                _parents[pid] = parent
        children: dict[int, list[int]] = {pid: [] for pid in _parents}
        for pid, parent in _parents.items():
            children.setdefault(parent, []).append(pid)
        _table, _table_at = children, now
        return children


def process_tree(pid: int, *, max_age: float = 0.0, reuse: float = 0.0) -> TreeUsage | None:
    """What ``pid`` and every process below it hold now, from /proc (None: no such process).
    Descendants are found by parent pid, so a child that left the process group still counts;
    one that was re-parented away (its parent died) does not — the group kill covers those.
    ``max_age``: how long ago the last full scan of /proc may be (0: a full scan now); within
    it, only new processes are read. ``reuse``: how old a table of /proc may be and still serve
    this call as it is (0: list /proc now; a process born since is not seen until the next)."""
    children_of = _children_table(max_age, reuse)
    if pid not in children_of:
        return None
    tree, frontier = {pid}, [pid]
    while frontier:
        for child in children_of.get(frontier.pop(), ()):
            if child not in tree:
                tree.add(child)
                frontier.append(child)
    page = os.sysconf("SC_PAGE_SIZE")
    rss = 0
    for member in tree:
        try:
            with open(f"/proc/{member}/statm", "rb") as file:
                fields = file.read().split()
        except OSError:
            continue
        rss += int(fields[1]) * page if len(fields) > 1 else 0
    if not Path(f"/proc/{pid}").exists():
        return None
    return TreeUsage(rss_bytes=rss, children=len(tree) - 1)
