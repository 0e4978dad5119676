"""The admission decision, pure: does one member's expected footprint fit in this machine's
memory above the team's reserve, and if not, what status says.

A member fits when ``MemAvailable`` − what members admitted and still starting will take −
``memory_reserve`` ≥ its expected footprint, and the memory pressure (PSI ``some avg10``) is
below ``PRESSURE_LIMIT``: a machine already stalling on memory gets no new process, whatever
it says is available. The order of the line (``line_order``) is the lead, then members holding
a task, then the rest, each in launch order; a member never starts ahead of one that waits
before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.ceilings import shown_size

if TYPE_CHECKING:
    from orchestrator.daemon.admission._memory import HostMemory

__all__ = ["PRESSURE_LIMIT", "Verdict", "behind", "decide", "line_order"]

# percent of the last 10 s in which some task stalled waiting for memory (PSI "some avg10"):
# at or above it, nothing more starts. A machine with room shows 0; reclaim and swap-in make
# it climb long before the OOM killer runs
PRESSURE_LIMIT = 10.0


@dataclass(frozen=True)
class Verdict:
    """Whether it fits, and the words: status's ``waiting for memory (…)`` when it does not,
    the log's account when it does."""

    fits: bool
    why: str


def decide(memory: HostMemory, *, needs_bytes: int, reserve_bytes: int,
           starting_bytes: int = 0) -> Verdict:
    """One member's verdict. ``starting_bytes``: the footprints of members admitted and not
    yet up (their memory is not taken yet, but will be)."""
    available = memory.available_bytes - starting_bytes
    free = available - reserve_bytes
    # an estimate: whole MiB (a learned median is a byte count nobody reads)
    needs = f"~{shown_size(max(round(needs_bytes / 2**20), 1) * 2**20)}"
    reserve = shown_size(reserve_bytes)
    room = (f"{shown_size(free)} free above the {reserve} reserve" if free >= 0 else
            f"{shown_size(max(available, 0))} available, below the {reserve} reserve")
    if memory.pressure is not None and memory.pressure >= PRESSURE_LIMIT:
        return Verdict(False, f"waiting for memory (memory pressure {memory.pressure:.0f}% over "
                              f"the last 10 s, at most {PRESSURE_LIMIT:g}%; needs {needs}; "
                              f"{room})")
    if needs_bytes <= free:
        return Verdict(True, f"needs {needs}; {room}")
    return Verdict(False, f"waiting for memory (needs {needs}; {room})")


def behind(verdict: Verdict, first: str) -> Verdict:
    """The verdict of a member that would fit but waits its turn behind ``first``."""
    if not verdict.fits:
        return verdict
    return Verdict(False, f"waiting for memory ({verdict.why}; after {first}, which starts "
                          "first)")


def line_order(*, lead: bool, holds_task: bool, launched: tuple[int, int]
               ) -> tuple[int, int, int]:
    """Where a waiting member stands: the lead, then members holding a task, then the rest;
    within each, by ``launched`` (its team's launch, its place in the team file)."""
    return (0 if lead else 1 if holds_task else 2, *launched)
