"""What an approvals rule matches (docs/approvals.md, "Rules").

A rule is ``TOOL`` (every permission request of that tool) or ``TOOL(PATTERN)``; the tool is
named as its runtime names it, case-insensitive.

- For a command tool (Claude's ``Bash``, Codex's ``commandExecution``, OpenCode's ``bash``) the
  pattern is a list of words matched one by one against the command's argv (``shlex``). A
  command with a shell operator (``;``, ``&``, ``|``, redirections, ``(``, ``)``, a backtick,
  ``$(``, ``${``, a newline) never matches a patterned rule: what would run is not that argv.
- For every other tool the pattern is a path relative to the member's worktree (or workdir).
  The request's path must be absolute (the runtimes send absolute paths); it is normalised and
  resolved (``..`` and symlinks) and must lie inside the worktree, else no path rule matches.

In a word or a path, ``*`` matches within one segment and ``**`` any number of segments (a word
that is only ``**`` matches any number of arguments); neither ever matches a ``..`` segment.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.contracts import ApprovalRequest

__all__ = ["COMMAND_TOOLS", "KeptRule", "Rule", "Target", "kept_rule", "parse_rule", "target_of"]

COMMAND_TOOLS = frozenset({"bash", "commandexecution", "execute"})  # execute: ACP's tool kind
_RULE = re.compile(r"^(?P<tool>[A-Za-z_][\w.-]{0,80})(?:\((?P<pattern>[^()]{1,500})\))?$")
_OPERATOR = re.compile(r"[;&|<>()`\n\r]|\$[({]")
_SIZE = re.compile(r" \(\+\d+ lines\)$")  # what Claude's summary adds after a path
_ANY = "**"


@dataclass(frozen=True)
class Target:
    """What a request is about, as rules see it: its argv (a command tool), or its path's
    segments inside the worktree (``None``: no path, or one outside it)."""

    argv: tuple[str, ...] | None = None
    segments: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Rule:
    tool: str
    pattern: str | None = None

    def matches(self, request: ApprovalRequest, target: Target) -> bool:
        if request.kind != "permission" or request.tool.lower() != self.tool.lower():
            return False
        if self.pattern is None:
            return True
        if self.tool.lower() in COMMAND_TOOLS:
            return target.argv is not None and _match(_words(self.pattern), target.argv, _word)
        return target.segments is not None and \
            _match(tuple(_segments(self.pattern)), target.segments, _segment)

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"


def parse_rule(text: str) -> Rule:
    """``TOOL`` or ``TOOL(PATTERN)``; UsageError naming the form otherwise."""
    match = _RULE.match(text.strip())
    if match is None or (match["pattern"] is not None and _words_or_none(match["pattern"])
                         is None):
        raise UsageError(f"allow rule {text!r}: write TOOL or TOOL(PATTERN), e.g. \"Write\", "
                         "\"Write(docs/**)\" or \"Bash(npm test **)\"")
    return Rule(match["tool"], match["pattern"])


def target_of(request: ApprovalRequest, workdir: str | None) -> Target:
    """The request's argv or in-worktree path (touches the file system: resolves symlinks)."""
    if request.kind != "permission":
        return Target()
    if request.tool.lower() in COMMAND_TOOLS:
        return Target(argv=command_argv(request.summary))
    return Target(segments=_inside(_SIZE.sub("", request.summary), workdir))


def command_argv(command: str) -> tuple[str, ...] | None:
    """The command's argv, or None when it has a shell operator or does not parse."""
    if _OPERATOR.search(command):
        return None
    words = _words_or_none(command)
    return words or None


# -- what --always keeps ----------------------------------------------------------------------

@dataclass(frozen=True)
class KeptRule:
    rule: Rule
    scope: str  # what it approves, in a line the operator reads before it is kept


