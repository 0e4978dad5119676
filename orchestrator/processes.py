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
_table: tuple[float, dict[int, list[int]]] | None = None  # (taken at, parent -> children)


def _children_table(max_age: float) -> dict[int, list[int]]:
    """Every process's children, from one scan of /proc's ``stat`` files — reused while it is
    younger than ``max_age`` seconds, so a hundred members' checks cost one scan, not a hundred.
    (``/proc/PID/task/TID/children`` would walk one tree only, but kernels without
    CONFIG_PROC_CHILDREN, and gVisor, lack it.)"""
    global _table
    with _table_lock:
        now = time.monotonic()
        if _table is not None and max_age > 0 and now - _table[0] < max_age:
            return _table[1]
        children: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"{entry.path}/stat", "rb") as file:
                    stat = file.read()
            except OSError:
                continue  # it exited while we looked
            parent = int(stat.rpartition(b") ")[2].split(maxsplit=2)[1])
            children.setdefault(parent, []).append(int(entry.name))
            children.setdefault(int(entry.name), [])
        _table = (now, children)
        return children


def process_tree(pid: int, *, max_age: float = 0.0) -> TreeUsage | None:
    """What ``pid`` and every process below it hold now, from /proc (None: no such process).
    Descendants are found by parent pid, so a child that left the process group still counts;
    one that was re-parented away (its parent died) does not — the group kill covers those.
    ``max_age``: how old a shared scan of the process table may be (0: a fresh one)."""
    children_of = _children_table(max_age)
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
