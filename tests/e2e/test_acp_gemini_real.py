"""The real Gemini CLI (pinned) as an ACP member against the fake Gemini API: a text turn with its
usage journaled, an image turn whose planned bytes reach the API as inlineData, a teammate
message through teamctl's MCP tool, a permission request answered from ``teamctl approvals``, a
stalled turn cancelled, and a resume of the same session after a kill -9 of the agent."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.e2e.conftest import (
    GEMINI_VERSION,
    first_acp_turn,
    gemini_member,
    message_the_peer,
    send_planned_image,
)
from tests.e2e.fake_gemini import (
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    declared_tools,
    newest_user_images,
    newest_user_text,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Teamctl
    from tests.e2e.fake_gemini import FakeGemini

pytestmark = pytest.mark.e2e


def test_real_gemini_answers_a_text_turn_over_acp_and_its_usage_is_journaled(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Gemini CLI reports a turn's tokens only in the prompt answer's ``_meta.quota``: they
    reach the journal."""
    ready = first_acp_turn(teamctl, gemini_member("gem", gemini_bin, gemini), "hello gemini")
    assert (ready["agent"], ready["image"]) == ("gemini-cli", True)
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


def test_real_gemini_messages_a_teammate_through_teamctls_mcp_tool(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Gemini CLI names an MCP server's tools ``mcp_<server>_<tool>``."""
    message_the_peer(
        teamctl, gemini_member("gem", gemini_bin, gemini, permissions="full"),
        "mcp_teamctl_send_message", gemini.turn_requests, declared_tools)


def test_real_gemini_sends_the_planned_image_bytes_to_the_api_as_inline_data(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """The planned variant goes as an ACP image block; Gemini CLI puts it in the request as an
    ``inlineData`` part: the same bytes (sha256) and MIME reach the API. (The vision catalog
    does not know the bare model name under ``acp``: ``vision = true``.)"""
    planned = send_planned_image(teamctl, gemini_member("gem", gemini_bin, gemini, vision=True))
    [sent] = [i for r in gemini.turn_requests() for i in newest_user_images(r["body"])]
    assert (sent["sha256"], sent["inline_mime"], sent["width"]) == (
        planned["sha256"], planned["mime"], planned["width"])


def test_real_gemini_refusing_yolo_in_an_untrusted_folder_still_starts_and_full_runs_tools(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Without the preset's --skip-trust, Gemini CLI answers session/set_mode yolo with an
    error: the member still starts (a warning says why), and the agent's request for each
    tool is answered by the ``full`` profile."""
    member = gemini_member("gem", gemini_bin, gemini, permissions="full",
                           command=[str(gemini_bin), "--acp"])
    del member["acp_agent"]
    member["env"] = {**member["env"], "GEMINI_MODEL": "gemini-2.5-flash"}  # type: ignore[dict-item]
    launched = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [refused] = [e for e in teamctl.log_events() if e["event"] == "acp_mode_refused"]
    assert refused["mode"] == "yolo" and "untrusted folder" in refused["reason"]
    target = teamctl.workdir / "made.txt"
    done = teamctl.run("send", "gem", f"DO_SHELL touch {target}", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert target.exists() and done.stdout.startswith("done: ")
