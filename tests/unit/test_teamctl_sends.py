"""What teamctl itself sends is labelled ``teamctl``, not ``operator`` (issue 45): a task
handed to an idle claimer, a gate's result told to the owner, and the prompt a cut turn was
continued with — in the history and the live view — while the operator's own message stays
the operator's. In process, on the daemon's ``build_core`` (tests/support/fakes.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.config import TeamConfig
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from orchestrator.daemon.web import render
from tests.support.fakes import FakeRuntime, core

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.protocol.messages import MessageDoc
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio


def _team(tmp_path: Path, **board: str) -> TeamConfig:
    return TeamConfig.model_validate({
        "team": {"name": "web", "workdir": str(tmp_path)}, "board": board,
        "members": [{"name": "lead", "runtime": "claude", "start_timeout": 5.0},
                    {"name": "dev", "runtime": "claude", "start_timeout": 5.0,
                     "claims": True, "backoff": [0.01, 0.1]}]})


async def _message(c: Core, member: str, needle: str) -> MessageDoc:
    """The message to ``member`` whose text holds ``needle``, once it is journaled."""
    assert c.built is not None
    changes = c.built.changes
    with anyio.fail_after(10):
        while True:
            version = changes.version
            found = [m for m in (await c.teams.history("web", member)).messages
                     if needle in m.text]
            if found:
                return found[0]
            await changes.wait(version, 1.0)


async def test_the_boards_hand_overs_and_gate_results_are_from_teamctl(tmp_path: Path) -> None:
    """A task handed to dev and the failed check told to lead were shown ``from operator``:
    they read ``teamctl`` in the history, the page and ``--json``; the operator's own
    message still reads ``operator`` (the page: tests/unit/test_web.py)."""
    fail = f"{sys.executable} -c \"raise SystemExit(3)\""
    async with core(tmp_path, FakeRuntime()) as c:
        await c.teams.launch(_team(tmp_path, check=fail), "t.toml", wait=True, timeout=10)
        assert c.built is not None
        board = c.built.board
        await c.teams.send(None, "lead", "hello", wait=True, timeout=10)
        mine = await board.create("web", "schema", created_by=OPERATOR,
                                  assignee=Assignee("lead", 1))
        await board.create("web", "api", created_by=OPERATOR)
        await board.complete(mine.id, by=Actor("lead"), summary="done")

        handed = await _message(c, "dev", "you now own task")
        gated = await _message(c, "lead", "is not done yet")
        said = await _message(c, "lead", "hello")
        assert (handed.sender, gated.sender, said.sender) == ("teamctl", "teamctl", "operator")
        assert handed.model_dump(mode="json")["sender"] == "teamctl"
        page = render.conversation("dev", [handed])
        assert "<b>teamctl</b> → dev" in page and "operator" not in page


async def test_an_answer_to_a_continuation_says_teamctl_continued_it(tmp_path: Path) -> None:
    """A cut turn goes on as a continuation — teamctl's prompt, not the operator's message;
    the answered message's history says so in a ``teamctl:`` note."""
    runtime = FakeRuntime(["exit"])
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(_team(tmp_path), "t.toml", wait=True, timeout=10)
        result = await c.teams.send(None, "dev", "touch done.txt", wait=True, timeout=10)
        assert (result.state, result.attempts, result.sender) == ("answered", 2, "operator")
        [note] = [n for n in result.notes if n.startswith("teamctl: ")]
        assert "continued the cut turn (your process exited)" in note
        [shown] = (await c.teams.history("web", "dev")).messages
        assert note in shown.notes
