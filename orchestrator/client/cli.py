"""``teamctl``: the operator's commands (DESIGN §1). A thin client of the daemon.

Imports stay light (click and the standard library) so the CLI starts fast; pydantic is only
loaded by ``launch`` (to validate the team file before anything starts), and the approvals,
costs, export, task, live-view and notify commands' modules when one of theirs runs
(``lazy_commands``).
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator import client, protocol
from orchestrator.client import completion as completers
from orchestrator.client.attachment_lines import plan_lines, sent_line
from orchestrator.client.common import (
    TEAM_OPTION,
    check_name,
    cost_note,
    cost_text,
    emit_json,
    handles_errors,
    is_utf8,
    one_team,
    say,
    teamctl_home,
)
from orchestrator.client.lazy_commands import LazyGroup
from orchestrator.errors import ClipboardError, TeamctlError
from orchestrator.limits import MAX_ATTACHMENTS, MAX_PAGE_ROWS, MAX_WAIT_SECONDS, ULID_PATTERN
from orchestrator.visible import json_text, visible_line

if TYPE_CHECKING:
    from orchestrator.paths import Home

__all__ = ["main"]

_CALL_MARGIN = 15.0
_DAEMON_EXIT_SECONDS = 60.0  # a stopped daemon closes its journal and socket: well under a second


class Seconds(click.ParamType[float]):
    """A finite number of seconds, above 0 and at most 30 days (no inf, nan or 1e308)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not 0 < seconds <= MAX_WAIT_SECONDS:
            self.fail(f"{value!r} is not between 0 and {MAX_WAIT_SECONDS:g} seconds", param, ctx)
        return seconds


def _forge_line(forge: dict[str, Any]) -> str:
    """A team's forge under its name: the repository, its rate-limit window, a wait on its
    reset, the last round's failure (docs/forge.md)."""
    line = f"  forge {visible_line(str(forge['repo']))}: {forge['rounds']} rounds"
    if forge.get("remaining") is not None:
        line += f", {forge['remaining']} requests left"
    if forge.get("waiting_until"):
        line += ", waiting for the rate limit's reset at " + time.strftime(
            "%H:%M:%S", time.localtime(float(forge["waiting_until"])))
    pulls = forge.get("pulls") or []
    if pulls:
        line += "; pull requests: " + ", ".join(
            f"T{p['task']} {'#' + str(p['number']) if p.get('number') else '(not opened)'} "
            f"{p['state']}" for p in pulls[:5]) + (f" and {len(pulls) - 5} more"
                                                   if len(pulls) > 5 else "")
    if forge.get("error"):
        line += f"; last round: {visible_line(str(forge['error']))}"
    return line


def _member_table(members: list[dict[str, Any]]) -> list[str]:
    header = ("MEMBER", "RUNTIME", "MODEL", "LAUNCH", "LIVENESS", "READINESS", "PID",
              "RESTARTS", "QUEUED", "COST")
    rows = [header] + [tuple(map(visible_line, (
        m["name"], m["runtime"] + (f"@{m['host']}" if m.get("host") else ""),
        m.get("model") or "-", m["launch"], m["liveness"],
        m["readiness"], str(m.get("pid") or "-"), str(m.get("restarts", 0)),
        str(m.get("queued", 0)), cost_text(m.get("spend")))))
        for m in members
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += [f"  {m['name']}: task {m['task']}" for m in members if m.get("task")]
    lines += [f"  {m['name']}: slots " + visible_line(" ".join(
        f"{var}={value}" for var, value in m["slots"].items())) for m in members if m.get("slots")]
    lines += [f"  {m['name']}: sandbox {m['sandbox']}" + (
        f" (egress: {m['egress']['allowed']} allowed, {m['egress']['denied']} denied)"
        if m.get("egress") else "") for m in members if m.get("sandbox")]
    lines += [f"  {m['name']}: ceiling {m['ceiling']}" for m in members if m.get("ceiling")]
    lines += [f"  {m['name']}: {visible_line(m[key])}" for m in members
              for key in ("hold", "waiting", "error", "activity", "note") if m.get(key)
              and not (key == "activity" and m.get("waiting") == m.get("activity"))]
    lines += [f"  {m['name']}: last exit: {visible_line(reason)}" for m in members
              if (reason := (m.get("last_exit") or {}).get("reason"))]
    lines += [f"  {m['name']}: {note}" for m in members if (note := cost_note(m.get("spend")))]
    return lines


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="teamctl")
def cli() -> None:
    """Run a team of coding agents (Claude Code, Codex, OpenCode) on one machine."""


