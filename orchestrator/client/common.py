"""What every ``teamctl`` command module shares: the name check, the home, the output (``say``
and ``emit_json``: whatever a member wrote shown visibly, orchestrator/visible.py), the
error-to-exit-code wrapper and the cost cell.

``cli`` builds the command group from the modules that import this one, so nothing here imports
a command module (the layout test holds the client free of import cycles).
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from orchestrator.client import completion
from orchestrator.errors import TeamctlError
from orchestrator.limits import NAME_PATTERN
from orchestrator.visible import json_text, visible

if TYPE_CHECKING:
    from orchestrator.paths import Home

__all__ = ["TEAM_OPTION", "check_name", "cost_note", "cost_text", "emit_json", "handles_errors",
           "is_utf8", "one_team", "say", "teamctl_home"]

F = TypeVar("F", bound=Callable[..., Any])
_NAME = re.compile(NAME_PATTERN)


def check_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A team or member name, checked before anything is sent (exit 2 with one line)."""
    if value is None:
        return None
    if not is_utf8(value) or not _NAME.match(value):
        shown = value.encode("utf-8", "backslashreplace").decode()
        raise click.BadParameter(
            f"{shown!r} is not a name: use letters, digits, '_' and '-' (at most 64, starting "
            "with a letter or digit)", ctx=ctx, param=param)
    return value


TEAM_OPTION = click.option("--team", "team_option", default=None, metavar="TEAM",
                           callback=check_name, shell_complete=completion.teams,
                           help="The same as TEAM.")


def one_team(team: str | None, team_option: str | None) -> str | None:
    """TEAM given as the argument or as ``--team`` (both: the same name)."""
    if team is not None and team_option is not None and team != team_option:
        raise click.UsageError(f"TEAM {team!r} and --team {team_option!r} differ; give one")
    return team if team is not None else team_option


def is_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogates from undecodable argv bytes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def teamctl_home() -> Home:
    """The teamctl home of this invocation (``TEAMCTL_HOME`` or the default)."""
    from orchestrator.paths import Home  # platformdirs and dataclasses: not for --help

    return Home.from_env()


def say(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` — a line the daemon's answer filled in — with every character that would
    act on the terminal shown as its mark (newlines and tabs kept). Every line a command
    prints goes through here: a member's reply, message, summary or title is data."""
    click.echo(visible(text), err=err, nl=nl)


def emit_json(doc: Any) -> None:
    """One JSON document on stdout, as ``--json`` prints it: the exact text, every control,
    bidi or format character a ``\\u`` escape (the same value to a parser, nothing a terminal
    acts on)."""
    click.echo(json_text(doc, indent=2))


def _fail(exc: TeamctlError, as_json: bool) -> None:
    from orchestrator.redaction import redact

    message = redact(exc.message)
    if as_json:
        emit_json({"ok": False, "error": {"code": exc.code, "message": message,
                                          "retryable": exc.retryable}})
    else:
        say(f"teamctl: {message}", err=True)
    sys.exit(exc.exit_code)


def handles_errors(fn: F) -> F:
    """Turn a TeamctlError into its message on stderr (or JSON) and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TeamctlError as exc:
            _fail(exc, bool(kwargs.get("as_json")))

    return wrapper  # type: ignore[return-value]


def cost_text(spend: dict[str, Any] | None) -> str:
    """A member's or team's spend for a table cell (``-``: the daemon keeps no ledger)."""
    from orchestrator.costs.text import cost_text as text

    return text(spend) if spend else "-"


def cost_note(spend: dict[str, Any] | None) -> str | None:
    """Why a spend is a lower bound, on a line of its own (None: it is not one)."""
    from orchestrator.costs.text import lower_bound_note

    return lower_bound_note(spend)
