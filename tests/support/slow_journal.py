"""A race finder, not a test: loaded as a pytest plugin (``-p tests.support.slow_journal``),
every group the journal's writer thread runs takes ``TEAMCTL_TEST_SLOW_JOURNAL`` seconds more
(default 0.02: a slow disk's fsync). Patched at import, so it holds in the test process and in
every daemon forked from it (tests/support/cli_fork.py); an exec'd daemon is its own.

A test that passes only while the journal is quick leans on a timing: it read the loop as
settled while an answer was still being written in the thread, or it raced a reply, a reminder
or a timeout that a slower write lets in first (docs/dev/testing.md, "Looking for races").
Calls made on the loop's own thread (``AsyncJournal.quick`` with the writer idle) are not
slowed: they are the loop's time, not the thread's.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from orchestrator.daemon.journal import _engine

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["PAUSE"]

PAUSE = float(os.environ.get("TEAMCTL_TEST_SLOW_JOURNAL", "0.02"))
_run_group = _engine.Journal.run_group


def _slowed(self: _engine.Journal, calls: Sequence[Callable[[], Any]]
            ) -> list[tuple[bool, Any]]:
    if threading.current_thread() is not threading.main_thread():
        time.sleep(PAUSE)  # the thing this plugin is: a slower writer thread
    return _run_group(self, calls)


_slowed.__name__ = _slowed.__qualname__ = "run_group"  # a test that counts hops by name
_engine.Journal.run_group = _slowed  # type: ignore[method-assign]
