"""``teamctl notify init | test``: the phone's topics and key, and a test of each kind
(docs/notify.md). Registered on the ``teamctl`` group by ``orchestrator.client.cli``."""

from __future__ import annotations

import sys

import click

from orchestrator import client, protocol
from orchestrator.client import completion
from orchestrator.client.common import check_name, emit_json, handles_errors, say, teamctl_home
from orchestrator.errors import UsageError

__all__ = ["COMMANDS"]

_CALL_MARGIN = 15.0


@click.group()
def notify() -> None:
    """Push what needs you to a phone (ntfy) and alert channels (Apprise)."""


@notify.command()
@click.option("--server", default="https://ntfy.sh", show_default=True,
              help="The ntfy server the topics live on.")
@click.option("--force", is_flag=True, help="Replace an existing notify.toml (new topics, "
              "new key: the buttons of earlier notifications stop working).")
@handles_errors
def init(server: str, force: bool) -> None:
    """Random topic names (192 bits each) and an HMAC key, in TEAMCTL_HOME/notify.toml
    (0600). Subscribe to the printed topic in the ntfy app."""
    # loaded here, not at every CLI start (tomllib, secrets: issue 26's start-up figure)
    from orchestrator.notify_operator import generate, operator_file, read_operator, write_operator

    if not server.startswith(("https://", "http://")) or any(c.isspace() for c in server):
        raise UsageError(f"--server {server!r} is not an http(s) URL")
    home = teamctl_home()
    home.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if read_operator(home) is not None and not force:
        raise UsageError(f"{operator_file(home)} exists; keep it, or --force for new topics "
                         "(the buttons of earlier notifications then stop working)")
    written = generate(server)
    path = write_operator(home, written)
    say(f"wrote {path} (0600)")
    say(f"subscribe in the ntfy app to: {written.server}/{written.topic}")
    say("the response topic and the key stay in that file: share neither")
    say('then in the team file: [notify] ntfy = {} (or server = "…"); '
        "'teamctl notify test' checks the round trip")


@notify.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
@click.option("--timeout", type=click.FloatRange(1, 120), default=30.0, show_default=True,
              help="Seconds to wait for the round trip through the ntfy server.")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def test(team: str | None, timeout: float, as_json: bool) -> None:
    """Send one notification of each configured kind and wait for an action's round trip
    (posted to the response topic as the phone does, verified, its receipt published)."""
    doc = client.call(teamctl_home(), protocol.NOTIFY_TEST, {"team": team, "timeout": timeout},
                      timeout=timeout + _CALL_MARGIN)
    if as_json:
        emit_json(doc)
    else:
        say(f"team {doc['team']}: ntfy {doc.get('server') or 'not configured'}")
        for check in doc["checks"]:
            took = f" {check['seconds'] * 1000:.0f} ms" if check.get("seconds") is not None \
                else ""
            mark = "ok" if check["ok"] else "FAILED"
            detail = f" — {check['detail']}" if check.get("detail") else ""
            say(f"  {check['what']:<11} {mark}{took}{detail}")
    if not all(check["ok"] for check in doc["checks"]):
        sys.exit(1)


COMMANDS = (notify,)
