"""What the daemon holds (docs/dev/performance.md, "The daemon's memory"): its heap
(orchestrator/daemon/heap.py) — glibc takes the arena cap and the trim, the trim runs once the
change feed went still after a change, never while the daemon is idle — and its models, built
when first used rather than when imported."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from orchestrator.daemon import heap
from orchestrator.daemon.changes import Changes

pytestmark = pytest.mark.anyio


def test_glibc_takes_the_arena_cap_and_the_trim() -> None:
    """This machine's libc is glibc: both calls exist and succeed (on musl both are no-ops)."""
    assert heap.cap_arenas()
    heap.trim()  # 1 or 0 (nothing to give back): either way, no error


async def test_a_burst_of_changes_is_trimmed_once_after_it_goes_quiet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    trimmed = anyio.Event()
    changes = Changes()

    def trim() -> bool:
        trims.append(changes.version)
        trimmed.set()
        return True

    monkeypatch.setattr(heap, "trim", trim)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(heap.trim_when_quiet, changes, 0.05)
            await anyio.wait_all_tasks_blocked()
            assert trims == []  # idle from the start: nothing runs
            changes.bump()
            await anyio.wait_all_tasks_blocked()  # woken: waiting out the quiet
            for _ in range(4):  # more of the burst, no yield between: seen at its next look
                changes.bump()
            await trimmed.wait()
            assert trims == [5]  # once, after the last change of the burst
            trimmed = anyio.Event()
            changes.bump()
            await trimmed.wait()
            assert trims == [5, 6]  # and again after the next change
            tg.cancel_scope.cancel()


_BUILT = """
import json, pydantic
import orchestrator.daemon.main
def subs(c):
    for s in c.__subclasses__():
        yield s
        yield from subs(s)
print(json.dumps(sorted(f"{m.__module__}.{m.__qualname__}" for m in set(subs(pydantic.BaseModel))
                        if m.__module__.startswith(("orchestrator.", "runtimes."))
                        and m.__pydantic_complete__)))
"""


def test_importing_the_daemon_builds_no_protocol_model_and_few_team_file_models() -> None:
    """``defer_build``: a model's validator and serializer are built when it is first used —
    a protocol family's or a config module's base without it (a new module's ``_Strict``)
    would build every one of its models at the daemon's start (3 MiB of 49.7 at import)."""
    done = subprocess.run([sys.executable, "-c", _BUILT], capture_output=True, text=True,
                          timeout=120, check=True)
    built = json.loads(done.stdout)
    assert not [name for name in built if name.startswith("orchestrator.protocol.")], built
    # a section's default is a factory (``Field(default_factory=…)``), never an instance made
    # at import: that built its model, and its first build loaded pydantic's plugin loader
    # and importlib.metadata (~30 ms of every daemon start)
    assert built == [], built
