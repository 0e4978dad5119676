"""The real codex (pinned) on each transport reports the command it ran, and teamctl's trace
shows it as a tool span of the turn (docs/telemetry.md, "The trace"): the app-server's
``item/started``/``item/completed`` of a ``commandExecution``, exec's ``item.started``/
``item.completed`` of a ``command_execution`` (captured: protocols/codex-captures/exec/
60_shell_tool_call_default_sandbox)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support.real_members import codex_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


def test_a_real_codex_command_is_a_tool_span_of_its_turn_on_both_transports(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    members = [codex_member("app", codex_bin, responses, permissions="edit"),
               codex_member("exe", codex_bin, responses, transport="exec", permissions="edit")]
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", members)))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    for name in ("app", "exe"):
        sent = teamctl.json("send", name, "DO_BASH echo traced", "--wait", "--timeout", "120")
        assert sent["state"] == "answered", sent
        spans = teamctl.json("trace", sent["id"], "--json")["spans"]
        [turn] = [s for s in spans if s["kind"] == "attempt"]
        tools = [s for s in spans if s["kind"] == "tool"]
        assert [(s["name"], s["outcome"]) for s in tools] == [("tool shell", "completed")], \
            (name, tools)
        assert tools[0]["parent_id"] == turn["span_id"]
        assert turn["start"] <= tools[0]["start"] <= tools[0]["end"] <= turn["end"]
