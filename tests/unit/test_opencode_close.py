"""Closing an OpenCode member (the adapter against fixtures/bin/opencode, no daemon)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.contracts import LaunchSpec, TextPart, Turn
from runtimes.hosts.local.host import LocalHost
from runtimes.opencode.runtime import OpenCodeRuntime
from tests.support.driver import REPO

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio
FAKE_OPENCODE = REPO / "fixtures" / "bin" / "opencode"


async def test_closing_a_server_slower_than_the_event_reconnect_raises_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop ladder may take longer than the event stream's reconnect delay (with the
    production 0.5 s of each, the EOF grace alone does, then SIGTERM): the event watcher stops
    with the close instead of reconnecting through the closed HTTP client ("Cannot send a
    request, as the client has been closed" crashed the member's task group on every stop with
    the production grace). Both shortened here, the grace still four times the delay."""
    monkeypatch.delenv("TEAMCTL_OPENCODE_STOP_GRACE", raising=False)
    (tmp_path / "state").mkdir()
    spec = LaunchSpec(team="t", member="m", executable=str(FAKE_OPENCODE), model="fake/text",
                      prompt=None, workdir=tmp_path, state_dir=tmp_path / "state",
                      start_timeout=20.0, host=LocalHost())

    async def sent() -> None:
        pass

    async with OpenCodeRuntime(stop_grace=0.08, reconnect_delay=0.02).open(spec) as server:
        result = await server.run_turn(Turn("m1", (TextPart("hello"),)), on_sent=sent)
    assert "received: hello" in result.reply
    assert server.exit_code is not None
