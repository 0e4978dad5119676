"""The command modules ``teamctl`` imports only when one of their commands runs.

Every ``teamctl`` call pays for what the CLI imports before it parses its arguments: with the
approvals, costs, export, task, live-view and notify modules loaded at start, ``--help`` took
1.57× and ``status`` 1.68× the start of ``python -c "import click"`` (issue 45; the target is
1.5×, bench/bench_scale.py measures it). The group knows each such command by its name, its
module and the first paragraph of its help — all that ``teamctl --help`` lists — and imports
the module when the command itself is asked for (to run it, to show its own help, to complete
its arguments). tests/unit/test_cli_lazy.py holds every row to the command it names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, NamedTuple

import click

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["LAZY_COMMANDS", "LazyCommand", "LazyGroup"]


class LazyCommand(NamedTuple):
    """Where a command lives (a module with ``COMMANDS``), and what ``--help`` says of it."""

    module: str
    summary: str  # the first paragraph of the command's help, whitespace collapsed


_APPROVALS = "orchestrator.client.approvals_cli"
_COSTS = "orchestrator.client.costs_cli"

LAZY_COMMANDS: dict[str, LazyCommand] = {
    "accounts": LazyCommand(_COSTS, "The accounts the members spend — members sharing a login "
                            "or a key share its rate-limit window — with what each window "
                            "reported and what is held until when."),
    "answer": LazyCommand(_APPROVALS, "Answer the teammate's question ID with TEXT."),
    "approvals": LazyCommand(_APPROVALS, "What waits on you: teammates' permission requests "
                             "and questions, oldest first; with ID, that request (settled or "
                             "not)."),
    "approve": LazyCommand(_APPROVALS, "Let the teammate do what request ID asks."),
    "budget": LazyCommand(_COSTS, "Show or change MEMBER's budget (without MEMBER: the team's). "
                          "Raising it resumes a member paused by it: its held messages are "
                          "delivered."),
    "deny": LazyCommand(_APPROVALS, "Refuse request ID."),
    "export": LazyCommand("orchestrator.client.export_cli", "Export MEMBER's conversation (or "
                          "--all members') as JSON with its attachments (images, documents) "
                          "inlined."),
    "integrate": LazyCommand("orchestrator.client.land_cli", "Put done task ID into the merge "
                             "queue now (its owner's worktree commit)."),
    "notify": LazyCommand("orchestrator.client.notify_cli", "Push what needs you to a phone "
                          "(ntfy) and alert channels (Apprise)."),
    "queue": LazyCommand("orchestrator.client.land_cli", "The merge queue: what waits, what "
                         "runs, what landed or went back to its owner."),
    "task": LazyCommand("orchestrator.client.task_cli", "The team's board: tasks, what they "
                        "wait on, who holds them."),
    "ui": LazyCommand("orchestrator.client.ui_cli", "The live view: print its URL (with a "
                      "one-time sign-in token) and return."),
    "usage": LazyCommand(_COSTS, "Tokens and cost of every turn the journal recorded, grouped "
                         "by member, model or day."),
}


class LazyGroup(click.Group):
    """A ``click.Group`` whose ``LAZY_COMMANDS`` are imported when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = LAZY_COMMANDS.get(cmd_name)
        if cmd_name not in self.commands and lazy is not None:
            for command in importlib.import_module(lazy.module).COMMANDS:
                self.add_command(command)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As ``click.Group`` lists its commands, a lazy one by its summary: ``--help``
        imports none of them."""
        listed = [(name, command) for name, command in self._listed() if not command.hidden]
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.get_short_help_str(limit))
                                for name, command in listed])

    def _listed(self) -> Iterator[tuple[str, click.Command]]:
        for name in sorted({*self.commands, *LAZY_COMMANDS}):
            loaded = self.commands.get(name)
            yield name, loaded or click.Command(name, help=LAZY_COMMANDS[name].summary)
