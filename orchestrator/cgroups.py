"""This machine's cgroups, and a member's made in them (docs/operations.md, "A ceiling per
teammate"): where they can go, made with the member's limits, read (its OOM kills, its peak),
emptied and removed. Standard library only, and python 3.8's: the daemon's governor
(``orchestrator/daemon/members/_ceilings.py``) makes them here, ``teamctl doctor`` says what the
machine supports, and an SSH host's remote side runs this very file there (its source shipped
on the channel: ``runtimes/hosts/remote_side.py``'s ``cgroup`` mode) for a member on that host.

Which hierarchy, for the controllers a ceiling needs (``memory``, ``cpu``, ``pids``):

- **cgroup v2** where they are enabled there: teamctl's group is made *beside* the daemon's own
  cgroup — in its parent, where the daemon may write there (a systemd user manager's delegated
  subtree: a daemon started with ``systemd-run --user --scope``; any cgroup when root), or at
  the hierarchy's root when the daemon sits there. Never inside the daemon's own cgroup: v2
  lets no cgroup that holds processes give controllers to children, and the daemon never
  shares a cgroup with a member.
- **cgroup v1** where they are mounted as v1 hierarchies (each its own, as on this project's
  CI machines): under the daemon's own cgroup in each.

A member's cgroup is ``<base>/teamctl-<home id>/<team>.<member>`` in each hierarchy used. Paths
are read from ``root`` (``/``: ``proc/self/cgroup``, ``proc/self/mountinfo`` and the mounts they
name), and a directory is made and removed through ``mkdir``/``rmdir``: a test gives a fake
tree and a fake kernel that fills a new directory with its files.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from orchestrator.ceilings import Ceiling

__all__ = ["CONTROLLERS", "ENABLE_HERE", "CgroupError", "Cgroups", "Group", "Hierarchy", "Layout",
           "Verdict"]

CONTROLLERS = ("memory", "cpu", "pids")
# what to enable where no cgroup can be had for the daemon's members on this machine
ENABLE_HERE = ("run the daemon as root, or under a systemd user manager that delegates it "
               "(systemd-run --user --scope teamctl daemon, with Delegate=memory cpu pids on "
               "user@.service)")
_V1_SHARES_PER_WEIGHT = 1024 / 100  # cpu.shares 1024 is cpu.weight 100 (as systemd maps them)


class CgroupError(Exception):
    """A member's cgroup could not be made or written (the reason, the path)."""


@dataclass(frozen=True)
class Hierarchy:
    """One place teamctl's group can go: its version, the directory it is made in, and the
    controllers a child of that directory can have."""

    version: Literal[1, 2]
    base: Path
    controllers: frozenset[str]


@dataclass(frozen=True)
class Layout:
    """What this machine offers the daemon: a v2 hierarchy (None: none usable), the v1 ones by
    controller, and why each thing looked for is not usable (``notes``); ``machine`` and
    ``enable``: how a refusal names the machine and what to enable there."""

    v2: Hierarchy | None
    v1: Mapping[str, Hierarchy]
    notes: tuple[str, ...]
    machine: str = "this machine"
    enable: str = ENABLE_HERE

    def choose(self, controllers: frozenset[str]) -> tuple[Hierarchy, ...] | str:
        """The hierarchies a member needing ``controllers`` gets (v2: one; v1: one per
        controller), or why none can be had and what to enable."""
        if self.v2 is not None and controllers <= self.v2.controllers:
            return (self.v2,)
        if all(name in self.v1 for name in controllers):
            return tuple(dict.fromkeys(self.v1[name] for name in sorted(controllers)))
        had = set(self.v2.controllers if self.v2 is not None else ()) | set(self.v1)
        missing = sorted(controllers - had) or sorted(controllers)
        found = [*self.notes]
        if self.v2 is not None:
            found.append(f"cgroup v2 at {self.v2.base} has "
                         f"{', '.join(sorted(self.v2.controllers))}")
        if self.v1:
            found.append(f"cgroup v1 has {', '.join(sorted(self.v1))}")
        seen = "; ".join(found) or "no cgroup hierarchy is mounted"
        return (f"no cgroup of {self.machine} can take the {', '.join(missing)} controller"
                f"{'s' if len(missing) > 1 else ''} ({seen}); enable it: {self.enable}")


