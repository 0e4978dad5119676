"""``make bench`` from a fresh clone (issue 45): a benchmark drives members as a member would —
through its own MCP server — or as the operator does, or measures in process, and says which.
bench_messaging called ``member.send_message`` with a member's token from its own process, which
the token binding refuses (``mcp_token_not_yours``): ``make bench`` failed there."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

import pytest

from tests.support.driver import REPO

if TYPE_CHECKING:
    from pathlib import Path

SCRIPTS = sorted((REPO / "bench").glob("bench_*.py"))
# how a benchmark reaches its members, in its docstring's words
SAYS_HOW = re.compile(r"as the operator drives them|as the operator does|in process"
                      r"|through its own MCP server")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_says_how_it_drives_members(script: Path) -> None:
    doc = ast.get_docstring(ast.parse(script.read_text()))
    assert doc and SAYS_HOW.search(" ".join(doc.split())), script


@pytest.mark.parametrize("script", [*SCRIPTS, REPO / "bench" / "_harness.py"],
                         ids=lambda p: p.name)
def test_no_benchmark_calls_as_a_member_from_its_own_process(script: Path) -> None:
    """A member's methods (``member.*``) take the member's token, which works only from the
    member's own processes: a benchmark never calls one, nor reads a token to do so."""
    text = script.read_text()
    assert not re.search(r"""["']member\.[a-z_]+["']""", text), script
    assert "TEAMCTL_MEMBER_TOKEN" not in text, script
