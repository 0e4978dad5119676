"""``teamctl approvals | approve | deny | answer``: what waits on the operator (docs/approvals.md).

Registered on the ``teamctl`` group by ``orchestrator.client.cli``."""

from __future__ import annotations

import re
import shlex
import sys
import time
from typing import Any

import click

from orchestrator import client, protocol
from orchestrator.client import completion
from orchestrator.client.common import check_name, emit_json, handles_errors, say, teamctl_home
from orchestrator.limits import (
    APPROVAL_ID_PATTERN,
    APPROVAL_SHA256_PATTERN,
    APPROVAL_SHA256_SHOWN,
    APPROVAL_SHOWN_CHARS,
    MAX_PAGE_ROWS,
)
from orchestrator.visible import clipped, json_text, visible, visible_line

__all__ = ["COMMANDS"]

_ID = re.compile(APPROVAL_ID_PATTERN)
_SHA = re.compile(APPROVAL_SHA256_PATTERN)
FOLLOW_POLL = 20.0  # each long poll waits this long on the daemon (its bound is 25 s)


def _approval_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    if not _ID.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not an approval id (apv_…); see "
                                 "'teamctl approvals'", param_hint="ID")
    return value


def _sha256(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    if not _SHA.fullmatch(value.lower()):
        raise click.BadParameter(f"{value!r} is not a sha256 or its start (8 to 64 hex "
                                 "digits, as 'teamctl approvals' shows it)", param_hint="--sha256")
    return value.lower()


def _what(row: dict[str, Any]) -> str:
    """What the request asks, on one line: the summary's first part and how much more."""
    if row["kind"] == "permission":
        return f"{clipped(row['tool'], 60)}: {clipped(row['summary'], APPROVAL_SHOWN_CHARS)}"
    return "question: " + clipped(" | ".join(row["questions"] or [row["summary"]]),
                                  APPROVAL_SHOWN_CHARS)


def _settled(row: dict[str, Any]) -> str:
    answer = row.get("answer") or {}
    said = f"  by rule {visible_line(str(answer.get('rule')))}" if answer.get("by") == "rule" \
        else ""
    return said + (f"  ({visible_line(row['reason'])})" if row.get("reason") else "")


def _line(row: dict[str, Any]) -> str:
    asked = time.strftime("%H:%M:%S", time.localtime(row["asked_at"]))
    sha = f"  sha256 {row['sha256'][:APPROVAL_SHA256_SHOWN]}" if row.get("sha256") else ""
    return (f"{row['id']}  {row['state']:<8} {row['team']}/{row['member']} ({row['runtime']})  "
            f"{_what(row)}{sha}  asked {asked}{_settled(row)}")


def _full(row: dict[str, Any]) -> list[str]:
    """The whole request (``--full``): every character of its summary and questions, shown
    visibly, and its whole sha256 — what ``approve --sha256`` binds to."""
    asked = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["asked_at"]))
    lines = [f"{row['id']}  {row['state']}  {row['team']}/{row['member']} ({row['runtime']})  "
             f"asked {asked}{_settled(row)}",
             f"  {row['kind']}: {visible_line(row['tool'])}",
             f"  sha256: {row.get('sha256') or '- (journaled before teamctl kept it)'}",
             f"  summary ({len(row['summary'])} characters):",
             *_indented(row["summary"])]
    for number, question in enumerate(row["questions"] or [], 1):
        lines += [f"  question {number} ({len(question)} characters):", *_indented(question)]
    return lines


def _indented(text: str) -> list[str]:
    return ["    " + visible(line) for line in text.split("\n")]


@click.command()
@click.argument("approval_id", metavar="[ID]", required=False, callback=_approval_id,
                shell_complete=completion.approval_ids)
@click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
@click.option("--member", default=None, callback=check_name, shell_complete=completion.members,
              help="With --rules or --revoke: this member's rules only.")
@click.option("--all", "everything", is_flag=True,
              help="Also the settled ones (with --rules: the revoked ones).")
@click.option("-f", "--follow", is_flag=True,
              help="Print what waits, then each new request as it comes.")
@click.option("--full", is_flag=True,
              help="Each request whole: every character of its command and questions, and "
              "its whole sha256.")
@click.option("--limit", type=click.IntRange(1, MAX_PAGE_ROWS), default=100, show_default=True,
              help="At most this many rows.")
@click.option("--offset", type=click.IntRange(0), default=0, help="Skip this many rows first.")
@click.option("--rules", "list_rules", is_flag=True,
              help="The rules 'approve --always' kept, per member.")
@click.option("--revoke", "revoke", default=None, metavar="RULE",
              help="Revoke a kept rule, written as --rules shows it.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def approvals(approval_id: str | None, team: str | None, member: str | None, everything: bool,
              follow: bool, full: bool, limit: int, offset: int, list_rules: bool,
              revoke: str | None, as_json: bool) -> None:
    """What waits on you: teammates' permission requests and questions, oldest first; with
    ID, that request (settled or not)."""
    if list_rules or revoke is not None:
        _rules(team, member, everything, revoke, as_json)
        return
    if approval_id is not None:
        _one(approval_id, full, as_json)
        return
    params: dict[str, Any] = {"team": team, "all": everything, "after": 0, "limit": limit,
                              "offset": offset}
    doc = client.call(teamctl_home(), protocol.APPROVALS, params)
    if as_json and not follow:
        emit_json(doc)
        return
    while True:
        for row in doc["approvals"]:
            _show(row, full=full, as_json=as_json)
        if params["after"] == 0:
            _page_note(doc, offset, everything, as_json)
        if not follow:
            return
        params = {"team": team, "all": True, "after": doc["cursor"], "wait": FOLLOW_POLL}
        doc = client.call(teamctl_home(), protocol.APPROVALS, params, timeout=FOLLOW_POLL + 10)


