"""``teamctl queue [--pause | --resume]`` and ``teamctl integrate ID``: the merge queue
(docs/land.md) — what waits, what runs, what landed or went back; a done task put into the
queue now. Registered lazily by ``orchestrator.client.lazy_commands``."""

from __future__ import annotations

import re
import time
from typing import Any

import click

from orchestrator import client, protocol
from orchestrator.client import completion
from orchestrator.client.common import check_name, emit_json, handles_errors, say, teamctl_home
from orchestrator.limits import MAX_SEQ
from orchestrator.visible import visible_line

__all__ = ["COMMANDS"]

_TASK_ID = re.compile(r"[Tt]?([0-9]{1,19})")


def _task_id(ctx: click.Context, param: click.Parameter, value: str) -> int:
    found = _TASK_ID.fullmatch(value)
    if not found or not 1 <= int(found.group(1)) <= MAX_SEQ:
        raise click.BadParameter(f"{value!r} is not a task id (T3 or 3); see 'teamctl task "
                                 "list --state done'", ctx=ctx, param=param)
    return int(found.group(1))


def _entry(row: dict[str, Any]) -> str:
    when = row["finished_at"] or row["started_at"] or row["queued_at"]
    state = row["state"] + (f" ({row['phase']})" if row["phase"] else "")
    shown = row["result"] or row["commit"]
    return (f"{row['id']:>5}  {row['task']:<6} {state:<20} {row['owner']:<12} "
            f"{shown[:12]}  {time.strftime('%H:%M:%S', time.localtime(when))}  "
            f"{visible_line(row['title'])}")


def _note(row: dict[str, Any]) -> str | None:
    if not row["note"] or row["state"] == "landed":
        return None
    first = row["note"].strip().splitlines()[0]
    return "         " + visible_line(first)[:160]


def _print(doc: dict[str, Any]) -> None:
    if doc["branch"] is None:
        say(f"team {doc['team']} has no merge queue ([team] integrate = {{ check = \"make "
            "test\" }} makes one)")
    else:
        check = f", check {doc['check']!r}" if doc["check"] else ", no check"
        paused = "  [paused: teamctl queue --resume]" if doc["paused"] else ""
        say(f"{doc['team']} → {doc['branch']} ({doc['mode']}{check}){paused}")
    rows = [*([doc["running"]] if doc["running"] else []), *doc["waiting"]]
    say(f"{'ENTRY':>5}  {'TASK':<6} {'STATE':<20} {'OWNER':<12} {'COMMIT':<12}  {'AT':<8}  "
        "TITLE")
    for row in [*rows, *doc["recent"]]:
        say(_entry(row))
        note = _note(row)
        if note:
            say(note)
    if not rows and not doc["recent"]:
        say("(nothing queued yet)")


@click.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
@click.option("--pause", is_flag=True, help="Stop taking entries (the one running ends).")
@click.option("--resume", is_flag=True, help="Take entries again.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def queue(team: str | None, pause: bool, resume: bool, as_json: bool) -> None:
    """The merge queue: what waits, what runs, what landed or went back to its owner."""
    if pause and resume:
        raise click.UsageError("--pause and --resume together: give one")
    doc = client.call(teamctl_home(), protocol.QUEUE,
                      {"team": team, "pause": pause, "resume": resume})
    if as_json:
        emit_json(doc)
    else:
        _print(doc)


@click.command()
@click.argument("task_id", metavar="ID", callback=_task_id, shell_complete=completion.task_ids)
@click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def integrate(task_id: int, team: str | None, as_json: bool) -> None:
    """Put done task ID into the merge queue now (its owner's worktree commit)."""
    doc = client.call(teamctl_home(), protocol.INTEGRATE, {"team": team, "id": task_id})
    if as_json:
        emit_json(doc)
    else:
        say(f"{doc['task']} queued as entry {doc['id']} ({doc['state']}, attempt "
            f"{doc['attempt']}): {doc['owner']}'s {doc['commit'][:12]} → {doc['branch']}")


COMMANDS = (queue, integrate)
