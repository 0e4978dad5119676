"""This machine's memory as admission reads it: ``MemAvailable`` and ``MemTotal`` from
/proc/meminfo, and memory pressure from /proc/pressure/memory (PSI: the share of the last 10 s
in which some task stalled waiting for memory; absent on a kernel built without it or booted
with ``psi=0`` — then ``MemAvailable`` alone decides).

Both are read by the daemon with its own rights, from files no member can change. The tests
point them elsewhere (``from_env``: ``TEAMCTL_MEMINFO``, ``TEAMCTL_PSI_MEMORY`` — files in the
same formats, docs/dev/testing.md), so no test depends on this machine's free memory. A read is
bounded and never blocks (a FIFO named there reads as nothing); what cannot be read or parsed
is None, never a guess.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["HostMemory", "MemorySource", "parse_pressure"]

_MEMINFO = Path("/proc/meminfo")
_PRESSURE = Path("/proc/pressure/memory")
_READ_MAX_BYTES = 64 * 1024  # /proc/meminfo is ~1.5 KiB
_KIB_DIGITS = 15  # 999 PiB in kB: a longer number is no machine's


@dataclass(frozen=True)
class HostMemory:
    """What admission decides on: bytes available and in all, and the pressure (percent of
    the last 10 s some task stalled on memory; None: no PSI here)."""

    available_bytes: int
    total_bytes: int
    pressure: float | None = None


def _read(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, _READ_MAX_BYTES).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _kib(text: str, key: str) -> int | None:
    """``Key:   N kB`` of a meminfo text, in bytes (None: absent or not a number)."""
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name == key:
            fields = rest.split()
            number = fields[0] if len(fields) == 2 and fields[1] == "kB" else ""
            if number.isascii() and number.isdigit() and len(number) <= _KIB_DIGITS:
                return int(number) * 1024
            return None
    return None


def parse_pressure(text: str) -> float | None:
    """``some avg10=N`` of a PSI text (percent), or None."""
    for line in text.splitlines():
        kind, *fields = line.split()
        if kind != "some":
            continue
        for field in fields:
            key, _, value = field.partition("=")
            if key == "avg10":
                try:
                    share = float(value)
                except ValueError:
                    return None
                return share if math.isfinite(share) and 0 <= share <= 100 else None
    return None


class MemorySource:
    """Reads ``HostMemory`` from a meminfo file and, when there is one, a PSI file."""

    def __init__(self, meminfo: Path = _MEMINFO, pressure: Path | None = _PRESSURE) -> None:
        self.meminfo = meminfo
        self.pressure = pressure

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> MemorySource:
        """/proc's, or the files ``TEAMCTL_MEMINFO`` and ``TEAMCTL_PSI_MEMORY`` name (a test's:
        ``TEAMCTL_PSI_MEMORY`` empty means no PSI)."""
        meminfo = environ.get("TEAMCTL_MEMINFO")
        pressure = environ.get("TEAMCTL_PSI_MEMORY")
        return cls(Path(meminfo) if meminfo else _MEMINFO,
                   _PRESSURE if pressure is None else Path(pressure) if pressure else None)

    def read(self) -> HostMemory | None:
        """The memory now; None when the meminfo file cannot be read or lacks its lines."""
        text = _read(self.meminfo)
        if text is None:
            return None
        available, total = _kib(text, "MemAvailable"), _kib(text, "MemTotal")
        if available is None or not total:
            return None
        pressure_text = _read(self.pressure) if self.pressure is not None else None
        pressure = parse_pressure(pressure_text) if pressure_text is not None else None
        return HostMemory(available_bytes=available, total_bytes=total, pressure=pressure)
