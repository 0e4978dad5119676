"""The command modules ``teamctl`` loads when one of their commands runs
(orchestrator/client/lazy_commands.py): ``--help`` lists every command as if all were loaded,
loads none of them, and each row of the table is the command it names."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import click
from click.shell_completion import ShellComplete
from click.testing import CliRunner

from orchestrator.client.cli import cli
from orchestrator.client.lazy_commands import LAZY_COMMANDS
from tests.support.driver import REPO

MODULES = sorted({row.module for row in LAZY_COMMANDS.values()})
# what a command module brings that the CLI's start must not pay for
HEAVY = (*MODULES, "orchestrator.client.calls", "socket", "tempfile", "html", "base64")


def _first_paragraph(command: click.Command) -> str:
    return " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())


def test_each_lazy_row_is_the_command_it_names_with_its_own_first_paragraph() -> None:
    """A row names a command of its module, and says what that command's help says (a help
    edited in its module and not here fails this test, naming the row to write)."""
    for name, row in LAZY_COMMANDS.items():
        commands = {c.name: c for c in importlib.import_module(row.module).COMMANDS}
        assert name in commands, f"{row.module} has no command {name!r}"
        assert row.summary == _first_paragraph(commands[name]), \
            f'LAZY_COMMANDS["{name}"].summary = "{_first_paragraph(commands[name])}"'


def test_every_command_of_a_lazy_module_is_in_the_table() -> None:
    """A command added to a lazy module is listed by ``--help`` only through its row."""
    for module in MODULES:
        for command in importlib.import_module(module).COMMANDS:
            assert LAZY_COMMANDS.get(command.name or "", None) is not None, \
                f"{module}: command {command.name!r} has no row in LAZY_COMMANDS"
            assert LAZY_COMMANDS[command.name or ""].module == module


def _probe(args: list[str]) -> tuple[str, list[str]]:
    """``teamctl ARGS`` in a fresh interpreter: what it printed, and which of HEAVY it loaded."""
    probe = (
        "import contextlib, io, sys\n"
        "from orchestrator.client.cli import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(out):\n"
        f"    cli({args!r}, prog_name='teamctl', terminal_width=78)\n"
        "print(out.getvalue(), end='\\x00')\n"
        f"print(' '.join(sorted(n for n in sys.modules if n in {HEAVY!r})))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    said, loaded = done.stdout.split("\x00")
    return said, loaded.split()


def test_teamctl_help_lists_every_command_as_loaded_and_loads_none_of_their_modules() -> None:
    """``teamctl --help`` (1.57× ``import click`` when it imported them all, issue 45) shows
    the same list as a group with every module loaded, and imports none of them, nor the
    socket's client."""
    said, loaded = _probe(["--help"])
    assert loaded == []
    for name in cli.list_commands(click.Context(cli)):  # here: every module loaded
        assert cli.get_command(click.Context(cli), name) is not None
    assert set(cli.commands) == set(cli.list_commands(click.Context(cli)))
    with cli.make_context("teamctl", [], resilient_parsing=True, terminal_width=78) as ctx:
        assert said == cli.get_help(ctx) + "\n"


def test_a_lazy_command_loads_its_own_module_only() -> None:
    """``teamctl usage --help``: the costs module, and no other command's."""
    said, loaded = _probe(["usage", "--help"])
    assert said.startswith("Usage: teamctl usage")
    assert loaded == ["orchestrator.client.costs_cli"]


def test_a_lazy_group_runs_its_subcommands_and_completes_every_command_name() -> None:
    """``teamctl task --help`` lists the board's subcommands; completing a command name
    offers the lazy ones too (each with its summary)."""
    done = CliRunner().invoke(cli, ["task", "--help"], prog_name="teamctl")
    assert done.exit_code == 0 and "Commands:" in done.output and "assign" in done.output
    completed = {item.value: item.help for item in
                 ShellComplete(cli, {}, "teamctl", "_TEAMCTL_COMPLETE").get_completions([], "u")}
    assert set(completed) == {"ui", "usage"}
    assert completed["usage"].startswith("Tokens and cost of every turn")
