"""The daemon's C heap kept small for a team left alone for hours (docs/dev/performance.md,
"The daemon's memory").

glibc's malloc keeps what Python frees: a burst of deliveries (a thousand messages to a
hundred members) leaves its pages resident long after the team went quiet — 1.3 MiB of a
100-member daemon's 63.6 MiB here, given back by one ``malloc_trim(0)`` (measured through
gdb on a live daemon). And each thread that allocates gets an arena of its own (eight per
core by default): the journal's writer and the worker threads' arenas are capped at two.

So: the arenas are capped once at start, and the heap is trimmed once the change feed has
been still for ``QUIET`` seconds after a change — nothing runs while the daemon is idle (the
loop waits on the feed), one wake-up per ``QUIET`` while it is busy. Where libc is not glibc
(musl has neither call), both are nothing."""

from __future__ import annotations

import ctypes
import functools
import gc
from typing import TYPE_CHECKING

import anyio
import structlog

if TYPE_CHECKING:
    from orchestrator.daemon.changes import Changes

__all__ = ["QUIET", "cap_arenas", "trim", "trim_when_quiet"]

log = structlog.get_logger("teamctl.daemon")

QUIET = 2.0  # seconds without a change before the heap is trimmed
ARENAS = 2  # malloc arenas: the main thread's and one the worker threads share
_M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The process's own symbols (libc among them), if they hold glibc's two calls."""
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim, libc.mallopt  # noqa: B018 — glibc's, not musl's
    except (OSError, AttributeError):
        return None
    return libc


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Cap malloc's arenas (before the daemon starts its threads); whether libc took it."""
    libc = _libc()
    return libc is not None and libc.mallopt(_M_ARENA_MAX, arenas) == 1


def trim() -> bool:
    """Give the heap's free pages back to the system; whether any were."""
    libc = _libc()
    return libc is not None and libc.malloc_trim(0) == 1


async def trim_when_quiet(changes: Changes, quiet: float = QUIET) -> None:
    """Trim the heap each time the change feed goes still for ``quiet`` seconds after a
    change (run for the daemon's life)."""
    if _libc() is None:
        return
    seen = changes.version
    while True:
        seen = await changes.wait(seen, timeout=float("inf"))
        while True:  # busy: look again every ``quiet`` until a look finds nothing new
            await anyio.sleep(quiet)
            if changes.version == seen:
                break
            seen = changes.version
        gc.collect()  # the burst's cycles (tasks, tracebacks) freed before the pages are given back
        trim()
