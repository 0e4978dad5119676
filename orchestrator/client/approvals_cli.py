"""``teamctl approvals | approve | deny | answer``: what waits on the operator (docs/approvals.md).

Registered on the ``teamctl`` group by ``orchestrator.client.cli``."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

import click

from orchestrator import client
from orchestrator.client.common import check_name, emit_json, handles_errors, teamctl_home
from orchestrator.limits import APPROVAL_ID_PATTERN, MAX_PAGE_ROWS

__all__ = ["COMMANDS"]

_ID = re.compile(APPROVAL_ID_PATTERN)
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
@click.option("--team", default=None, callback=check_name)
@click.option("--member", default=None, callback=check_name,
              help="With --rules or --revoke: this member's rules only.")
@click.option("--all", "everything", is_flag=True,
              help="Also the settled ones (with --rules: the revoked ones).")
@click.option("-f", "--follow", is_flag=True,
              help="Print what waits, then each new request as it comes.")
@click.option("--limit", type=click.IntRange(1, MAX_PAGE_ROWS), default=100, show_default=True,
              help="At most this many rows.")
@click.option("--offset", type=click.IntRange(0), default=0, help="Skip this many rows first.")
@click.option("--rules", "list_rules", is_flag=True,
              help="The rules 'approve --always' kept, per member.")
@click.option("--revoke", "revoke", default=None, metavar="RULE",
              help="Revoke a kept rule, written as --rules shows it.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def approvals(team: str | None, member: str | None, everything: bool, follow: bool,
              limit: int, offset: int, list_rules: bool, revoke: str | None,
              as_json: bool) -> None:
    """What waits on you: teammates' permission requests and questions, oldest first."""
    if list_rules or revoke is not None:
        _rules(team, member, everything, revoke, as_json)
        return
    params: dict[str, Any] = {"team": team, "all": everything, "after": 0, "limit": limit,
                              "offset": offset}
    doc = client.call(teamctl_home(), "approvals", params)
    if as_json and not follow:
        emit_json(doc)
        return
    while True:
        for row in doc["approvals"]:
            if as_json:  # one document per line, as they come
                click.echo(json.dumps(row, ensure_ascii=False))
            else:
                click.echo(_line(row))
        if params["after"] == 0:
            _page_note(doc, offset, everything, as_json)
        if not follow:
            return
        params = {"team": team, "all": True, "after": doc["cursor"], "wait": FOLLOW_POLL}
        doc = client.call(teamctl_home(), "approvals", params, timeout=FOLLOW_POLL + 10)


def _page_note(doc: dict[str, Any], offset: int, everything: bool, as_json: bool) -> None:
    """Say when the rows shown are not all of them; or that there are none."""
    shown, total = len(doc["approvals"]), int(doc.get("total", 0))
    if as_json:
        return
    if shown < total:
        click.echo(f"showing {shown} of {total} (rows {offset + 1}-{offset + shown}; "
                   f"--offset {offset + shown} for the next)")
    elif not total:
        click.echo("nothing waits on you" if not everything else "no requests yet")


def _rules(team: str | None, member: str | None, everything: bool, revoke: str | None,
           as_json: bool) -> None:
    if revoke is not None:
        doc = client.call(teamctl_home(), "revoke_rule", {"team": team, "member": member,
                                                   "rule": revoke})
    else:
        doc = client.call(teamctl_home(), "approval_rules", {"team": team, "member": member,
                                                      "all": everything})
    if as_json:
        emit_json(doc)
        return
    for row in doc["rules"]:
        state = "revoked" if row["revoked_at"] else "kept"
        line = f"{row['team']}/{row['member']}  {row['rule']}  {state}: {row['scope']}"
        click.echo(line + (f" ({row['revoked_why']})" if row["revoked_why"] else ""))
    if not doc["rules"]:
        click.echo("no rules kept" + (" for that member" if member else ""))


def _decided(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(doc)
        return
    row = doc["approval"]
    applied = "the runtime confirmed it" if doc["confirmed"] else \
        "sent; the runtime has not confirmed it yet (see 'teamctl approvals --all')"
    click.echo(f"{row['id']} {row['state']}: {applied}")
    if doc.get("rule"):
        click.echo(f"rule kept for {row['team']}/{row['member']}: {doc['rule']} "
                   f"({doc['scope']}; 'teamctl approvals --revoke' to take it back)")


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id)
@click.option("--always", is_flag=True,
              help="Also for the rest of the session, and keep a rule for later launches: "
              "the exact command, or the tool under that path's directory in the worktree "
              "(shown before it is kept).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def approve(approval_id: str, always: bool, as_json: bool) -> None:
    """Let the teammate do what request ID asks."""
    params: dict[str, Any] = {"id": approval_id, "always": always}
    if always:  # the rule is shown before it is kept (and asked about on a terminal)
        preview = client.call(teamctl_home(), "approve", {"id": approval_id, "always": True,
                                                   "preview": True})
        click.echo(f"{preview['scope']}: rule {preview['rule']}", err=as_json)
        if sys.stdin.isatty() and not click.confirm("keep it?", default=True, err=True):
            raise click.Abort
        params["rule"] = preview["rule"]
    _decided(client.call(teamctl_home(), "approve", params, timeout=60.0), as_json)


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id)
@click.option("--message", default=None, help="Why, or what to do instead (the model sees it).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def deny(approval_id: str, message: str | None, as_json: bool) -> None:
    """Refuse request ID."""
    _decided(client.call(teamctl_home(), "deny", {"id": approval_id, "message": message},
                         timeout=60.0), as_json)


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id)
@click.argument("text")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def answer(approval_id: str, text: str, as_json: bool) -> None:
    """Answer the teammate's question ID with TEXT."""
    _decided(client.call(teamctl_home(), "answer", {"id": approval_id, "text": text}, timeout=60.0),
             as_json)


COMMANDS = (approvals, approve, deny, answer)
