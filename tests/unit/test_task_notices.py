"""Events bound to the task, never dropped (orchestrator/daemon/board/_notices.py;
docs/board.md, "Events bound to the task"), in process on the daemon's own core: an event about
a task is journaled against the task and delivered to its *current* owner — woken when asleep,
told after a crash once it is back, never the member that released it (the next owner is) — a
second event with the same source id is dropped, and the task's page shows each and where it
went."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.contracts import TextPart
from orchestrator.daemon.board import OPERATOR, Notice
from orchestrator.daemon.board._service import Actor, Assignee
from tests.support.fakes import Core, FakeRuntime, core, team_config
from tests.support.settle import until

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.daemon.board import Board

pytestmark = pytest.mark.anyio


def _told(runtime: FakeRuntime, member: str, needle: str) -> list[str]:
    return [part.text for process in runtime.opened if process.spec.member == member
            for turn in process.turns for part in turn.parts
            if isinstance(part, TextPart) and needle in part.text]


def _board(c: Core) -> Board:
    assert c.built is not None
    return c.built.board


async def _owned(c: Core, member: str) -> int:
    task = await _board(c).create("web", "x", created_by=OPERATOR, assignee=Assignee(
        member, c.supervisor.member("web", member).epoch))
    return task.id


async def test_an_event_is_told_to_the_owner_once_per_source_and_shown_with_where_it_went(
        tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "a"}), "t.toml", wait=True,
                             timeout=10)
        task = await _owned(c, "a")
        first = await _board(c).tell(task, Notice("ci:run-17", "ci", "teamctl: CI failed"))
        again = await _board(c).tell(task, Notice("ci:run-17", "ci", "teamctl: CI failed"))
        await until(lambda: _now(bool(_told(runtime, "a", "CI failed"))))
        page = await _board(c).get(task, "web")

        async def answered() -> bool:
            shown = (await _board(c).get(task, "web")).notices
            return shown[0].delivery == "answered"
        await until(answered)
    assert first is not None and first.member == "a" and again is None
    assert len(_told(runtime, "a", "CI failed")) == 1, "the same source id is told once"
    [notice] = page.notices
    assert (notice.source, notice.kind, notice.member, notice.message_id) == (
        "ci:run-17", "ci", "a", first.message_id)


async def _now(value: bool) -> bool:
    return value


async def test_a_released_tasks_event_waits_for_the_next_owner_never_the_one_that_left(
        tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "a"}, {"name": "b"}), "t.toml",
                             wait=True, timeout=10)
        board = _board(c)
        task = await _owned(c, "a")
        await board.release(task, by=Actor("a"), reason="not mine")
        told = await board.tell(task, Notice("review:42", "review", "teamctl: the review "
                                             "asks for tests"))
        waiting = (await board.get(task, "web")).notices
        await board.assign(task, Assignee("b", c.supervisor.member("web", "b").epoch),
                           by=OPERATOR)
        await until(lambda: _now(bool(_told(runtime, "b", "asks for tests"))))
        shown = (await board.get(task, "web")).notices
    assert told is None
    assert (waiting[0].member, waiting[0].delivery) == (None, "waiting for an owner")
    assert shown[0].member == "b"
    assert _told(runtime, "a", "asks for tests") == [], "the member that released it"
    assert "while nobody held task" in _told(runtime, "b", "asks for tests")[0]


async def test_an_owner_asleep_is_woken_by_an_event_about_its_task(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "a"}, pause_after=0.05), "t.toml",
                             wait=True, timeout=10)
        task = await _owned(c, "a")
        with anyio.fail_after(10):
            while c.supervisor.member("web", "a").launch != "asleep":
                await c.supervisor.member("web", "a").changed().wait()
        await _board(c).tell(task, Notice("gate:1", "gate", "teamctl: the check failed"))
        await until(lambda: _now(bool(_told(runtime, "a", "the check failed"))))
    assert len(runtime.opened) == 2, "woken: started again for the event"


async def test_an_owner_that_crashed_is_told_once_it_is_back(tmp_path: Path) -> None:
    runtime = FakeRuntime(["answer", "exit"])
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "a", "backoff": [0.01, 0.1]}),
                             "t.toml", wait=True, timeout=10)
        task = await _owned(c, "a")
        await c.teams.send("web", "a", "hello", wait=True, timeout=10)
        crash = await c.teams.send("web", "a", "crash now", wait=False, timeout=10)
        assert crash.ok
        await until(lambda: _now(len(runtime.opened) >= 1
                                 and runtime.opened[0].exit_code is not None))
        await _board(c).tell(task, Notice("land:9", "integration", "teamctl: did not land"))
        await until(lambda: _now(bool(_told(runtime, "a", "did not land"))))
    told = [p for p in runtime.opened if any(
        isinstance(part, TextPart) and "did not land" in part.text
        for turn in p.turns for part in turn.parts)]
    assert told and told[0] is not runtime.opened[0], "told by its next process"
