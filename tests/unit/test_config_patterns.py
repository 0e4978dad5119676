"""The team file's bounded patterns keep their bounds when the bound is checked apart from the
regex (a bounded repeat of a Unicode class compiled to megabytes in pydantic-core)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from orchestrator.config import AllowRule, SshOption


@pytest.mark.parametrize(("rule", "ok"), [
    ("Write", True), ("Bash(npm test*)", True), ("mcp__teamctl.send-message", True),
    ("a" * 81, True), ("a" * 82, False),
    ("Bash(" + "x" * 500 + ")", True), ("Bash(" + "x" * 501 + ")", False),
    ("Bash()", False), ("Bash(a)b", False), ("Wr ite", False), ("-Write", False),
    ("Bash((x))", False), ("Write\n", False),
])
def test_an_allow_rule_is_a_tool_of_at_most_81_characters_and_a_glob_of_at_most_500(
        rule: str, ok: bool) -> None:
    adapter = TypeAdapter(AllowRule)
    if ok:
        assert adapter.validate_python(rule) == rule
    else:
        with pytest.raises(ValidationError):
            adapter.validate_python(rule)


@pytest.mark.parametrize(("option", "ok"), [
    ("ServerAliveInterval=30", True), ("A" * 64 + "=1", True), ("A" * 65 + "=1", False),
    ("Ab=" + "x" * 1000, True), ("Ab=" + "x" * 1001, False), ("Ab=x y", False),
    ("Ab=x\x00", False), ("A=1", False), ("Ab=", False), ("Ab=1\n", False),
])
def test_an_ssh_option_is_a_name_of_at_most_64_characters_and_a_value_of_at_most_1000(
        option: str, ok: bool) -> None:
    adapter = TypeAdapter(SshOption)
    if ok:
        assert adapter.validate_python(option) == option
    else:
        with pytest.raises(ValidationError):
            adapter.validate_python(option)
