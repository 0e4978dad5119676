"""``teamctl approvals | approve | deny | answer``: what waits on the operator (docs/approvals.md).

Registered on the ``teamctl`` group by ``orchestrator.client.cli``."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import click

from orchestrator import client
from orchestrator.client.cli import _emit_json, _home, _name, handles_errors

__all__ = ["COMMANDS"]

_ID = re.compile(r"apv_[0-9A-HJKMNP-TV-Z]{26}")
FOLLOW_POLL = 20.0  # each long poll waits this long on the daemon (its bound is 25 s)


def _approval_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not _ID.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not an approval id (apv_…); see "
                                 "'teamctl approvals'", param_hint="ID")
    return value


def _line(row: dict[str, Any]) -> str:
    asked = time.strftime("%H:%M:%S", time.localtime(row["asked_at"]))
    what = f"{row['tool']}: {row['summary']}" if row["kind"] == "permission" else \
        "question: " + " | ".join(row["questions"] or [row["summary"]])
    line = (f"{row['id']}  {row['state']:<8} {row['team']}/{row['member']} ({row['runtime']})  "
            f"{what}  asked {asked}")
    answer = row.get("answer") or {}
    if answer.get("by") == "rule":
        line += f"  by rule {answer.get('rule')}"
    if row.get("reason"):
        line += f"  ({row['reason']})"
    return line


@click.command()
@click.option("--team", default=None, callback=_name)
@click.option("--all", "everything", is_flag=True, help="Also the settled ones.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing requests as they come.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def approvals(team: str | None, everything: bool, follow: bool, as_json: bool) -> None:
    """What waits on you: teammates' permission requests and questions, oldest first."""
    params: dict[str, Any] = {"team": team, "all": everything, "after": 0}
    doc = client.call(_home(), "approvals", params)
    if as_json and not follow:
        _emit_json(doc)
        return
    while True:
        for row in doc["approvals"]:
            if as_json:  # one document per line, as they come
                click.echo(json.dumps(row, ensure_ascii=False))
            else:
                click.echo(_line(row))
        if not follow:
            if not doc["approvals"]:
                click.echo("nothing waits on you" if not everything else "no requests yet")
            return
        params = {"team": team, "all": True, "after": doc["cursor"], "wait": FOLLOW_POLL}
        doc = client.call(_home(), "approvals", params, timeout=FOLLOW_POLL + 10)


def _decided(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _emit_json(doc)
        return
    row = doc["approval"]
    applied = "the runtime confirmed it" if doc["confirmed"] else \
        "sent; the runtime has not confirmed it yet (see 'teamctl approvals --all')"
    click.echo(f"{row['id']} {row['state']}: {applied}")
    if doc.get("rule"):
        click.echo(f"rule kept for {row['team']}/{row['member']}: {doc['rule']}")


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id)
@click.option("--always", is_flag=True,
              help="Also for the rest of the session, and as a rule for later launches.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def approve(approval_id: str, always: bool, as_json: bool) -> None:
    """Let the teammate do what request ID asks."""
    _decided(client.call(_home(), "approve", {"id": approval_id, "always": always},
                         timeout=60.0), as_json)


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id)
@click.option("--message", default=None, help="Why, or what to do instead (the model sees it).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def deny(approval_id: str, message: str | None, as_json: bool) -> None:
    """Refuse request ID."""
    _decided(client.call(_home(), "deny", {"id": approval_id, "message": message},
                         timeout=60.0), as_json)


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id)
@click.argument("text")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def answer(approval_id: str, text: str, as_json: bool) -> None:
    """Answer the teammate's question ID with TEXT."""
    _decided(client.call(_home(), "answer", {"id": approval_id, "text": text}, timeout=60.0),
             as_json)


COMMANDS = (approvals, approve, deny, answer)