def kept_rule(request: ApprovalRequest, target: Target, member: str) -> KeptRule:
    """The narrowest rule ``approve --always`` keeps for ``request``: the exact argv of a
    command; the tool under the approved path's directory inside the member's worktree.
    UsageError when no rule could be that narrow (approve it without ``--always``)."""
    if request.tool.lower() in COMMAND_TOOLS:
        if target.argv is None:
            raise _no_rule(request, "this command has a shell operator (or does not parse), "
                           "and a rule never matches such a command")
        rule = Rule(request.tool, shlex.join(_escape(word) for word in target.argv))
        scope = f"will approve {request.tool} running exactly `{shlex.join(target.argv)}` " \
                f"for {member}"
    else:
        if target.segments is None:
            raise _no_rule(request, f"its path is not inside {member}'s worktree (or it has "
                           "no path), and a rule never approves anything outside it")
        folder = target.segments[:-1]
        pattern = "/".join([*(_escape(s) for s in folder), _ANY])
        where = f"under {'/'.join(folder)}/" if folder else "anywhere"
        rule = Rule(request.tool, pattern)
        scope = f"will approve {request.tool} {where} in {member}'s worktree"
    if _RULE.match(str(rule)) is None:
        raise _no_rule(request, "it cannot be written as a rule (parentheses, or too long)")
    return KeptRule(rule, scope)


def _no_rule(request: ApprovalRequest, why: str) -> UsageError:
    return UsageError(f"approve --always: no rule kept for {request.tool} "
                      f"{request.summary[:200]!r}: {why}. Approve it without --always, or "
                      "write an allow rule in the team file")


def _escape(text: str) -> str:
    """``text`` as a pattern that matches only itself."""
    return re.sub(r"([*?[])", r"[\1]", text)


# -- matching ---------------------------------------------------------------------------------

def _inside(path: str, workdir: str | None) -> tuple[str, ...] | None:
    if workdir is None or not os.path.isabs(workdir) or not os.path.isabs(path) \
            or "\0" in path:
        return None
    root = os.path.realpath(workdir)
    relative = os.path.relpath(os.path.realpath(os.path.normpath(path)), root)
    if relative == ".":
        return ()
    if relative == ".." or relative.startswith("../"):
        return None
    return tuple(relative.split("/"))


def _words_or_none(text: str) -> tuple[str, ...] | None:
    try:
        return tuple(shlex.split(text, comments=False))
    except ValueError:  # an unbalanced quote
        return None


def _words(pattern: str) -> tuple[str, ...]:
    return _words_or_none(pattern) or ()


def _segments(pattern: str) -> list[str]:
    """A path pattern's segments, relative to the worktree (an absolute one keeps its empty
    first segment, which matches nothing)."""
    return [s for s in pattern.split("/") if s != "."]


def _segment(pattern: str, name: str) -> bool:
    if name == "..":
        return pattern == ".."  # a wildcard never climbs out
    return fnmatch.fnmatchcase(name, pattern)


def _word(pattern: str, word: str) -> bool:
    """One argument against one pattern word: segment by segment, ``**`` across them."""
    return _match(tuple(pattern.split("/")), tuple(word.split("/")), _segment)


def _match(pattern: tuple[str, ...], items: tuple[str, ...],
           one: Callable[[str, str], bool]) -> bool:
    """``pattern`` against ``items`` item by item, a ``**`` item taking any number of items
    that hold no ``..`` (dynamic programming: linear in pattern × items)."""
    reach = [True] + [False] * len(items)  # reach[j]: pattern so far matches items[:j]
    for head in pattern:
        if head == _ANY:
            nxt = [False] * (len(items) + 1)
            for j in range(len(items) + 1):
                nxt[j] = reach[j] or (j > 0 and nxt[j - 1] and ".." not in
                                      items[j - 1].split("/"))
        else:
            nxt = [False] + [reach[j] and one(head, items[j]) for j in range(len(items))]
        reach = nxt
    return reach[-1]
