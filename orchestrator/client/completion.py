"""Shell completion of what only the daemon knows: team and member names, task ids, pending
approval ids (``eval "$(teamctl completion bash)"``; click's ``_TEAMCTL_COMPLETE``).

Each completer asks the running daemon once, with a short deadline, and offers what starts
with the word typed so far. It is silent when the daemon is down, busy or slow: a Tab never
prints an error into the operator's command line, and never waits long — nothing is cached,
so a name is never one that has gone. Standard library and click only (every ``teamctl``
call builds the parameters that name these functions)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator import client, protocol
from orchestrator.errors import TeamctlError
from orchestrator.limits import MAX_PAGE_ROWS
from orchestrator.visible import visible_line

if TYPE_CHECKING:
    import click
    from click.shell_completion import CompletionItem

    from orchestrator.protocol import Method

__all__ = ["ANSWER_TIMEOUT", "approval_ids", "members", "task_ids", "teams"]

ANSWER_TIMEOUT = 0.5  # seconds a Tab may wait for the daemon (its answers take milliseconds)


def _ask(method: Method, params: dict[str, Any]) -> Any:
    """The daemon's answer, or None: not running, refusing, or slower than the deadline."""
    try:
        from orchestrator.paths import Home  # at a Tab, not at every start

        return client.call(Home.from_env(), method, params, timeout=ANSWER_TIMEOUT)
    except (TeamctlError, OSError, ValueError):
        return None


def _team(ctx: click.Context) -> str | None:
    """The ``--team`` (or TEAM) given before the word being completed."""
    for key in ("team", "team_option"):
        value = ctx.params.get(key)
        if isinstance(value, str):
            return value
    return None


def _offered(found: list[tuple[str, str]], incomplete: str) -> list[CompletionItem]:
    """Each value that starts with ``incomplete``, its description shown visibly (zsh and
    fish print it: a member's words never reach the terminal raw)."""
    from click.shell_completion import CompletionItem  # only when a shell asks

    return [CompletionItem(value, help=visible_line(about)) for value, about in found
            if value.startswith(incomplete)]


def teams(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The running teams."""
    doc = _ask(protocol.STATUS, {"team": None}) or {"teams": []}
    return _offered([(t["name"], f"{len(t['members'])} members") for t in doc["teams"]],
                    incomplete)


def members(ctx: click.Context, param: click.Parameter, incomplete: str
            ) -> list[CompletionItem]:
    """The members of the team named before (every running team's, without one)."""
    doc = _ask(protocol.STATUS, {"team": _team(ctx)}) or {"teams": []}
    return _offered([(m["name"], f"{t['name']}: {m['runtime']}, {m['readiness']}")
                     for t in doc["teams"] for m in t["members"]], incomplete)


def task_ids(ctx: click.Context, param: click.Parameter, incomplete: str
             ) -> list[CompletionItem]:
    """The team's tasks, as ``T3`` (a word typed as ``3`` is completed as ``3…``)."""
    doc = _ask(protocol.TASK_LIST, {"team": _team(ctx), "after": 0, "limit": MAX_PAGE_ROWS}) or {
        "tasks": []}
    found = [(str(t["id"]), f"{t['state']}: {t['title']}") for t in doc["tasks"]]
    if incomplete[:1].isdigit():
        found = [(ref.lstrip("T"), about) for ref, about in found]
    return _offered(found, incomplete)


def approval_ids(ctx: click.Context, param: click.Parameter, incomplete: str
                 ) -> list[CompletionItem]:
    """What waits on the operator: the pending approvals."""
    doc = _ask(protocol.APPROVALS, {"team": _team(ctx), "all": False, "after": 0,
                                    "limit": MAX_PAGE_ROWS, "offset": 0}) or {"approvals": []}
    return _offered([(a["id"], f"{a['team']}/{a['member']}: {a['tool']}")
                     for a in doc["approvals"]], incomplete)
