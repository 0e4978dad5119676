"""``teamctl task`` against a real daemon (a fake Claude member): tasks with a dependency,
their JSON documents, a task's lifetime, cancel, a cycle refused, hostile requests refused
with the daemon up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.protocol.board import TaskDoc, TaskListDoc, TaskShowDoc
from tests.support.asking import launch
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

TEAM = "web"


def test_three_tasks_with_a_dependency_listed_shown_assigned_and_cancelled(
        teamctl: Teamctl) -> None:
    """The operator's board end to end: ids printed, the dependent shown blocked with what
    blocks it, --json valid for its schema, the lifetime in ``show``, a cancel that leaves
    its dependent blocked visibly, a cycle refused (exit 2) and named."""
    launch(teamctl, TEAM, fake_member("dev"))
    added = teamctl.run("task", "add", "add the session table", "--priority", "5")
    assert (added.returncode, added.stdout) == (0, "T1\n"), added.stderr
    assert teamctl.run("task", "add", "wire the form", "--blocked-by", "T1").stdout == "T2\n"
    body = teamctl.run("task", "add", "write the docs", "--blocked-by", "2", "--body", "-",
                       input="what the form does\n")
    assert body.stdout == "T3\n", body.stderr

    listed = TaskListDoc.model_validate(teamctl.json("task", "list"))
    assert [(t.id, t.state, t.blocked_by) for t in listed.tasks] == [
        (1, "ready", []), (2, "blocked", [1]), (3, "blocked", [2])]
    assert listed.total == 3 and listed.next_after is None
    table = teamctl.run("task", "list").stdout
    assert "wire the form  (blocked by T1 (pending))" in table
    ready = TaskListDoc.model_validate(teamctl.json("task", "list", "--status", "ready"))
    assert [t.id for t in ready.tasks] == [1]

    assigned = TaskDoc.model_validate(teamctl.json("task", "assign", "T1", "dev"))
    assert (assigned.status, assigned.owner, assigned.epoch) == ("in_progress", "dev", 1)
    released = teamctl.run("task", "release", "1", "--reason", "wrong person")
    assert released.returncode == 0 and "T1 released: ready" in released.stdout

    cancelled = teamctl.run("task", "cancel", "T2", "--reason", "out of scope")
    assert cancelled.returncode == 0 and "T2 cancelled: cancelled" in cancelled.stdout
    shown = TaskShowDoc.model_validate(teamctl.json("task", "show", "T3"))
    assert shown.task.blocked == "blocked by a cancelled task T2"
    assert shown.task.body == "what the form does\n" and shown.depends_on == [2]

    history = teamctl.run("task", "show", "T1")
    assert history.returncode == 0, history.stderr
    lifetime = history.stdout.split("lifetime:\n", 1)[1].splitlines()
    assert [line.split()[2:4] for line in lifetime] == [
        ["operator", "created"], ["operator", "assigned"], ["operator", "released"]]
    assert lifetime[1].endswith("to dev") and lifetime[2].endswith("wrong person")

    cycle = teamctl.run("task", "deps", "T1", "--add", "T3")
    assert cycle.returncode == 2
    assert "would close a cycle T1 → T3 → T2 → T1" in cycle.stderr


def test_bad_task_requests_are_refused_and_the_daemon_stays_up(teamctl: Teamctl) -> None:
    """Hostile input at the socket and the CLI: typed refusals, nothing written, and the
    next request answered."""
    launch(teamctl, TEAM, fake_member("dev"))
    escape = teamctl.rpc("task_add", {"title": "clear\x1b[2J", "team": TEAM})
    assert escape["error"]["code"] == "task_invalid"
    huge = teamctl.rpc("task_add", {"title": "t", "body": "x" * 900_000})
    assert huge["error"]["code"] == "usage_error"  # over the params' bound: never reaches SQL
    coerced = teamctl.rpc("task_show", {"id": "1"})
    assert coerced["error"]["code"] == "usage_error"
    for method, params in (("task_show", {"id": 2**63}), ("task_list", {"after": -1}),
                           ("task_deps", {"id": 1, "add": list(range(1, 200))})):
        assert teamctl.rpc(method, params)["error"]["code"] == "usage_error", method
    missing = teamctl.run("task", "show", "T99")
    assert missing.returncode == 1 and "no task T99" in missing.stderr
    not_an_id = teamctl.run("task", "show", "X1")
    assert not_an_id.returncode == 2 and "is not a task id" in not_an_id.stderr
    assert teamctl.json("task", "list")["total"] == 0
    assert teamctl.run("task", "add", "still up").stdout == "T1\n"