def _show(row: dict[str, Any], *, full: bool, as_json: bool) -> None:
    if as_json:  # one document per line, as they come
        say(json_text(row))
    else:
        for line in _full(row) if full else [_line(row)]:
            say(line)


def _one(approval_id: str, full: bool, as_json: bool) -> None:
    """``approvals ID``: that request, in any state (``--json``: the same document as the
    list, with that one request)."""
    doc = client.call(teamctl_home(), protocol.APPROVALS, {"id": approval_id, "all": True})
    if as_json:
        emit_json(doc)
        return
    for row in doc["approvals"]:
        _show(row, full=full, as_json=False)


def _page_note(doc: dict[str, Any], offset: int, everything: bool, as_json: bool) -> None:
    """Say when the rows shown are not all of them; or that there are none."""
    shown, total = len(doc["approvals"]), int(doc.get("total", 0))
    if as_json:
        return
    if shown < total:
        say(f"showing {shown} of {total} (rows {offset + 1}-{offset + shown}; "
            f"--offset {offset + shown} for the next)")
    elif not total:
        say("nothing waits on you" if not everything else "no requests yet")


def _rules(team: str | None, member: str | None, everything: bool, revoke: str | None,
           as_json: bool) -> None:
    if revoke is not None:
        doc = client.call(teamctl_home(), protocol.REVOKE_RULE,
                          {"team": team, "member": member, "rule": revoke})
    else:
        doc = client.call(teamctl_home(), protocol.APPROVAL_RULES,
                          {"team": team, "member": member, "all": everything})
    if as_json:
        emit_json(doc)
        return
    for row in doc["rules"]:
        state = "revoked" if row["revoked_at"] else "kept"
        line = f"{row['team']}/{row['member']}  {row['rule']}  {state}: {row['scope']}"
        say(line + (f" ({row['revoked_why']})" if row["revoked_why"] else ""))
    if not doc["rules"]:
        say("no rules kept" + (" for that member" if member else ""))


def _decided(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(doc)
        return
    row = doc["approval"]
    applied = "the runtime confirmed it" if doc["confirmed"] else \
        "sent; the runtime has not confirmed it yet (see 'teamctl approvals --all')"
    say(f"{row['id']} {row['state']}: {applied}")
    sha = f"  sha256 {row['sha256'][:APPROVAL_SHA256_SHOWN]}" if row.get("sha256") else ""
    say(f"  {_what(row)}{sha}")
    if doc.get("rule"):
        take_back = shlex.join(["teamctl", "approvals", "--team", row["team"], "--member",
                                row["member"], "--revoke", doc["rule"]])
        say(f"rule kept for {row['team']}/{row['member']}: {doc['rule']} "
            f"({doc['scope']}; '{take_back}' to take it back)")


_SHA256 = click.option(
    "--sha256", "sha256", default=None, metavar="HEX", callback=_sha256,
    help="Only if the request's sha256 starts with HEX (as 'teamctl approvals' shows it): the "
    "decision applies to the request you read, or to nothing.")


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id,
                shell_complete=completion.approval_ids)
@click.option("--always", is_flag=True,
              help="Also for the rest of the session, and keep a rule for later launches: "
              "the exact command, or the tool under that path's directory in the worktree "
              "(shown before it is kept).")
@_SHA256
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def approve(approval_id: str, always: bool, sha256: str | None, as_json: bool) -> None:
    """Let the teammate do what request ID asks."""
    params: dict[str, Any] = {"id": approval_id, "always": always, "sha256": sha256}
    if always:  # the rule is shown before it is kept (and asked about on a terminal)
        preview = client.call(teamctl_home(), protocol.APPROVE,
                              {"id": approval_id, "always": True, "preview": True})
        say(f"{preview['scope']}: rule {preview['rule']}", err=as_json)
        if sys.stdin.isatty() and not click.confirm("keep it?", default=True, err=True):
            raise click.Abort
        params["rule"] = preview["rule"]
    _decided(client.call(teamctl_home(), protocol.APPROVE, params, timeout=60.0), as_json)


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id,
                shell_complete=completion.approval_ids)
@click.option("--message", default=None, help="Why, or what to do instead (the model sees it).")
@_SHA256
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def deny(approval_id: str, message: str | None, sha256: str | None, as_json: bool) -> None:
    """Refuse request ID."""
    _decided(client.call(teamctl_home(), protocol.DENY,
                         {"id": approval_id, "message": message, "sha256": sha256},
                         timeout=60.0), as_json)


@click.command()
@click.argument("approval_id", metavar="ID", callback=_approval_id,
                shell_complete=completion.approval_ids)
@click.argument("text")
@_SHA256
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def answer(approval_id: str, text: str, sha256: str | None, as_json: bool) -> None:
    """Answer the teammate's question ID with TEXT."""
    _decided(client.call(teamctl_home(), protocol.ANSWER,
                         {"id": approval_id, "text": text, "sha256": sha256},
                         timeout=60.0), as_json)


COMMANDS = (approvals, approve, deny, answer)
