"""A race finder, not a test: loaded as a pytest plugin (``-p tests.support.slow_spawn``),
every process the daemon starts through ``anyio.open_process`` — a member's CLI, a check
command, an SSH or pod relay — starts ``TEAMCTL_TEST_SLOW_SPAWN`` seconds later (default 0.1:
a fork and exec on a machine under load). Patched at import, so it holds in the test process
and in every daemon forked from it (tests/support/cli_fork.py); an exec'd daemon is its own.

A test that passes only while processes start at once leans on a timing: it sent to a member
it read as ready before its process was, or raced a liveness probe, a restart's backoff or a
turn's deadline that a slower start lets in first (docs/dev/testing.md, "Looking for races").
"""

from __future__ import annotations

import os
from typing import Any

import anyio

__all__ = ["PAUSE"]

PAUSE = float(os.environ.get("TEAMCTL_TEST_SLOW_SPAWN", "0.1"))
_open_process = anyio.open_process


async def _slowed(*args: Any, **kwargs: Any) -> Any:
    await anyio.sleep(PAUSE)  # the thing this plugin is: a slower start
    return await _open_process(*args, **kwargs)


anyio.open_process = _slowed  # type: ignore[assignment]
