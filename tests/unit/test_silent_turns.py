"""No silent completions (orchestrator/daemon/board/_silence.py; docs/board.md), in process on
the daemon's own core: a turn handed a task that ends without a word on the board has its final
text forwarded once (the task's lifetime; a teammate that created the task is told), the member
is reminded once, and one that ignores the reminder shows in ``status``; a turn that reports on
the board is left alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.contracts import TextPart, TurnResult
from orchestrator.daemon.board import OPERATOR, TEAMCTL
from orchestrator.daemon.board._service import Actor
from tests.support.fakes import Core, FakeProcess, FakeRuntime, core, team_config
from tests.support.settle import until

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.contracts import Turn
    from orchestrator.daemon.board import Board

pytestmark = pytest.mark.anyio


def _board(c: Core) -> Board:
    assert c.built is not None
    return c.built.board


def _texts(runtime: FakeRuntime, member: str) -> list[str]:
    return [part.text for process in runtime.opened if process.spec.member == member
            for turn in process.turns for part in turn.parts if isinstance(part, TextPart)]


async def _kinds(c: Core, task: int) -> list[str]:
    return [e.kind for e in (await _board(c).get(task, "web")).events]


async def _now(value: bool) -> bool:
    return value


def _says(reply: str) -> object:
    """A turn step that answers ``reply`` and does nothing on the board."""
    async def step(process: FakeProcess, turn: Turn) -> TurnResult:
        return TurnResult(reply=reply)
    return step


@pytest.mark.parametrize("creator", [OPERATOR, TEAMCTL], ids=["operator", "teamctl"])
async def test_a_silent_turn_is_forwarded_once_reminded_once_and_an_ignored_reminder_shows(
        tmp_path: Path, creator: Actor) -> None:
    """The operator's task, or one teamctl made (the forge's intake): forwarded into the task's
    lifetime and told to nobody more — "teamctl" is no member (a silent turn on a forge task
    was told to a member of that name, a delivery queued for nobody)."""
    runtime = FakeRuntime([_says("I looked at the form; it needs a new column"), _says("hmm"),
                           _says("still hmm")])
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "dev", "claims": True}), "t.toml",
                             wait=True, timeout=10)
        task = (await _board(c).create("web", "wire the form", created_by=creator)).id

        async def ignored() -> bool:
            return "reminder_ignored" in await _kinds(c, task)
        await until(ignored)
        shown = await _board(c).get(task, "web")
        status = (await c.teams.status("web")).teams[0].members[0]
        to_nobody = c.store.sync.connection.execute(
            "SELECT count(*) FROM deliveries WHERE member NOT IN ('dev')").fetchone()[0]
    kinds = [e.kind for e in shown.events]
    assert kinds.count("auto_forwarded") == 2  # the hand-over's turn, the reminder's turn
    forwarded = next(e for e in shown.events if e.kind == "auto_forwarded")
    assert forwarded.note == "dev's turn: I looked at the form; it needs a new column"
    reminders = [t for t in _texts(runtime, "dev") if "you hold task" in t]
    assert len(reminders) == 1 and "task_update(id=" in reminders[0]
    assert [n.kind for n in shown.notices] == ["reminder"]
    assert status.task == f"T{task} wire the form (silent: it ignored a reminder)"
    assert to_nobody == 0


async def test_a_teammate_that_created_the_task_is_told_what_the_silent_turn_said(
        tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead", "lead": True},
                                         {"name": "dev", "claims": True}), "t.toml",
                             wait=True, timeout=10)
        task = (await _board(c).create("web", "wire the form",
                                       created_by=Actor("lead", privileged=True))).id
        await until(lambda: _now(any("auto-forwarded from dev's turn" in t
                                     for t in _texts(runtime, "lead"))))
        forwarded = [t for t in _texts(runtime, "lead") if "auto-forwarded" in t]
    assert len(forwarded) == 1 and f"task T{task}" in forwarded[0]
    assert "echo: teamctl: you now own task" in forwarded[0]


async def test_a_turn_that_reports_on_the_board_is_not_forwarded(tmp_path: Path) -> None:
    async def reports(process: FakeProcess, turn: Turn) -> TurnResult:
        await _board(c).update(task_id[0], by=Actor("dev"), note="halfway", team="web")
        return TurnResult(reply="updated")

    runtime = FakeRuntime([reports])
    task_id: list[int] = []
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "dev", "claims": True}), "t.toml",
                             wait=True, timeout=10)
        task_id.append((await _board(c).create("web", "x", created_by=OPERATOR)).id)

        async def updated() -> bool:
            return "updated" in await _kinds(c, task_id[0])
        await until(updated)
        await until(lambda: _now(len(runtime.turns) == 1))
        kinds = await _kinds(c, task_id[0])
    assert "auto_forwarded" not in kinds and "reminder" not in str(kinds)
