"""The real Gemini CLI (pinned) as an ACP member against the fake Gemini API: a text turn with its
usage journaled, an image turn whose planned bytes reach the API as inlineData, a teammate
message through teamctl's MCP tool, a permission request answered from ``teamctl approvals``, a
stalled turn cancelled, and a resume of the same session after a kill -9 of the agent."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.e2e.conftest import GEMINI_VERSION, gemini_member
from tests.e2e.fake_gemini import OUTPUT_TOKENS, PROMPT_TOKENS, newest_user_text

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Teamctl
    from tests.e2e.fake_gemini import FakeGemini

pytestmark = pytest.mark.e2e


def test_real_gemini_answers_a_text_turn_over_acp_and_its_usage_is_journaled(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Gemini CLI reports a turn's tokens only in the prompt answer's ``_meta.quota``: they
    reach the journal."""
    team = teamctl.write_team("web", [gemini_member("gem", gemini_bin, gemini)])
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    ready = [e for e in teamctl.log_events() if e["event"] == "runtime_ready"]
    assert ready and ready[0]["agent"] == "gemini-cli" and ready[0]["image"] is True
    done = teamctl.run("send", "gem", "hello gemini", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: hello gemini"
    [turn] = gemini.turn_requests()
    assert turn["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert newest_user_text(turn["body"]) == "hello gemini"
    assert turn["headers"]["x-goog-api-key"].startswith("sha256:"), "recorded, never kept"
    [message] = teamctl.json("history", "gem")["messages"]
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (
        PROMPT_TOKENS, OUTPUT_TOKENS)
    version = subprocess.run([str(gemini_bin), "--version"], capture_output=True, text=True,
                             timeout=60, check=False, env={"HOME": str(teamctl.workdir),
                                                           "PATH": "/usr/bin:/bin"})
    assert version.stdout.strip() == GEMINI_VERSION, "the pinned release"
