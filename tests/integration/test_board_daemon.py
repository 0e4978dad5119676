"""The board live in a real daemon (a fake Claude member): an idle claimer handed a task,
the task in ``teamctl status``, ``teamctl task review`` refusing what is not in review."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.protocol.board import TaskDoc
from tests.support.asking import launch
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


def test_an_idle_claimer_is_handed_a_task_and_status_shows_it(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A ready task reaches the idle claimer's CLI as a message naming it (its history), the
    task is in progress under it, ``status`` shows it; ``task review`` of a task not in review
    is refused, typed, and without --approve/--reject is a usage error."""
    launch(teamctl, "web", fake_member("dev", claims=True))
    assert teamctl.run("task", "add", "add the session table").stdout == "T1\n"
    follow_logs.wait_for(lambda e: e["event"] == "task_offered" and e.get("task") == 1)
    task = TaskDoc.model_validate(teamctl.json("task", "show", "T1")["task"])
    assert (task.status, task.owner) == ("in_progress", "dev")
    message = teamctl.json("history", "dev")["messages"][0]
    assert "you now own task T1: add the session table" in message["text"]
    status = teamctl.run("status")
    assert "dev: task T1 add the session table" in status.stdout, status.stdout
    [member] = teamctl.json("status")["teams"][0]["members"]
    # the fake's turn says nothing on the board: a reminder follows (docs/board.md, "No silent
    # completions"), and status may already say it was ignored
    assert member["task"].startswith("T1 add the session table")

    refused = teamctl.run("task", "review", "T1", "--approve")
    assert refused.returncode == 1 and "only a task in review is reviewed" in refused.stderr
    assert teamctl.run("task", "review", "T1").returncode == 2