@cli.command()
@click.argument("teamfile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-wait", is_flag=True, help="Return once members are starting.")
@click.option("--timeout", type=Seconds(), default=None,
              help="Seconds to wait for every member to be ready.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@handles_errors
def launch(teamfile: Path, no_wait: bool, timeout: float | None, as_json: bool) -> None:
    """Start the daemon if needed, then the team in TEAMFILE; wait until members are ready."""
    from orchestrator.config import load_team_file

    config = load_team_file(teamfile)
    home = teamctl_home()
    started = client.ensure_daemon(home)
    wait_for = timeout or max(m.start_timeout for m in config.members) + 5.0
    from orchestrator.client.progress import LaunchProgress, Progress

    watch = LaunchProgress(home, config.name)
    try:
        with Progress.on_terminal(quiet=as_json or no_wait).run(watch.follow) as progress:
            team = client.call(
                home, protocol.LAUNCH,
                {"config": config.model_dump(mode="json"), "file": str(teamfile.resolve()),
                 "wait": not no_wait, "timeout": timeout},
                timeout=wait_for + _CALL_MARGIN,
            )
            watch.show(progress, team["members"])  # what the follower has not seen yet
    except TeamctlError:
        if started:
            _stop_idle_daemon(home)
        raise
    # a member waiting for memory has not failed: it starts once it fits (docs/scaling.md)
    waiting = [m["name"] for m in team["members"] if m["launch"] == "waiting"]
    failed = [m for m in team["members"] if m["launch"] in ("fatal", "backoff", "stopped")
              or (not no_wait and m["readiness"] == "not_ready"
                  and m["launch"] not in ("asleep", "waiting"))]
    if as_json:
        emit_json({"ok": not failed, "team": team["name"], "members": team["members"],
                    "already_running": bool(team.get("already_running")),
                    "resumed": bool(team.get("resumed")), "applied": team.get("applied", [])})
    else:
        if team.get("applied"):  # a relaunch that changed only what applies live
            say(f"team {team['name']} already running: applied its new "
                f"{', '.join(team['applied'])}")
        elif team.get("already_running"):
            how = "resumed by the daemon" if team.get("resumed") else "already running"
            say(f"team {team['name']} {how}, from this same file (nothing to do)")
        say(f"team {team['name']}")
        for line in _member_table(team["members"]):
            say(line)
    if waiting and not as_json:
        say(f"teamctl: waiting for memory: {', '.join(waiting)} (each starts once it fits "
            "above memory_reserve; messages to it stay queued; see 'teamctl status')", err=True)
    if failed:
        if not as_json:
            names = ", ".join(m["name"] for m in failed)
            say(f"teamctl: not ready: {names} (see 'teamctl logs')", err=True)
        sys.exit(1)


def _stop_idle_daemon(home: Home) -> None:
    """A refused launch leaves no daemon behind that it started itself (and nothing runs in
    it): gone when the command returns, so the next command never reaches it on its way out."""
    with contextlib.suppress(TeamctlError), client.daemon_exit(home) as exited:
        if not client.call(home, protocol.STATUS, {"team": None}).get("teams"):
            client.call(home, protocol.STOP, {"team": None}, timeout=30.0)
            exited(_DAEMON_EXIT_SECONDS)


@cli.command()
@click.argument("team", required=False, callback=check_name, shell_complete=completers.teams)
@TEAM_OPTION
@click.option("--watch", is_flag=True,
              help="Redraw on every change (members, deliveries, approvals) until Ctrl-C.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def status(team: str | None, team_option: str | None, watch: bool, as_json: bool) -> None:
    """Show each member's launch, liveness and readiness, and its queue (TEAM's only, or
    --team's)."""
    team = one_team(team, team_option)
    version = 0
    while True:
        doc = client.call(teamctl_home(), protocol.STATUS, {"team": team})
        if as_json:
            click.echo(json_text(doc) if watch else json_text(doc, indent=2))
        else:
            if watch:
                click.echo("\x1b[H\x1b[2J", nl=False)  # home, clear: teamctl's own sequence
                say(time.strftime("%H:%M:%S") + "  (teamctl status --watch; Ctrl-C)")
            if not doc["teams"]:
                say("no team is running")
            for entry in doc["teams"]:
                spend = entry.get("spend")
                say(f"team {entry['name']}" + (f"  (cost {cost_text(spend)})"
                                                      if spend else ""))
                if entry.get("forge"):
                    say(_forge_line(entry["forge"]))
                for line in _member_table(entry["members"]):
                    say(line)
        if not watch:
            return
        try:  # the daemon answers when something changed (or after 20 s): no polling loop
            version = client.call(teamctl_home(), protocol.CHANGES,
                                  {"after": version, "wait": 20.0}, timeout=30.0)["version"]
        except KeyboardInterrupt:
            return


class _SendCommand(click.Command):
    """Remembers where ``--paste`` came among the ``--attach`` options: attachments are
    numbered ``[Image #N]`` in the order given."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["paste_at"] = _paste_position(args)
        return super().parse_args(ctx, args)


def _paste_position(args: list[str]) -> int | None:
    attaches = 0
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--":
            break
        elif arg == "--paste":
            return attaches
        elif arg == "--attach":
            attaches, skip = attaches + 1, True
        elif arg.startswith("--attach="):
            attaches += 1
        elif arg in ("--team", "--timeout"):
            skip = True
    return None


@cli.command(cls=_SendCommand)
@click.option("--team", default=None, callback=check_name, shell_complete=completers.teams)
@click.argument("member", callback=check_name, shell_complete=completers.members)
@click.argument("text", required=False)
@click.option("--attach", "attach", multiple=True, metavar="PATH",
              type=click.Path(path_type=Path),
              help="A file to send: an image, a PDF or a UTF-8 text file (Markdown, source, "
              "CSV, JSON, logs); repeatable, at most 32.")
@click.option("--paste", is_flag=True,
              help="Send the image on the clipboard too (wl-paste, xclip, osascript or "
              "PowerShell), numbered where it is given among --attach.")
@click.option("--wait", is_flag=True, help="Wait for the reply and print it.")
@click.option("--timeout", type=Seconds(), default=600.0,
              show_default=True, help="Seconds to wait for the reply (with --wait).")
@click.option("--dry-run", is_flag=True, help="Validate and plan the attachments; send nothing.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def send(team: str | None, member: str, text: str | None, attach: tuple[Path, ...],
         paste: bool, wait: bool, timeout: float, dry_run: bool, as_json: bool) -> None:
    """Send TEXT (or '-' for stdin) to MEMBER; print the message id, or with --wait the reply.

    Attachments (images, PDFs, text files) are numbered in the order given; TEXT may name
    them as [Image #N] or [Doc #N]. Each document reaches MEMBER natively, as page images and
    text, or as text (--dry-run shows the route). They are validated and planned before
    anything is sent: on any failure the whole message is refused (exit 3), one line per
    failure."""
    count = len(attach) + int(paste)
    if count > MAX_ATTACHMENTS:
        raise click.UsageError(f"at most {MAX_ATTACHMENTS} attachments per message "
                               f"({count} given); send them in several messages")
    text = _message_text(text, has_attachments=bool(count))
    paths = [str(p.expanduser().absolute()) for p in attach]
    with contextlib.ExitStack() as stack:
        if paste:
            from orchestrator.client.clipboard import read_clipboard, staged

            at = click.get_current_context().meta.get("paste_at")
            try:
                clipped = read_clipboard()
            except ClipboardError as exc:  # refused before send, like an attachment
                _refused([{"code": exc.code, "message": exc.message, "retryable":
                           exc.retryable, "attachment": "clipboard", "member": member}],
                         as_json, exc.exit_code)
                return
            pasted = stack.enter_context(staged(clipped, teamctl_home().root))
            paths.insert(len(paths) if at is None else at, str(pasted))
        params = {"team": team, "member": member, "text": text, "wait": wait and not dry_run,
                  "timeout": timeout, "dry_run": dry_run, "attachments": paths}
        from orchestrator.client.progress import Progress, reply_progress

        try:
            with Progress.on_terminal(quiet=as_json or not params["wait"]).run(
                    reply_progress(teamctl_home(), team, member)):
                result = client.call(teamctl_home(), protocol.SEND, params, timeout=(
                    timeout if wait else 0) + _CALL_MARGIN + 60 * count)
        except TeamctlError as exc:
            if exc.code != "attachment_refused":
                raise
            _refused(exc.details.get("failures") or [], as_json, exc.exit_code)
            return
    if dry_run:
        _print_plan(result, as_json)
        return
    _print_sent(result, wait=wait, as_json=as_json)


def _message_text(text: str | None, *, has_attachments: bool) -> str:
    if text == "-" or (text is None and not sys.stdin.isatty() and not has_attachments):
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise click.UsageError(f"the message on stdin is not valid UTF-8 (byte "
                                   f"{exc.start}); send text, or attach the file") from None
    elif text is not None and not is_utf8(text):
        raise click.UsageError("TEXT is not valid UTF-8; pass the message as UTF-8 text, or "
                               "with '-' on stdin")
    text = text or ""
    if not text.strip() and not has_attachments:
        raise click.UsageError("the message is empty: give TEXT, '-' for stdin, or --attach")
    return text


def _refused(failures: list[dict[str, Any]], as_json: bool, exit_code: int) -> None:
    if as_json:
        emit_json({"ok": False, "failures": failures})
    else:
        for failure in failures:
            say(f"{failure['code']}: {failure['message']}", err=True)
    sys.exit(exit_code)


def _print_plan(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json({"ok": True, "attachments": result["attachments"]})
        return
    for attachment in result["attachments"]:
        for line in plan_lines(attachment):
            say(line)
        if attachment.get("described_by"):
            known = " (its description is known)" if attachment.get("description_cached") \
                else ""
            say(f"  described by {attachment['described_by']}: the member receives the "
                f"description in place of the image{known}")
        for warning in attachment["warnings"]:
            say(f"  warning: {warning}")


def _print_sent(result: dict[str, Any], *, wait: bool, as_json: bool) -> None:
    if as_json:
        emit_json(result)
    elif not wait:
        say(result["id"])
    elif result["state"] == "answered":
        say(result["reply"])
    for note in () if as_json else result.get("notes") or ():  # "resuming: ... was paused"
        say(note, err=True)
    if wait and result["state"] != "answered":
        error = result.get("error") or {}
        if not as_json:
            say(f"{error.get('code', 'failed')}: {error.get('message', '')}", err=True)
        sys.exit(1)


@cli.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completers.teams)
@click.argument("member", callback=check_name, shell_complete=completers.members)
@click.option("--limit", type=click.IntRange(1, MAX_PAGE_ROWS), default=50, show_default=True,
              help="How many messages (the newest).")
@click.option("--before", metavar="ID", default=None,
              help="Only messages journaled before message ID (the next page).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def history(team: str | None, member: str, limit: int, before: str | None,
            as_json: bool) -> None:
    """Show MEMBER's messages: state, attempts, replies and errors (newest 50 by default)."""
    if before is not None and not re.fullmatch(ULID_PATTERN, before):
        raise click.BadParameter(f"{before!r} is not a message id", param_hint="--before")
    doc = client.call(teamctl_home(), protocol.HISTORY,
                      {"team": team, "member": member, "limit": limit, "before": before})
    if as_json:
        emit_json(doc)
        return
    if doc.get("before"):
        say(f"(older messages: teamctl history {member} --before {doc['before']})")
    for message in doc["messages"]:
        sender = message.get("sender") or "operator"
        say(f"{message['id']}  {message['state']}  attempts={message['attempts']}  "
            f"from {sender}" + (" (reply)" if message.get("kind") == "reply" else "")
            + _task_of(message))
        say("  > " + message["text"].replace("\n", "\n    "))
        for attachment in message.get("attachments") or ():
            say(f"  @ {sent_line(attachment)}")
        if message.get("reply"):
            say("  < " + message["reply"].replace("\n", "\n    "))
        for note in message.get("notes") or ():
            say(f"  ~ {note}")
        usage = message.get("usage")
        if usage:
            cost = "cost unknown" if usage.get("cost_usd") is None else \
                f"${usage['cost_usd']:.4f}"
            say(f"  $ {cost}, {usage.get('input_tokens', 0)} in "
                f"({usage.get('cached_input_tokens', 0)} cached) / "
                f"{usage.get('output_tokens', 0)} out tokens"
                + (" (estimated: the turn was cut)" if usage.get("estimated") else "")
                + (" (a lower bound: see teamctl status)" if usage.get("lower_bound") else ""))
        if message.get("error"):
            error = message["error"]
            say(f"  ! {error['code']}: {error['message']}")


def _task_of(message: dict[str, Any]) -> str:
    """``  task T3``: the board's task a message belongs to (none: nothing)."""
    return "" if message.get("task_id") is None else f"  task {message['task_id']}"


@cli.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completers.teams)
@click.argument("member", callback=check_name, shell_complete=completers.members)
@handles_errors
def restart(team: str | None, member: str) -> None:
    """Restart MEMBER (also clears a fatal state)."""
    doc = client.call(teamctl_home(), protocol.RESTART, {"team": team, "member": member},
                      timeout=120.0)
    for line in _member_table([m for m in doc["members"] if m["name"] == member]):
        say(line)


@cli.command()
@click.argument("team", required=False, callback=check_name, shell_complete=completers.teams)
@TEAM_OPTION
@handles_errors
def stop(team: str | None, team_option: str | None) -> None:
    """Stop TEAM's (or --team's) members; without TEAM, every team and then the daemon
    (returns once the daemon has exited, so a `launch` right after starts a new one)."""
    team = one_team(team, team_option)
    home = teamctl_home()
    with client.daemon_exit(home) if team is None else contextlib.nullcontext() as exited:
        doc = client.call(home, protocol.STOP, {"team": team}, timeout=180.0)
        for name in doc["stopped"]:
            say(f"stopped {name}")
        if not doc.get("daemon_stopping"):
            return
        if exited is not None and not exited(_DAEMON_EXIT_SECONDS):
            raise TeamctlError(f"the daemon answered 'stop' but has not exited after "
                               f"{_DAEMON_EXIT_SECONDS:g} s; see {home.logs / 'teamctl.jsonl'} "
                               "and run `teamctl stop` again")
        say("daemon stopped")


@cli.command()
@click.argument("message_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def thread(message_id: str, as_json: bool) -> None:
    """The conversation between teammates that message ID belongs to: who -> whom, depth,
    state, reply."""
    doc = _of_message(protocol.THREAD, message_id, "ID", as_json)
    if doc is None:
        return
    for message in doc["messages"]:
        indent = "  " * message["depth"]
        kind = " (reply)" if message["kind"] == "reply" else ""
        say(f"{indent}{message['sender']} -> {message['to']}{kind}  {message['id']}  "
            f"depth {message['depth']}  {message['state']}" + _task_of(message))
        say(f"{indent}  > " + message["text"].replace("\n", f"\n{indent}    "))
        if message.get("reply"):
            say(f"{indent}  < " + message["reply"].replace("\n", " "))


@cli.command()
@click.argument("message_id", metavar="MSG-ID")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def trace(message_id: str, as_json: bool) -> None:
    """The trace MSG-ID belongs to: who asked whom, each turn's duration, tokens, cost and
    outcome, from the journal (docs/telemetry.md)."""
    doc = _of_message(protocol.TRACE, message_id, "MSG-ID", as_json)
    if doc is None:
        return
    say(f"trace {doc['trace_id']}  (chain {doc['chain_id']})  {_spend(doc)}")
    depth: dict[str | None, int] = {None: -1}
    for span in doc["spans"]:
        level = depth[span["span_id"]] = depth.get(span["parent_id"], -1) + 1
        say("  " * level + _span_line(span))


def _of_message(method: protocol.Method, message_id: str, hint: str, as_json: bool
                ) -> dict[str, Any] | None:
    """``method``'s document about message ``message_id`` (checked first); with ``as_json``
    printed as it came, and None."""
    if not re.fullmatch(ULID_PATTERN, message_id):
        raise click.BadParameter(f"{message_id!r} is not a message id", param_hint=hint)
    doc: dict[str, Any] = client.call(teamctl_home(), method, {"id": message_id})
    if as_json:
        emit_json(doc)
        return None
    return doc


def _spend(row: dict[str, Any]) -> str:
    tokens = row.get("tokens") or {}
    used = sum(tokens.get(k, 0) for k in ("input", "cached_input", "output",
                                           "reasoning_output"))
    cost = row.get("cost_usd")
    return f"{used} tokens" + ("" if cost is None else f"  ${cost:.4f}")


def _span_line(span: dict[str, Any]) -> str:
    took = "…" if span["duration_ms"] is None else f"{span['duration_ms'] / 1000:.1f} s"
    outcome = span["outcome"] + (f" ({span['error_code']})" if span["error_code"] else "")
    if span["kind"] == "delivery":
        return (f"{span['sender']} -> {span['member']}  {span['message_id']}  {outcome}  "
                f"{took}  \"{span['text']}\"")
    if span["kind"] == "approval":
        return f"{span['name']}  {outcome}  waited {took}"
    if span["kind"] in ("plan", "tool", "gate", "check"):
        return f"{span['name']}  {outcome}  {took}"
    runs = "/".join(p for p in (span["runtime"], span["model"]) if p) or "?"
    return (f"{span['name']}  {runs}  epoch {span['epoch']}  {outcome}  {took}  "
            f"{_spend(span)}")


@cli.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completers.teams)
@click.option("--prune", is_flag=True,
              help="Remove worktrees that lose nothing: clean, merged or pushed, not running.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def worktrees(team: str | None, prune: bool, as_json: bool) -> None:
    """Each member's git worktree: path, branch, base, commits ahead, changes."""
    doc = client.call(teamctl_home(), protocol.WORKTREES, {"team": team, "prune": prune},
                      timeout=300.0)
    if as_json:
        emit_json(doc)
        return
    if not doc["worktrees"] and not doc["pruned"]:
        say("no worktrees (worktree = true in a team file makes one per member)")
    for tree in doc["worktrees"]:
        state = "missing" if tree["missing"] else (
            f"{tree['ahead']} ahead, {tree['dirty']} changed, {tree['untracked']} untracked")
        say(f"{tree['team']}/{tree['member']}  {tree['branch']} (from {tree['base']})  "
            f"{state}  {tree['path']}")
        if tree["diffstat"]:
            say(f"  {tree['diffstat']}")
    for name in doc["pruned"]:
        say(f"pruned {name}")
    for kept in doc["kept"]:
        say(f"kept {kept['team']}/{kept['member']}: {kept['reason']}")


@cli.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completers.teams)
@click.argument("member", callback=check_name, shell_complete=completers.members)
@click.option("--stat", is_flag=True, help="Only the summary of changed files.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def diff(team: str | None, member: str, stat: bool, as_json: bool) -> None:
    """MEMBER's changes against its worktree's base (commits, edits and new files)."""
    doc = client.call(teamctl_home(), protocol.DIFF, {"team": team, "member": member, "stat": stat},
                      timeout=300.0)
    if as_json:
        emit_json(doc)
    else:
        say(doc["text"], nl=False)


@cli.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they come.")
@click.option("--team", default=None)
@click.option("--member", default=None)
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSON lines.")
def logs(follow: bool, team: str | None, member: str | None, as_json: bool) -> None:
    """Print the redacted diagnostics (works with or without a running daemon)."""
    from orchestrator import diagnostics

    path = teamctl_home().logs / diagnostics.LOG_FILE_NAME
    events, offset = diagnostics.read_history(path)

    def show(batch: list[dict[str, Any]]) -> None:
        for event in batch:
            if diagnostics.matches(event, team=team, member=member):
                say(json_text(event) if as_json else diagnostics.format_event(event))

    show(events)
    if follow:
        try:
            for batch in diagnostics.follow(path, offset):
                show(batch)
        except KeyboardInterrupt:
            pass


@cli.command()
def mcp() -> None:
    """The stdio MCP server a member's runtime starts (not for people): send_message,
    list_team, message_status, the board's tools, acting as the member whose token is in its
    environment (each line relayed to the daemon, which answers as that member)."""
    from orchestrator.client.mcp_bridge import main

    sys.exit(main())


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(teamctl completion bash)"."""
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    assert completer is not None
    click.echo(completer(cli, {}, "teamctl", "_TEAMCTL_COMPLETE").source())


@cli.command()
@click.argument("name", required=False)
def schema(name: str | None) -> None:
    """Print the JSON Schema of the --json document NAME (every document without NAME)."""
    from orchestrator.protocol import DOCUMENTS, model

    if name is None:
        emit_json({key: model(ref).model_json_schema() for key, ref in DOCUMENTS.items()})
        return
    ref = DOCUMENTS.get(name)
    if ref is None:
        raise click.BadParameter(f"no document {name!r}; documents: {', '.join(DOCUMENTS)}",
                                 param_hint="NAME")
    emit_json(model(ref).model_json_schema())


@cli.command()
@click.option("--notify-fd", type=int, default=None, hidden=True)
def daemon(notify_fd: int | None) -> None:
    """Run the daemon in the foreground."""
    from orchestrator.daemon.main import main as daemon_main

    sys.exit(daemon_main(teamctl_home(), notify_fd=notify_fd))


@cli.command()
@click.argument("teamfile", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--host", "host", default=None, metavar="NAME",
              help="Check a member host instead: a [hosts.NAME] of TEAMFILE (SSH or "
              "kubernetes), or user@box.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def doctor(teamfile: Path | None, host: str | None, as_json: bool) -> None:
    """Which runtimes are installed; with TEAMFILE, which credential each member will use;
    with --host, whether a member host answers over SSH and which CLIs it has."""
    from orchestrator.client.doctor import (
        describe_members,
        inspect_cgroups,
        inspect_host,
        inspect_runtimes,
        inspect_sandbox,
    )

    if host is not None:
        from orchestrator.config import load_team_file
        from orchestrator.diagnostics import configure_stderr

        configure_stderr()  # the hosts' code logs here: never onto a --json stdout
        _host_report(inspect_host(host, load_team_file(teamfile) if teamfile else None),
                     as_json)
        return
    config = None
    if teamfile is not None:
        from orchestrator.config import load_team_file

        config = load_team_file(teamfile)
    report = inspect_runtimes(config)
    report["sandbox"] = inspect_sandbox()
    report["cgroups"] = inspect_cgroups()
    if config is not None:
        from orchestrator.client.forge_doctor import inspect_forge

        report["members"] = describe_members(config)
        report["forge"] = inspect_forge(config)
    blocked = [row for row in report.get("members", []) if row.get("problem")]
    forge = report.get("forge")
    if as_json:
        emit_json(report)
    else:
        _doctor_text(report)
    if forge is not None and not forge["ok"] and not as_json:
        say(f"teamctl: forge {visible_line(forge['repo'])}: "
            f"{visible_line(forge['problem'])}", err=True)
    if blocked and not as_json:
        for row in blocked:
            say(f"teamctl: member {row['member']} cannot start: {row['problem']} — "
                f"{row['fix']}", err=True)
    if blocked or (forge is not None and not forge["ok"]):
        sys.exit(1)


def _doctor_text(report: dict[str, Any]) -> None:
    for row in report.get("members", []):
        where = row["path"] or row["command"]
        say(f"{row['member']:<12} {row['runtime']:<9} login={row['login']:<9} "
            f"permissions={row['permissions']:<5} {row['credential']}: {row['source']}")
        say(f"{'':<12} {where} {row.get('version') or ''}".rstrip())
        for key in ("rw", "ro", "hidden"):
            if row.get("sandbox"):
                say(f"{'':<12} sandbox {key}: {', '.join(row['sandbox'][key])}")
        if row.get("ceiling"):
            say(f"{'':<12} ceiling {row['ceiling']}")
        if (row.get("sandbox") or {}).get("started"):
            say(f"{'':<12} sandbox start: {row['sandbox']['started']}")
        if row.get("codex_sandbox"):
            box = row["codex_sandbox"]
            say(f"{'':<12} codex sandbox {box['sandbox']}: {box['helper']} (TMPDIR "
                f"{box['tmpdir']})")
    for row in report["runtimes"]:
        name = f"{row['runtime']} {row['acp_agent']}" if row["acp_agent"] else row["runtime"]
        fix = f'command = "/path/to/{row["command"]}" for the member' if row["acp_agent"] \
            else row["env_var"]
        where = row["path"] or f"{row['command']} not found (install it, or set {fix})"
        say(f"{name:<12} {row.get('version') or '-':<24} {where}")
    box = report["sandbox"]
    say(f"sandbox: bubblewrap {box['version'] or '-'} at {box['path'] or '-'}, "
        + ("namespaces OK" if box["ok"] else f"unavailable: {box['reason']}; {box['fix']}"))
    say(_ceilings_line(report["cgroups"]))
    catalog = report["vision_catalog"]
    say(f"vision catalog: {catalog['entries']} models, checked {catalog['checked']}")
    forge = report.get("forge")
    if forge is not None and forge["permissions"] is not None:
        held = ", ".join(k for k, v in forge["permissions"].items() if v) or "none"
        say(f"forge: {visible_line(forge['repo'])} at {visible_line(forge['api'])}: the token "
            f"({forge['token_env']}) has {held}"
            + (f"; missing {', '.join(forge['missing'])}" if forge["missing"] else ""))
    state = "running" if report["daemon_running"] else "not running"
    say(f"home: {report['home']} (daemon {state})")


def _ceilings_line(cgroups: dict[str, Any]) -> str:
    """Which controllers members' cgroups can take (here, or on a host), or why not."""
    held = ", ".join(f"{row['controller']} (v{row['version']})" for row in cgroups["controllers"]
                     if row["version"] is not None) or "none"
    return f"ceilings: cgroups {held}" + ("" if cgroups["ok"] else
                                          f"; unavailable: {cgroups['reason']}; {cgroups['fix']}")


def _host_report(report: dict[str, Any], as_json: bool) -> None:
    failed = [row for row in report.get("checks", []) if not row["ok"]]
    if as_json:
        emit_json(report)
    elif report["reachable"] and report.get("kind") == "kubernetes":
        made = "a Sandbox (agent-sandbox)" if report["mode"] == "sandbox" else \
            "a Pod and a PVC (no agent-sandbox CRD served)"
        say(f"host {report['host']} (kubernetes, {report['destination']}, namespace "
            f"{report['namespace']}): API reachable in {report['seconds']:.2f}s; "
            f"each member gets {made}")
        for row in report["checks"]:
            say(f"  {row['check']:<40} {'ok  ' if row['ok'] else 'FAIL'} {row['detail']}")
    elif report["reachable"]:
        say(f"host {report['host']} ({report['destination']}): reachable in "
            f"{report['seconds']:.2f}s, python {report['python']}, home {report['home']}")
        for row in report["runtimes"]:
            where = f"{row.get('version') or '-'}  {row['path']}" if row.get("found") else \
                f"not found ({row['command']}: install it there, or set command)"
            say(f"  {row['runtime']:<9} {where}")
        if report.get("cgroups"):
            say(f"  {_ceilings_line(report['cgroups'])}")
        for row in report["checks"]:
            say(f"  {row['check']:<40} {'ok  ' if row['ok'] else 'FAIL'} {row['detail']}")
    else:
        error = report["error"] or {}
        say(f"{error.get('code')}: {error.get('message')}", err=True)
    if not report["reachable"] or failed:
        sys.exit(1)


def main() -> None:
    try:
        cli(prog_name="teamctl")
    except Exception as exc:  # a bug: one line, not a traceback (the daemon logs its side)
        say(f"teamctl: internal error: {type(exc).__name__}: {exc} (this is a bug in "
            "teamctl; please report it)", err=True)
        sys.exit(1)
