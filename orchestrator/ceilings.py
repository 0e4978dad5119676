"""A member's ceiling (docs/operations.md, "A ceiling per teammate"): the team file's
``memory_max``, ``memory_high``, ``cpu_weight`` and ``pids_max`` as numbers, their bounds, and
a size as the team file writes it ("2G", "512M", "1.5G": ``[team] memory_reserve`` too).

Standard library only: the team file's types (``orchestrator.config``), the daemon's governor
(``orchestrator/daemon/members/_ceilings.py``), the hosts (a pod's resources) and ``doctor``
read it. A size is a string with its unit, in powers of 1024 (K, M, G, T; "Ki"/"KiB"/"KB" mean
the same): a bare number would be read as bytes, and ``memory_max = 2`` is never what anyone
meant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

__all__ = ["CPU_WEIGHT", "MEMORY", "PIDS", "Ceiling", "parse_size", "refused_elsewhere",
           "shown_size"]

# (least, most) of each key; a size in bytes
MEMORY = (16 << 20, 1 << 50)  # 16 MiB: below it no runtime starts; 1 PiB: past any machine
CPU_WEIGHT = (1, 10000)  # cgroup v2's cpu.weight (100: the default share)
PIDS = (8, 4194304)  # a runtime, its MCP server and a tool or two; the kernel's pid_max

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,6})?) ?([KMGT])(?:i?B)?", re.ASCII | re.IGNORECASE)
_FIX = "write a size in quotes with its unit, e.g. \"2G\", \"512M\" or \"1.5G\" (K, M, G, T: " \
    "powers of 1024)"


def parse_size(value: object, *, least: int = MEMORY[0]) -> int:
    """``value`` ("2G", "512M", "1.5G") in bytes, within ``MEMORY`` (from ``least``: 0 for
    ``memory_reserve``, memory kept free); ValueError saying what to write instead (a number
    without a unit, a negative, NaN, zero, past 1P, not a string)."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a size: {_FIX}")
    found = _SIZE.fullmatch(value.strip()) if len(value) <= 32 else None
    if found is None:
        raise ValueError(f"{value[:40]!r} is not a size: {_FIX}")
    try:
        size = int(Decimal(found.group(1)) * _UNITS[found.group(2).upper()])
    except InvalidOperation:  # (the pattern admits none: digits only)
        raise ValueError(f"{value!r} is not a size: {_FIX}") from None
    most = MEMORY[1]
    if not least <= size <= most:
        needs = "a member needs at least 16M to start, and " if least else ""
        raise ValueError(f"{value!r} is outside {shown_size(least)} … {shown_size(most)}: "
                         f"{needs}no machine has more than 1P")
    return size


def shown_size(size: int) -> str:
    """``size`` bytes as a person reads it: "60 MiB", "1.5 GiB", "2 GiB"."""
    for unit, scale in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
                        ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class Ceiling:
    """What a member's whole process tree may hold: bytes of memory (``memory_max``: the
    kernel's OOM killer inside its cgroup past it; ``memory_high``: reclaimed and slowed past
    it), its CPU share against the other members (``cpu_weight``, 100 the default), and its
    processes and threads (``pids_max``). None: not limited."""

    memory_max: int | None = None
    memory_high: int | None = None
    cpu_weight: int | None = None
    pids_max: int | None = None

    @property
    def controllers(self) -> frozenset[str]:
        """The cgroup controllers it needs: ``memory``, ``cpu``, ``pids``."""
        wanted = {"memory": self.memory_max is not None or self.memory_high is not None,
                  "cpu": self.cpu_weight is not None, "pids": self.pids_max is not None}
        return frozenset(name for name, needed in wanted.items() if needed)

    @property
    def keys(self) -> tuple[str, ...]:
        """The team file's keys it sets, in their order."""
        return tuple(key for key in ("memory_max", "memory_high", "cpu_weight", "pids_max")
                     if getattr(self, key) is not None)

    def shown(self) -> str:
        """As ``status`` shows it: "memory_max 2 GiB, pids_max 256"."""
        return ", ".join(f"{key} {shown_size(value)}" if key.startswith("memory")
                         else f"{key} {value}" for key in self.keys
                         if (value := getattr(self, key)) is not None)


def refused_elsewhere(ceiling: Ceiling, *, in_pod: bool) -> tuple[tuple[str, ...], str] | None:
    """What of ``ceiling`` a member's host cannot hold whatever it offers, and why (the keys,
    the reason); None: nothing is refused before its host is asked (this machine and an SSH
    host: a cgroup, made there to prove it; a pod: its resources, but no process limit)."""
    if in_pod and ceiling.pids_max is not None:
        return ("pids_max",), ("a pod has no process limit of its own (the kubelet's "
                               "podPidsLimit is the node's, set by the cluster)")
    return None
