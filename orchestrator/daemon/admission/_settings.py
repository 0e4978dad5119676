"""How admission reads and measures, as the composition root sets it: this machine's /proc and
the default intervals, or what a test's switches name (docs/dev/testing.md, "The daemon's test
switches"): ``TEAMCTL_MEMINFO`` and ``TEAMCTL_PSI_MEMORY`` (files in /proc's formats, rewritten
by the test), ``TEAMCTL_MEMORY_POLL_INTERVAL`` (seconds between two reads while a member
waits)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.daemon.admission._memory import MemorySource
from orchestrator.daemon.admission._service import POLL_INTERVAL, SAMPLE_INTERVAL, tree_rss
from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["AdmissionSettings"]

_MOST_SECONDS = 3600.0


@dataclass(frozen=True)
class AdmissionSettings:
    """Where memory is read, how often, and how a process tree is measured."""

    memory: MemorySource = field(default_factory=MemorySource)
    poll_interval: float = POLL_INTERVAL
    sample_interval: float = SAMPLE_INTERVAL
    measure: Callable[[int], int | None] = tree_rss

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> AdmissionSettings:
        """The daemon's: /proc, unless a test's switches name other files or intervals."""
        raw = environ.get("TEAMCTL_MEMORY_POLL_INTERVAL")
        poll = POLL_INTERVAL
        if raw is not None:
            try:
                poll = float(raw)
            except ValueError:
                poll = -1.0
            if not 0 < poll <= _MOST_SECONDS:
                raise UsageError(f"TEAMCTL_MEMORY_POLL_INTERVAL={raw!r} is not seconds in "
                                 "(0, 3600]; fix or unset it and start the daemon again")
        return cls(memory=MemorySource.from_env(environ), poll_interval=poll)
