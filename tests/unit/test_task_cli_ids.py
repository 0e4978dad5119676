"""``teamctl task … ID``: a task id is ``T3`` or ``3`` and nothing else — a bad one is a usage
error (exit 2) naming the fix, before anything connects to the daemon."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from orchestrator.client.cli import cli

if TYPE_CHECKING:
    from pathlib import Path

BAD = ["T0", "0", "T-1", "-1", "T", "abc", "T1; rm -rf /", "T1 T2", "T" + "9" * 20,
       "9223372036854775808", "T3\n", "Ｔ３", "", "T1.5"]


@pytest.mark.parametrize("command", [
    ["review", "{}", "--approve"], ["review", "{}", "--reject", "why"], ["show", "{}"],
    ["release", "{}"], ["cancel", "{}"], ["assign", "{}", "lead"],
    ["deps", "T1", "--add", "{}"]])
@pytest.mark.parametrize("bad", BAD)
def test_a_bad_task_id_is_a_usage_error_before_any_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], bad: str) -> None:
    monkeypatch.setenv("TEAMCTL_HOME", str(tmp_path / "home"))
    args = ["task", *(bad if part == "{}" else part for part in command)]
    result = CliRunner().invoke(cli, args, prog_name="teamctl")
    assert result.exit_code == 2, (args, result.output)
    said = ["is not a task id (T3 or 3)"] + (["No such option"] if bad.startswith("-") else [])
    assert any(s in result.output for s in said), result.output  # "-1" may read as an option
    assert not (tmp_path / "home").exists(), "nothing connected or created the home"
