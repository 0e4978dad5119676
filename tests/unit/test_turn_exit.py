"""A turn whose member process dies ends with the exit when it happens, in every runtime
adapter on the kit — not at the idle watchdog's next look at its clock.

A waiting turn looks at its watchdog's clock once a second (``kit._POLL``). Here that look is
an hour apart, so a turn that ends at all within the test's deadline ended by the exit itself:
Claude's at its stdout's end, ACP's, Codex app-server's and OpenCode's by the exit waking the
watch (``TurnWatch.wake``: without it ACP and Codex fail here; OpenCode's request to the dead
server usually failed first, but under ``make test``'s load it once did not within 30 s)."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.contracts import RuntimeExited, TextPart, Turn
from runtimes import kit
from tests.support.runtimes import RUNTIMES, launch_spec

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio
HANG = {"acp": "FAKE_ACP_HANG_ON_TURN", "claude": "FAKE_CLAUDE_HANG_ON_TURN",
        "codex": "FAKE_CODEX_HANG_ON_TURN", "opencode": "FAKE_OPENCODE_HANG_ON_TURN"}


@pytest.mark.parametrize("name", sorted(RUNTIMES))
async def test_a_turn_ends_when_its_process_dies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    runtime = RUNTIMES[name][0]
    spec = launch_spec(name, tmp_path, idle=600.0, extra_env={HANG[name]: "1"})
    monkeypatch.setattr(kit, "_POLL", 3600.0)  # only the exit can end the wait in time
    accepted = anyio.Event()

    async def sent() -> None:
        accepted.set()

    async with runtime.open(spec) as member:
        pid = member.pid
        assert pid is not None

        async def crash() -> None:
            await accepted.wait()
            os.killpg(pid, signal.SIGKILL)  # the CLI dies mid-turn (not teamctl's kill)

        async with anyio.create_task_group() as tg:
            tg.start_soon(crash)
            with anyio.fail_after(30), pytest.raises(RuntimeExited):
                await member.run_turn(Turn("m1", (TextPart("hello"),)), on_sent=sent)
