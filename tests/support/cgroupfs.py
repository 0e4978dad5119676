"""A fake cgroup filesystem in a test's directory, for ``orchestrator.cgroups.Cgroups(root,
mkdir=, rmdir=)``: ``proc/self/cgroup`` and ``proc/self/mountinfo`` as the kernel writes them,
the mounted hierarchies as directories, and a fake kernel that fills a new cgroup directory with
its interface files (and empties it on rmdir, refusing while a pid is listed in it) — the v2
code path, and every machine shape this one is not, tested without a kernel."""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["FakeCgroupfs", "hybrid_v1", "v2_delegated", "v2_root"]

_V1_FILES = {
    "memory": {"memory.limit_in_bytes": "9223372036854771712\n",
               "memory.memsw.limit_in_bytes": "9223372036854771712\n",
               "memory.soft_limit_in_bytes": "9223372036854771712\n",
               "memory.max_usage_in_bytes": "0\n", "memory.memsw.max_usage_in_bytes": "0\n",
               "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"},
    "cpu": {"cpu.shares": "1024\n"},
    "pids": {"pids.max": "max\n"},
}
_V2_FILES = {
    "memory": {"memory.max": "max\n", "memory.high": "max\n", "memory.swap.max": "max\n",
               "memory.peak": "0\n",
               "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"},
    "cpu": {"cpu.weight": "100\n"},
    "pids": {"pids.max": "max\n"},
}


@dataclass
class FakeCgroupfs:
    """The tree under ``root``; ``hierarchies``: each mounted directory (relative to root)
    and the controllers its cgroups have (v1: its own; v2: those enabled)."""

    root: Path
    version: int
    hierarchies: dict[str, frozenset[str]] = field(default_factory=dict)
    made: list[Path] = field(default_factory=list)
    readonly: set[Path] = field(default_factory=set)  # what this user may not write

    def writable(self, path: Path) -> bool:
        return path not in self.readonly

    def mkdir(self, path: Path) -> None:
        """The kernel's: a cgroup directory with its interface files."""
        path.mkdir()
        self.made.append(path)
        for name in ("cgroup.procs", "tasks") if self.version == 1 else (
                "cgroup.procs", "cgroup.controllers", "cgroup.subtree_control", "cgroup.kill"):
            (path / name).write_text("")
        controllers = self._controllers(path)
        if self.version == 2:
            given = (path.parent / "cgroup.subtree_control").read_text().split()
            controllers = frozenset(name.lstrip("+") for name in given) & controllers
            (path / "cgroup.controllers").write_text(" ".join(sorted(controllers)))
        for controller in controllers:
            for name, text in (_V1_FILES if self.version == 1 else _V2_FILES)[controller].items():
                (path / name).write_text(text)

    def rmdir(self, path: Path) -> None:
        """The kernel's: refused while a pid is in it or a child cgroup is."""
        if (path / "cgroup.procs").read_text().split():
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        if any(child.is_dir() for child in path.iterdir()):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        shutil.rmtree(path)

    def _controllers(self, path: Path) -> frozenset[str]:
        for mount, controllers in self.hierarchies.items():
            if (self.root / mount) in path.parents:
                return controllers
        return frozenset()

    def cgroup(self, mount: str, path: str, *, controllers: frozenset[str] | None = None) -> Path:
        """A cgroup that exists already (the daemon's own, its parents)."""
        where = self.root / mount / path.lstrip("/")
        where.mkdir(parents=True, exist_ok=True)
        for name in ("cgroup.procs", "cgroup.subtree_control"):
            if not (where / name).exists():
                (where / name).write_text("")
        if self.version == 2:
            (where / "cgroup.controllers").write_text(
                " ".join(sorted(self.hierarchies[mount] if controllers is None else controllers)))
        return where


def _proc(root: Path, cgroup: str, mountinfo: list[str]) -> None:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(cgroup)
    (root / "proc/self/mountinfo").write_text("\n".join(mountinfo) + "\n")


def hybrid_v1(root: Path, *, own_memory: str = "/process_api/abc",
              controllers: tuple[str, ...] = ("memory", "cpu", "pids")) -> FakeCgroupfs:
    """This project's CI machines: v1 hierarchies (``controllers``), the daemon in a memory
    cgroup of its own, and a v2 mount with no controller enabled."""
    mounts = {"memory": "memory", "cpu": "cpu,cpuacct", "pids": "pids"}
    lines = [f"{n}:{mounts[c]}:{own_memory if c == 'memory' else '/'}"
             for n, c in enumerate(controllers, 2)] + ["0::/"]
    info = ["31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755"]
    info += [f"{40 + n} 31 0:{40 + n} / /sys/fs/cgroup/{c} rw,relatime - cgroup cgroup "
             f"rw,{mounts[c]}" for n, c in enumerate(controllers)]
    info.append("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw")
    _proc(root, "\n".join(lines) + "\n", info)
    fs = FakeCgroupfs(root, 1, {f"sys/fs/cgroup/{c}": frozenset({c}) for c in controllers})
    for controller in controllers:
        fs.cgroup(f"sys/fs/cgroup/{controller}", own_memory if controller == "memory" else "/")
    fs.hierarchies["sys/fs/cgroup/unified"] = frozenset()
    unified = fs.cgroup("sys/fs/cgroup/unified", "/")
    (unified / "cgroup.controllers").write_text("hugetlb")
    return fs


def v2_delegated(root: Path, *, own: str = "/user.slice/user-1000.slice/user@1000.service/"
                 "app.slice/run-1.scope",
                 enabled: frozenset[str] = frozenset({"memory", "cpu", "pids"}),
                 writable: bool = True) -> FakeCgroupfs:
    """A systemd machine, cgroup v2 alone: the daemon in a scope of the user's manager, whose
    parent slice is the user's (``writable``) with ``enabled`` controllers."""
    _proc(root, f"0::{own}\n", [
        "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"])
    fs = FakeCgroupfs(root, 2, {"sys/fs/cgroup": enabled})
    parent = fs.cgroup("sys/fs/cgroup", own.rsplit("/", 1)[0])
    (parent / "cgroup.subtree_control").write_text(" ".join(sorted(enabled)))
    fs.cgroup("sys/fs/cgroup", own)
    if not writable:
        fs.readonly.add(parent)
    return fs


def v2_root(root: Path) -> FakeCgroupfs:
    """cgroup v2, the daemon at the hierarchy's root (a root daemon in a minimal VM)."""
    _proc(root, "0::/\n", ["30 23 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw"])
    fs = FakeCgroupfs(root, 2, {"sys/fs/cgroup": frozenset({"memory", "cpu", "pids", "io"})})
    fs.cgroup("sys/fs/cgroup", "/")
    return fs