@dataclass(frozen=True)
class Verdict:
    """What a member's cgroup saw: the processes the kernel's OOM killer ended in it, and the
    most memory it held (None: the kernel keeps no peak, v2 before Linux 5.19)."""

    oom_kills: int
    peak: int | None


@dataclass(frozen=True)
class Group:
    """A member's cgroup: its directory in each hierarchy, by controller (v2: one for all)."""

    version: Literal[1, 2]
    dirs: Mapping[str, Path]

    @property
    def paths(self) -> tuple[Path, ...]:
        """Each directory once."""
        return tuple(dict.fromkeys(self.dirs.values()))

    @property
    def procs(self) -> tuple[Path, ...]:
        """The ``cgroup.procs`` files a process writes its pid into to enter it."""
        return tuple(path / "cgroup.procs" for path in self.paths)


def _unescape(field: str) -> str:
    """A mountinfo field (spaces and such as ``\\040``)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _within(own: str, mount_root: str) -> str | None:
    """``own`` (a cgroup path) relative to a mount showing ``mount_root``; None outside it."""
    if mount_root == "/":
        return own.lstrip("/")
    if own == mount_root or own.startswith(mount_root.rstrip("/") + "/"):
        return own[len(mount_root):].lstrip("/")
    return None


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path / "cgroup.procs", os.W_OK)


def _mkdir(path: Path) -> None:
    path.mkdir(mode=0o755)


def _rmdir(path: Path) -> None:
    path.rmdir()


class Cgroups:
    """This machine's cgroups as the daemon (or doctor) sees them from its own process."""

    def __init__(self, root: Path = Path("/"), *, mkdir: Callable[[Path], None] = _mkdir,
                 rmdir: Callable[[Path], None] = _rmdir,
                 writable: Callable[[Path], bool] = _writable, machine: str = "this machine",
                 enable: str = ENABLE_HERE) -> None:
        """``root``: where ``proc`` and the mounts are read (a test's fake tree);
        ``mkdir``/``rmdir``: how a cgroup's directory is made and removed (the kernel fills
        and empties it; a test's fake kernel does the same); ``writable``: whether this user
        may make a cgroup in a directory and move a process there (a test's, run as root);
        ``machine``, ``enable``: how a refusal names the machine ("host gpu1") and what to
        enable there."""
        self._root = root
        self._mkdir = mkdir
        self._rmdir = rmdir
        self._writable = writable
        self._machine = machine
        self._enable = enable
        self._lock = threading.Lock()  # teamctl's group is made and removed by one at a time
        self._layout: Layout | None = None

    def layout(self) -> Layout:
        """Where members' cgroups can go (read once: the daemon's cgroup does not move)."""
        if self._layout is None:
            self._layout = self._find()
        return self._layout

    def _find(self) -> Layout:
        own_v2: str | None = None
        own_v1: dict[str, str] = {}
        for line in _read(self._root / "proc/self/cgroup").splitlines():
            number, _, rest = line.partition(":")
            names, _, path = rest.partition(":")
            if number == "0" and not names:
                own_v2 = path
            for name in names.split(","):
                if name in CONTROLLERS:
                    own_v1[name] = path
        notes: list[str] = []
        v2: Hierarchy | None = None
        v1: dict[str, Hierarchy] = {}
        for line in _read(self._root / "proc/self/mountinfo").splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) < 5 or len(tail) < 3:
                continue
            mount_root, mount = _unescape(fields[3]), self._root / _unescape(fields[4])[1:]
            if tail[0] == "cgroup2" and own_v2 is not None and v2 is None:
                v2 = self._v2(mount, mount_root, own_v2, notes)
            elif tail[0] == "cgroup":
                for name in sorted(set(tail[2].split(",")) & set(own_v1)):
                    found = self._v1(name, mount, mount_root, own_v1[name], notes)
                    if found is not None:
                        v1[name] = found
        return Layout(v2=v2, v1=v1, notes=tuple(notes), machine=self._machine,
                      enable=self._enable)

    def _v2(self, mount: Path, mount_root: str, own: str, notes: list[str]) -> Hierarchy | None:
        relative = _within(own, mount_root)
        if relative is None:
            notes.append(f"cgroup v2: the daemon's cgroup {own} is outside the mount {mount}")
            return None
        base = (mount / relative).parent if relative else mount
        if not self._writable(base):
            notes.append(f"cgroup v2: {base} (beside the daemon's cgroup) is not writable "
                         "by this user")
            return None
        controllers = frozenset(_read(base / "cgroup.controllers").split()) & set(CONTROLLERS)
        if not controllers:
            notes.append(f"cgroup v2 at {mount}: no memory, cpu or pids controller is "
                         f"enabled for {base}")
            return None
        return Hierarchy(2, base, controllers)

    def _v1(self, name: str, mount: Path, mount_root: str, own: str,
            notes: list[str]) -> Hierarchy | None:
        relative = _within(own, mount_root)
        base = None if relative is None else mount / relative
        if base is None or not self._writable(base):
            notes.append(f"cgroup v1 {name}: {base or mount} is not writable by this user")
            return None
        return Hierarchy(1, base, frozenset({name}))

    # -- a member's group -----------------------------------------------------------------------

    def probe(self, controllers: frozenset[str], top: str) -> str | None:
        """Whether a member needing ``controllers`` can have a cgroup here, by making one
        under ``top`` (teamctl's group) and removing it: None, or why not and what to enable."""
        try:
            group = self.make(controllers, top, f"probe-{os.getpid()}-{threading.get_ident()}")
        except CgroupError as exc:
            return str(exc)
        self.remove(group, top)
        return None

    def make(self, controllers: frozenset[str], top: str, name: str,
             ceiling: Ceiling | None = None) -> Group:
        """``<base>/<top>/<name>`` in each hierarchy ``controllers`` need, with ``ceiling``'s
        limits written (one left there by an earlier daemon is taken over, its limits
        rewritten). CgroupError: what failed, on which path."""
        chosen = self.layout().choose(controllers)
        if isinstance(chosen, str):
            raise CgroupError(chosen)
        dirs: dict[str, Path] = {}
        with self._lock:
            for hierarchy in chosen:
                path = hierarchy.base / top / name
                try:
                    self._made(hierarchy.base / top)
                    if hierarchy.version == 2:
                        _enable(hierarchy.base, controllers)
                        _enable(hierarchy.base / top, controllers)
                    self._made(path)
                except OSError as exc:
                    raise CgroupError(f"cannot make the cgroup {path}: "
                                      f"{exc.strerror or exc}") from None
                dirs.update((controller, path) for controller in hierarchy.controllers
                            if controller in controllers)
        group = Group(chosen[0].version, dirs)
        if ceiling is not None:
            self.limit(group, ceiling)
        return group

    @staticmethod
    def limit(group: Group, ceiling: Ceiling) -> None:
        """``ceiling``'s limits written in ``group`` (the defaults for what it leaves unset).
        CgroupError: which file refused."""
        try:
            _limit(group, ceiling)
        except OSError as exc:
            raise CgroupError(f"cannot set the limits of {group.paths[0]}: "
                              f"{exc.strerror or exc} ({exc.filename})") from None

    def held(self, version: int, dirs: Mapping[str, str], top: str, name: str) -> Group:
        """A member's group as ``make`` gave it (its version, its directory by controller)
        and as it comes back to be read and removed: each directory ``<...>/<top>/<name>``,
        absolute and normalized, on a cgroup file system mounted here. CgroupError: one that
        is not."""
        mounts = self._mounts()
        paths: dict[str, Path] = {}
        for controller, text in dirs.items():
            path = Path(text)
            if controller not in CONTROLLERS or version not in (1, 2) \
                    or not path.is_absolute() or os.path.normpath(text) != text \
                    or path.name != name or path.parent.name != top \
                    or not any(mount in path.parents for mount in mounts):
                raise CgroupError(f"{text!r} is no member cgroup {top}/{name} of a cgroup "
                                  "file system here")
            paths[controller] = self._root / text.lstrip("/")
        return Group(2 if version == 2 else 1, paths)

    def wire(self, group: Group) -> dict[str, Any]:
        """``group`` as it travels back to the daemon and again to ``held``: its version, its
        directory by controller and its ``cgroup.procs`` files, as paths of this machine."""
        def shown(path: Path) -> str:
            return "/" + str(path.relative_to(self._root))

        return {"version": group.version,
                "dirs": {name: shown(path) for name, path in group.dirs.items()},
                "procs": [shown(path) for path in group.procs]}

    def _mounts(self) -> list[Path]:
        """Where a cgroup file system (v1 or v2) is mounted, as this process sees it."""
        found = []
        for line in _read(self._root / "proc/self/mountinfo").splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) >= 5 and tail and tail[0] in ("cgroup", "cgroup2"):
                found.append(Path(_unescape(fields[4])))
        return found

    def _made(self, path: Path) -> None:
        with contextlib.suppress(FileExistsError):
            self._mkdir(path)

    @staticmethod
    def verdict(group: Group) -> Verdict:
        """Its OOM kills and its peak, read now."""
        memory = group.dirs.get("memory")
        if memory is None:
            return Verdict(0, None)
        if group.version == 2:
            events = _fields(_read(memory / "memory.events"))
            return Verdict(events.get("oom_kill", 0), _number(_read(memory / "memory.peak")))
        control = _fields(_read(memory / "memory.oom_control"))
        peaks = [_number(_read(memory / f)) for f in ("memory.max_usage_in_bytes",
                                                      "memory.memsw.max_usage_in_bytes")]
        return Verdict(control.get("oom_kill", 0), max((p for p in peaks if p), default=None))

    @staticmethod
    def pids(group: Group) -> set[int]:
        """The processes in it now."""
        return {int(word) for path in group.procs for word in _read(path).split()
                if word.isdigit()}

    def empty(self, group: Group, deadline: float, *, poll: float = 0.02) -> list[int]:
        """What is in ``group`` now (after its member's process ended: what it left running)
        killed, waited for until ``deadline`` seconds from now; the pids found (empty: none)."""
        found = sorted(self.pids(group))
        if not found:
            return found
        self.kill(group)
        until = time.monotonic() + deadline
        while self.pids(group) and time.monotonic() < until:
            time.sleep(poll)
        return found

    def support(self, top: str) -> dict[str, Any]:
        """What ``teamctl doctor`` says of this machine (or of an SSH host, run there): per
        controller the hierarchy a member's cgroup would be made in, and a cgroup made under
        ``top`` and removed with every controller found (a real run: ``made``); ``ok``,
        ``reason``, ``fix`` (what to enable)."""
        layout = self.layout()
        rows: list[dict[str, Any]] = []
        found = set()
        for name in CONTROLLERS:
            chosen = layout.choose(frozenset({name}))
            if isinstance(chosen, str):
                rows.append({"controller": name, "version": None, "base": None})
                continue
            found.add(name)
            rows.append({"controller": name, "version": chosen[0].version,
                         "base": str(chosen[0].base)})
        problem = self.probe(frozenset(found), top) if found else \
            "no cgroup hierarchy with a memory, cpu or pids controller this user may write"
        missing = [name for name in CONTROLLERS if name not in found]
        return {"ok": not missing and problem is None, "controllers": rows,
                "made": bool(found) and problem is None,
                "reason": problem or ("; ".join(layout.notes) if missing else None),
                "fix": self._enable if missing or problem else None}

    def kill(self, group: Group) -> None:
        """SIGKILL to everything in it (v2: ``cgroup.kill`` where the kernel has it)."""
        kill_file = group.paths[0] / "cgroup.kill"
        if group.version == 2 and kill_file.exists():
            try:
                kill_file.write_text("1")
                return
            except OSError:
                pass
        for pid in self.pids(group):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, group: Group, top: str) -> bool:
        """Remove it (and teamctl's group once it holds no other); False while a process is
        still in it (it stays, for the next start or the next daemon to take over)."""
        removed = True
        with self._lock:
            for path in group.paths:
                try:
                    self._rmdir(path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                        raise
                    removed = False
                    continue
                with contextlib.suppress(OSError):  # fails while another member's is in it
                    self._rmdir(path.parent)
        return removed

    def sweep(self, top: str) -> tuple[list[Path], list[int]]:
        """What a dead daemon of this home left under ``top`` (no daemon of this home runs
        but the caller): each process still in it killed (what its members left that the
        orphan reaper did not find: a child that left the runtime's process group), each
        cgroup removed where it is already empty (one that is not is taken over by its
        member's next start). The paths removed, the pids killed."""
        layout = self.layout()
        bases = [h.base for h in (layout.v2, *layout.v1.values()) if h is not None]
        removed: list[Path] = []
        killed: list[int] = []
        with self._lock:
            for base in dict.fromkeys(bases):
                try:
                    children = [p for p in (base / top).iterdir() if p.is_dir()]
                except OSError:
                    continue
                for child in children:
                    for pid in {int(w) for w in _read(child / "cgroup.procs").split()
                                if w.isdigit()} - set(killed):
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGKILL)
                            killed.append(pid)
                    try:
                        self._rmdir(child)
                    except OSError:
                        continue
                    removed.append(child)
                with contextlib.suppress(OSError):
                    self._rmdir(base / top)
        return removed, killed


