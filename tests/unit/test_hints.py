"""Every command teamctl prints as a hint runs as printed (issue 45): each ``'teamctl …'`` in
a message of orchestrator/ or runtimes/ — an error's fix, a note, a page's text — is parsed by
the CLI itself, its placeholders filled the way the message fills them. A hint that names an
option the command does not have, or leaves out an argument it needs (``'teamctl history'``
without the member; ``'teamctl approvals --revoke'`` without the rule), fails here.
tests/integration/test_first_hour.py runs the hints a real daemon prints."""

from __future__ import annotations

import ast
import functools
import re
import shlex

import click
import pytest

from orchestrator.client.cli import cli
from tests.support.driver import REPO
from tests.support.source_facts import facts

# a hint quoted in a message, shown as code on the page, or a string that is one command
_HINT = re.compile(r"'(teamctl [^']*)'|<code>(teamctl [^<]*)</code>")
_COMMAND = re.compile(r"teamctl [a-z-]+(?: --?[a-z-]+| \{[^{}]+\}| [A-Z0-9]+)*")
_FIELD = re.compile(r"\{([^{}]+)\}")
# a module that may hold a hint: a literal opening with the command, or the command as code (a
# hint is quoted inside one literal or is one whole literal, so its source holds one of these);
# only these modules are parsed — every module parsed at each collection cost each xdist worker
# ~2 s of ``make unit``
_MAY_HOLD = re.compile(r"""['"]teamctl |<code>teamctl """)
# what each placeholder of a hint stands for, as the message fills it in
_VALUES = {
    "approval_id": "apv_" + "0" * 26, "row.id": "apv_" + "0" * 26,
    "member": "lead", "member.name": "lead", "who": "lead", "owner": "lead",
    "_e(member.name)": "lead", "task.owner": "lead", "team": "web", "task.team": "web",
    "edge": "T3 --remove T2", "ref": "T1",
    "entry.task": "3", "task.id": "3", "task_ref": "T3", "task_id": "3", "entry.owner": "lead",
    "row.task": "3",
    # metavars: what the reader writes in their place
    "TEAMFILE": "team.toml", "MEMBER": "lead", "TEXT": "yes", "USD": "5", "ID": "T1",
    "ID2": "T2", "RULE": "Write(docs/**)",
}


def _strings(source: bytes, filename: str) -> list[str]:
    """Every string of a module but its docstrings, an f-string with ``{expression}`` (read
    once per content: tests/support/source_facts.py)."""
    tree = ast.parse(source, filename=filename)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef |
                                ast.AsyncFunctionDef) and ast.get_docstring(node) is not None}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            found.append("".join(
                part.value if isinstance(part, ast.Constant) else
                "{" + ast.unparse(part.value) + "}"  # type: ignore[attr-defined]
                for part in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            found.append(node.value)
    return found


@functools.cache
def printed_hints() -> dict[str, str]:
    """Each hint, by where it is (the first place it is written)."""
    hints: dict[str, str] = {}
    for path in sorted([*(REPO / "orchestrator").rglob("*.py"), *(REPO / "runtimes").rglob(
            "*.py")]):
        if not _MAY_HOLD.search(path.read_text()):
            continue
        for text in facts(path, _strings):
            found = [quoted or code for quoted, code in _HINT.findall(text)]
            for hint in found + ([text] if _COMMAND.fullmatch(text) else []):
                hints.setdefault(hint, str(path.relative_to(REPO)))
    return hints


def _filled(hint: str) -> list[str]:
    words = shlex.split(_FIELD.sub(lambda m: _VALUES[m.group(1)], hint))
    return [_VALUES.get(word, word) for word in words]


def _parse(args: list[str]) -> None:
    """What ``teamctl ARGS`` does before it runs: click parses every level, the options'
    callbacks check each value; a hint that does not fit raises click.UsageError."""
    command: click.Command = cli
    ctx = cli.make_context("teamctl", list(args))
    while isinstance(command, click.Group):
        name, sub, rest = command.resolve_command(ctx, ctx._protected_args + ctx.args)
        assert sub is not None and name is not None
        command, ctx = sub, sub.make_context(name, rest, parent=ctx)


def test_the_hints_are_found() -> None:
    """The collector sees the hints it must (the list is not empty by accident)."""
    hints = printed_hints()
    assert {"teamctl notify init", "teamctl task list", "teamctl logs -f",
            "teamctl diff --team {team} {owner}",
            "teamctl budget {_e(member.name)} --add USD"} <= set(hints)
    assert len(hints) >= 25


@pytest.mark.parametrize("hint", sorted(printed_hints()))
def test_every_hint_teamctl_prints_runs_as_printed(hint: str) -> None:
    try:
        args = _filled(hint)
    except KeyError as exc:
        raise AssertionError(f"{hint!r} ({printed_hints()[hint]}): say in _VALUES what "
                             f"{exc} stands for") from None
    try:
        _parse(args[1:])
    except click.UsageError as exc:
        raise AssertionError(f"{hint!r} ({printed_hints()[hint]}) does not run as printed: "
                             f"{exc.format_message()}") from None
