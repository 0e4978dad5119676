"""``teamctl usage``, ``teamctl budget`` and ``teamctl accounts`` (docs/costs.md). Registered
by ``orchestrator.client.cli``."""

from __future__ import annotations

import time
from typing import Any

import click

from orchestrator import client, protocol
from orchestrator.client import completion
from orchestrator.client.common import (
    check_name,
    cost_note,
    cost_text,
    emit_json,
    handles_errors,
    say,
    teamctl_home,
)

__all__ = ["COMMANDS"]


@click.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
@click.option("--by", type=click.Choice(["member", "model", "day"]), default="member",
              show_default=True, help="How to group the turns.")
@click.option("--prices", is_flag=True, help="Show the price table instead (model → USD).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def usage(team: str | None, by: str, prices: bool, as_json: bool) -> None:
    """Tokens and cost of every turn the journal recorded, grouped by member, model or day."""
    doc = client.call(teamctl_home(), protocol.USAGE, {"team": team, "by": by, "prices": prices})
    if as_json:
        emit_json(doc)
        return
    if prices:
        say(f"price table checked {doc['checked']} (USD per million tokens)")
        for row in doc["models"]:
            say(f"  {row['model']:<22} in {row['input']:>7.3f}  cached "
                f"{row['cached_input']:>7.3f}  out {row['output']:>7.3f}  "
                f"[{row['source']}]")
        return
    if not doc["rows"]:
        say("no usage recorded yet")
        return
    header = ("TEAM", by.upper(), "TURNS", "INPUT", "CACHED", "OUTPUT", "COST")
    rows = [header] + [
        (r["team"], r["group"], str(r["turns"]), str(r["input_tokens"]),
         str(r["cached_input_tokens"]), str(r["output_tokens"]),
         ("\u2265 " if r.get("lower_bound") else "") + f"${r['cost_usd']:.4f}"
         + (f" + {r['cost_unknown']} unknown" if r["cost_unknown"] else ""))
        for r in doc["rows"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        say("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    partial = {r["lower_bound"]: r["group"] for r in doc["rows"] if r.get("lower_bound")}
    say(("\u2265 " if partial else "")
        + f"total ${doc['total_usd']:.4f}, {doc['total_tokens']} tokens")
    for why, group in partial.items():  # each reason once, with a group it holds for
        say(f"  {group}: {cost_note({'lower_bound': why})}")


@click.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
@click.argument("member", required=False, callback=check_name, shell_complete=completion.members)
@click.option("--add", "add_usd", type=click.FloatRange(min=0, max=1_000_000), default=None,
              metavar="USD", help="Raise the budget by USD (from what is spent, if none).")
@click.option("--set", "usd", type=click.FloatRange(min=0, max=1_000_000), default=None,
              metavar="USD", help="Set the budget to USD.")
@click.option("--add-tokens", type=click.IntRange(min=0), default=None, metavar="N")
@click.option("--set-tokens", "tokens", type=click.IntRange(min=0), default=None, metavar="N")
@click.option("--clear", is_flag=True, help="Remove the budget (no limit).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def budget(team: str | None, member: str | None, add_usd: float | None, usd: float | None,
           add_tokens: int | None, tokens: int | None, clear: bool, as_json: bool) -> None:
    """Show or change MEMBER's budget (without MEMBER: the team's). Raising it resumes a
    member paused by it: its held messages are delivered."""
    if add_usd is not None and usd is not None:
        raise click.UsageError("give --add or --set, not both")
    doc = client.call(teamctl_home(), protocol.BUDGET, {
        "team": team, "member": member, "usd": usd, "add_usd": add_usd, "tokens": tokens,
        "add_tokens": add_tokens, "clear": clear})
    if as_json:
        emit_json(doc)
        return
    who = f"{doc['member']} (team {doc['team']})" if doc["member"] else f"team {doc['team']}"
    say(f"{who}: {cost_text(doc['spend'])}")
    if note := cost_note(doc["spend"]):
        say(f"  {note}")
    if doc.get("hold"):
        say(f"  held: {doc['hold']}")


@click.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def accounts(team: str | None, as_json: bool) -> None:
    """The accounts the members spend — members sharing a login or a key share its rate-limit
    window — with what each window reported and what is held until when."""
    doc = client.call(teamctl_home(), protocol.ACCOUNTS, {"team": team})
    if as_json:
        emit_json(doc)
        return
    if not doc["accounts"]:
        say("no running team")
        return
    for account in doc["accounts"]:
        say(f"{account['name']}  {_window_line(account.get('window'), doc['now'])}")
        held = account.get("held")
        if held:
            say(f"  held: {(held['window'] or 'usage').replace('_', '-')} until "
                f"{_clock(held['until'], doc['now'])}"
                + ("" if held["named"] else ", then one member tries it")
                + (f"; probed by {held['probing']}" if held.get("probing") else ""))
        for row in account["members"]:
            paused = f"  {row['paused']}" if row.get("paused") else ""
            say(f"  {row['team']}/{row['member']}  priority {row['priority']}{paused}")


def _window_line(window: dict[str, Any] | None, now: float) -> str:
    if not window:
        return "nothing reported yet"
    name = (window["window"] or "usage").replace("_", "-")
    used = "" if window["used"] is None else f" {round(window['used'] * 100)}% used"
    resets = "" if not window["resets_at"] else \
        f", resets {_clock(window['resets_at'], now)}"
    return f"{name} window{used} ({window['status']}){resets}"


def _clock(at: float, now: float) -> str:
    """``15:34 (in 12m 3s)``."""
    left = max(int(at - now), 0)
    hours, rest = divmod(left, 3600)
    span = f"{hours}h {rest // 60}m" if hours else f"{rest // 60}m {rest % 60}s"
    return f"{time.strftime('%H:%M', time.localtime(at))} (in {span})"


COMMANDS = (usage, budget, accounts)
