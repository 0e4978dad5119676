"""A liveness round writes each probe without an await (``RuntimeProcess.send_probe``,
daemon/members/_liveness.py): against each runtime's fake CLI, the probe is written at once
where the runtime's channel is a JSON-lines pipe (Claude, the Codex app-server, ACP) and its
answer, read by the member's own read loop, is told by the callback; OpenCode's probe is an HTTP
request and stays awaited."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from tests.support.runtimes import RUNTIMES, launch_spec

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", ["acp", "claude", "codex"])
async def test_a_probe_written_at_once_is_answered_through_the_read_loop(
        tmp_path: Path, name: str) -> None:
    runtime = RUNTIMES[name][0]
    async with runtime.open(launch_spec(name, tmp_path, idle=600.0)) as member:
        for _ in range(3):  # one after another, as rounds go
            answered = anyio.Event()
            forget = member.send_probe(answered.set)
            assert forget is not None, "written at once on the daemon's asyncio loop"
            with anyio.fail_after(10):
                await answered.wait()
            forget()
        assert await member.probe(10), "the awaited probe still works beside it"


@pytest.mark.parametrize("name", ["acp", "claude", "codex"])
async def test_a_forgotten_probe_is_never_told(tmp_path: Path, name: str) -> None:
    """The round is over (its deadline passed): an answer that comes after is dropped, not
    told to a round that no longer waits."""
    runtime = RUNTIMES[name][0]
    async with runtime.open(launch_spec(name, tmp_path, idle=600.0)) as member:
        told: list[str] = []
        forget = member.send_probe(lambda: told.append("late"))
        assert forget is not None
        forget()
        assert await member.probe(10)  # the answer to the forgotten one came before this
        assert told == []


async def test_opencode_probes_are_awaited(tmp_path: Path) -> None:
    runtime = RUNTIMES["opencode"][0]
    async with runtime.open(launch_spec("opencode", tmp_path, idle=600.0)) as member:
        assert member.send_probe(lambda: None) is None
        assert await member.probe(10)


async def test_a_probe_is_not_written_at_once_past_a_write_in_progress(tmp_path: Path) -> None:
    """A write holds the pipe (a turn's line waiting for room): the probe is not slipped in
    beside it — the round awaits the probe instead."""
    runtime = RUNTIMES["claude"][0]
    async with runtime.open(launch_spec("claude", tmp_path, idle=600.0)) as member:
        async with member._write_lock:  # type: ignore[attr-defined]
            assert member.send_probe(lambda: None) is None
        assert member.send_probe(lambda: None) is not None


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_on_another_backend_the_probe_is_awaited(tmp_path: Path, anyio_backend: str
                                                       ) -> None:
    """trio, not the suite's asyncio: the probe sent beside a turn needs asyncio's loop; on any
    other backend it is awaited instead."""
    runtime = RUNTIMES["claude"][0]
    async with runtime.open(launch_spec("claude", tmp_path, idle=600.0)) as member:
        assert member.send_probe(lambda: None) is None
        assert await member.probe(10)