def _enable(path: Path, controllers: frozenset[str]) -> None:
    """v2: ``controllers`` given to the children of ``path`` (those it gives already: kept,
    named again — a no-op for the kernel)."""
    have = {name.lstrip("+") for name in _read(path / "cgroup.subtree_control").split()}
    if controllers - have:
        _write(path / "cgroup.subtree_control",
               " ".join(f"+{name}" for name in sorted(have | controllers)))


def _write(path: Path, value: str) -> None:
    """One interface file, which the kernel made (never created here: no ``O_CREAT``)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _limit(group: Group, ceiling: Ceiling) -> None:
    """The ceiling's values (the defaults for what it leaves unset: a group taken over keeps
    no earlier limit). ``memory_max`` bounds memory and swap together: v1 sets the memory+swap
    limit to it, v2 lets the member no swap (either way swapping is no way past it)."""
    memory, cpu, pids = (group.dirs.get(name) for name in CONTROLLERS)
    if group.version == 2:
        if memory is not None:
            _write(memory / "memory.max", _or(ceiling.memory_max, "max"))
            _write(memory / "memory.high", _or(ceiling.memory_high, "max"))
            if (memory / "memory.swap.max").exists():
                _write(memory / "memory.swap.max", "max" if ceiling.memory_max is None else "0")
        if cpu is not None:
            _write(cpu / "cpu.weight", _or(ceiling.cpu_weight, "100"))
        if pids is not None:
            _write(pids / "pids.max", _or(ceiling.pids_max, "max"))
        return
    if memory is not None:
        memsw = memory / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            _write(memsw, "-1")  # never below the memory limit, written next
        _write(memory / "memory.limit_in_bytes", _or(ceiling.memory_max, "-1"))
        if memsw.exists() and ceiling.memory_max is not None:
            _write(memsw, str(ceiling.memory_max))
        # v1 has no throttle: memory_high is its soft limit (reclaimed first when short)
        _write(memory / "memory.soft_limit_in_bytes", _or(ceiling.memory_high, "-1"))
    if cpu is not None:
        shares = None if ceiling.cpu_weight is None else \
            max(2, round(ceiling.cpu_weight * _V1_SHARES_PER_WEIGHT))
        _write(cpu / "cpu.shares", _or(shares, "1024"))
    if pids is not None:
        _write(pids / "pids.max", _or(ceiling.pids_max, "max"))


def _or(value: int | None, default: str) -> str:
    return default if value is None else str(value)


def _fields(text: str) -> dict[str, int]:
    """``key value`` lines (memory.events, memory.oom_control) as numbers."""
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            found[key] = int(value)
    return found


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None
