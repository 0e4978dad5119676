"""``teamctl task add | list | show | assign | release | cancel | deps | review | done``: the
team's board (docs/board.md). A task is named ``T3`` or ``3``, and shown ``T3`` in every output
(``--json`` too). Registered by ``orchestrator.client.cli``."""

from __future__ import annotations

import re
import sys
import time
from typing import Any

import click

from orchestrator import client, protocol
from orchestrator.client import completion
from orchestrator.client.common import check_name, emit_json, handles_errors, say, teamctl_home
from orchestrator.limits import MAX_PAGE_ROWS, MAX_SEQ, MAX_TASK_TEXT_BYTES
from orchestrator.visible import visible_line

__all__ = ["COMMANDS"]

_TASK_ID = re.compile(r"[Tt]?([0-9]{1,19})")
_STATES = ("ready", "blocked", "pending", "in_progress", "review", "done", "failed",
           "cancelled")


def _task_id(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """``T3`` or ``3`` → 3 (one value or a tuple of them)."""
    if value is None or isinstance(value, tuple):
        return None if value is None else tuple(_task_id(ctx, param, v) for v in value)
    found = _TASK_ID.fullmatch(value)
    if not found or not 1 <= int(found.group(1)) <= MAX_SEQ:
        raise click.BadParameter(f"{value!r} is not a task id (T3 or 3); see 'teamctl task "
                                 "list'", ctx=ctx, param=param)
    return int(found.group(1))


def _call(method: protocol.Method, params: dict[str, Any]) -> Any:
    return client.call(teamctl_home(), method, params)


def _body(value: str | None) -> str:
    """--body TEXT, or ``-``: read from stdin (at most the bound, more is refused)."""
    if value != "-":
        return value or ""
    data = sys.stdin.buffer.read(MAX_TASK_TEXT_BYTES + 1)
    if len(data) > MAX_TASK_TEXT_BYTES:
        raise click.UsageError(f"the body is at most {MAX_TASK_TEXT_BYTES} bytes; put the "
                               "rest in a file and name it")
    return data.decode("utf-8", "replace")


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _line(task: dict[str, Any]) -> str:
    owner = task["owner"] or "-"
    line = (f"{task['id']:<6} {task['state']:<11} {task['priority']:>4}  {owner:<12} "
            f"{task['role'] or '-':<10} {visible_line(task['title'])}")
    return line + (f"  ({visible_line(task['blocked'])})" if task["blocked"] else "")


def _echo_task(doc: dict[str, Any], as_json: bool, said: str) -> None:
    if as_json:
        emit_json(doc)
        return
    owner = f" ({doc['owner']})" if doc["owner"] else ""
    say(f"{doc['id']} {said}: {doc['state']}{owner}")
    if doc["blocked"]:
        say(f"  {doc['blocked']}")


_TEAM = click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
_JSON = click.option("--json", "as_json", is_flag=True)
_ID = click.argument("task_id", metavar="ID", callback=_task_id, shell_complete=completion.task_ids)
_REASON = click.option("--reason", default=None, help="Why, kept in the task's lifetime.")


@click.group()
def task() -> None:
    """The team's board: tasks, what they wait on, who holds them."""


@task.command()
@_TEAM
@click.argument("title")
@click.option("--body", default=None, metavar="TEXT|-", help="The details ('-': stdin).")
@click.option("--blocked-by", "blocked_by", multiple=True, callback=_task_id, metavar="ID",
              shell_complete=completion.task_ids,
              help="A task this one waits on (repeat for several).")
@click.option("--role", default=None, callback=check_name,
              help="Only a member of this role may claim it.")
@click.option("--priority", type=click.IntRange(-1000, 1000), default=0, show_default=True,
              help="Higher is claimed first.")
@click.option("--assign", default=None, callback=check_name,
              shell_complete=completion.members, metavar="MEMBER",
              help="Hand it to MEMBER (now if ready, else once it is).")
@click.option("--check", default=None, metavar="CMD",
              help="The command that must pass before done (overrides the team's check).")
@_JSON
@handles_errors
def add(team: str | None, title: str, body: str | None, blocked_by: tuple[int, ...],
        role: str | None, priority: int, assign: str | None, check: str | None,
        as_json: bool) -> None:
    """Add a task to the board; prints its id (T<n>)."""
    doc = _call(protocol.TASK_ADD, {"team": team, "title": title, "body": _body(body),
                                    "blocked_by": list(blocked_by), "role": role,
                                    "priority": priority, "assign": assign, "check": check})
    if as_json:
        emit_json(doc)
    else:
        say(doc["id"])


@task.command(name="list")
@_TEAM
@click.option("--state", "--status", "status", type=click.Choice(_STATES), default=None,
              help="Only these (pending: ready and blocked).")
@click.option("--owner", default=None, callback=check_name, shell_complete=completion.members)
@click.option("--role", default=None, callback=check_name)
@click.option("--after", default=None, callback=_task_id, metavar="ID",
              shell_complete=completion.task_ids,
              help="The page after this task (as the last page said).")
@click.option("--limit", type=click.IntRange(1, MAX_PAGE_ROWS), default=100, show_default=True)
@_JSON
@handles_errors
def list_tasks(team: str | None, status: str | None, owner: str | None, role: str | None,
               after: int | None, limit: int, as_json: bool) -> None:
    """The board, oldest first: each task's state (ready, blocked, in progress...), owner,
    and what blocks it."""
    doc = _call(protocol.TASK_LIST, {"team": team, "status": status, "owner": owner, "role": role,
                                     "after": after or 0, "limit": limit})
    if as_json:
        emit_json(doc)
        return
    if not doc["tasks"]:
        say("no tasks" + (" match" if status or owner or role else " yet"))
        return
    say(f"{'ID':<6} {'STATE':<11} {'PRI':>4}  {'OWNER':<12} {'ROLE':<10} TITLE")
    for row in doc["tasks"]:
        say(_line(row))
    if doc["next_after"] is not None:
        say(f"showing {len(doc['tasks'])} of {doc['total']}; --after "
            f"{doc['next_after']} for the next page")


@task.command()
@_ID
@_TEAM
@_JSON
@handles_errors
def show(task_id: int, team: str | None, as_json: bool) -> None:
    """The task and its lifetime: who created, claimed, released, completed it, and when."""
    doc = _call(protocol.TASK_SHOW, {"team": team, "id": task_id})
    if as_json:
        emit_json(doc)
        return
    row = doc["task"]
    say(f"{row['id']}  {visible_line(row['title'])}  [{row['state']}]  team {row['team']}")
    say(f"  owner {row['owner'] or '-'}, role {row['role'] or '-'}, priority "
        f"{row['priority']}, created by {row['created_by']}")
    for label, ids in (("waits on", doc["depends_on"]), ("waited on by", doc["dependents"])):
        if ids:
            say(f"  {label}: " + ", ".join(ids))
    for label in ("blocked", "check", "summary", "evidence"):
        if row[label]:
            say(f"  {label}: {row[label]}")
    if row["body"]:
        say("\n" + row["body"].rstrip("\n") + "\n")
    say("lifetime:")
    for event in doc["events"]:
        note = f"  {event['note']}" if event["note"] else ""
        say(f"  {_when(event['at'])}  {event['actor']:<12} {event['kind']}{note}")
    if doc.get("notices"):
        say("told (an event about it, to whom, its delivery):")
        for notice in doc["notices"]:
            say(f"  {_when(notice['at'])}  {notice['kind']:<12} → "
                f"{notice['member'] or '(the next owner)'}  {notice['delivery'] or '-'}  "
                f"{notice['source']}")


@task.command()
@_ID
@click.argument("member", callback=check_name, shell_complete=completion.members)
@_TEAM
@_JSON
@handles_errors
def assign(task_id: int, member: str, team: str | None, as_json: bool) -> None:
    """Hand task ID to MEMBER: in progress now if it is ready, else kept for it."""
    doc = _call(protocol.TASK_ASSIGN, {"team": team, "id": task_id, "member": member})
    _echo_task(doc, as_json, f"assigned to {member}")


@task.command()
@_ID
@_REASON
@_TEAM
@_JSON
@handles_errors
def release(task_id: int, reason: str | None, team: str | None, as_json: bool) -> None:
    """Take task ID back from its owner: pending, nobody's."""
    _echo_task(_call(protocol.TASK_RELEASE, {"team": team, "id": task_id, "reason": reason}),
               as_json, "released")


@task.command()
@_ID
@_REASON
@_TEAM
@_JSON
@handles_errors
def cancel(task_id: int, reason: str | None, team: str | None, as_json: bool) -> None:
    """Cancel task ID (the tasks waiting on it say so)."""
    _echo_task(_call(protocol.TASK_CANCEL, {"team": team, "id": task_id, "reason": reason}),
               as_json, "cancelled")


@task.command()
@_ID
@click.option("--add", multiple=True, callback=_task_id, metavar="ID2",
              shell_complete=completion.task_ids,
              help="Make ID wait on ID2 (a cycle is refused and named).")
@click.option("--remove", multiple=True, callback=_task_id, metavar="ID2",
              shell_complete=completion.task_ids,
              help="ID no longer waits on ID2.")
@_TEAM
@_JSON
@handles_errors
def deps(task_id: int, add: tuple[int, ...], remove: tuple[int, ...], team: str | None,
         as_json: bool) -> None:
    """Change what task ID waits on."""
    if not add and not remove:
        raise click.UsageError("give --add ID2 or --remove ID2")
    doc = _call(protocol.TASK_DEPS, {"team": team, "id": task_id, "add": list(add),
                                     "remove": list(remove)})
    _echo_task(doc, as_json, "dependencies changed")


@task.command()
@_ID
@click.option("--approve", "verdict", flag_value="approve", help="It is done.")
@click.option("--reject", "verdict", metavar="WHY", help="Back to its owner, with WHY.")
@click.option("--note", default="", help="What to record with an approval.")
@_TEAM
@_JSON
@handles_errors
def review(task_id: int, verdict: str | None, note: str, team: str | None,
           as_json: bool) -> None:
    """Settle task ID in review: --approve (done) or --reject WHY (back in progress; its
    owner is told why)."""
    if verdict is None:
        raise click.UsageError("give --approve or --reject WHY")
    approve = verdict == "approve"
    doc = _call(protocol.TASK_REVIEW, {"team": team, "id": task_id, "approve": approve,
                                       "note": (note or "approved by the operator") if approve
                                       else verdict})
    _echo_task(doc, as_json, "approved" if approve else "rejected")


@task.command()
@_ID
@click.option("--summary", default="done by the operator", show_default=True,
              help="What was done, kept with the task (its owner reads it).")
@_TEAM
@_JSON
@handles_errors
def done(task_id: int, summary: str, team: str | None, as_json: bool) -> None:
    """Finish task ID as its owner would: through the same gate — the check (run as the
    owner), then the team's review — so it may go to review, or stay in progress with the
    check's output (exit 1). Its owner is told."""
    doc = _call(protocol.TASK_DONE, {"team": team, "id": task_id, "summary": summary})
    ref = doc["id"]  # T3
    if as_json:
        emit_json(doc)
    elif doc["state"] == "in_progress":
        say(f"{ref} is not done: its check failed; see 'teamctl task show {ref}'", err=True)
    else:
        _echo_task(doc, False, "completed")
    if doc["state"] == "in_progress":
        sys.exit(1)


COMMANDS = (task,)
