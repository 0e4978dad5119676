"""The real Gemini CLI (pinned) as an ACP member against the fake Gemini API: a text turn with its
usage journaled, an image turn whose planned bytes reach the API as inlineData, a teammate
message through teamctl's MCP tool, a permission request answered from ``teamctl approvals``, a
stalled turn cancelled, and a resume of the same session after a kill -9 of the agent."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests import images
from tests.e2e.conftest import GEMINI_VERSION, gemini_member
from tests.e2e.fake_gemini import (
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    declared_tools,
    newest_user_images,
    newest_user_text,
)
from tests.integration.test_acp_member import acp_member

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


def test_real_gemini_messages_a_teammate_through_teamctls_mcp_tool(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    team = teamctl.write_team("web", [gemini_member("gem", gemini_bin, gemini,
                                                    permissions="full"), acp_member("peer")])
    assert teamctl.run("launch", str(team)).returncode == 0
    call = json.dumps({"to": "peer", "text": "please review the form"})
    done = teamctl.run("send", "gem", f"DO_CALL mcp_teamctl_send_message {call}", "--wait",
                       "--timeout", "120")
    tools = set().union(*(declared_tools(r["body"]) for r in gemini.turn_requests()))
    assert "mcp_teamctl_send_message" in tools, " ".join(sorted(tools))
    assert done.returncode == 0, done.stderr
    assert "done: " in done.stdout and "queued as " in done.stdout
    peer = teamctl.json("history", "peer")["messages"]
    assert peer and "please review the form" in peer[0]["text"]


def test_real_gemini_sends_the_planned_image_bytes_to_the_api_as_inline_data(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """The planned variant goes as an ACP image block; Gemini CLI puts it in the request as an
    ``inlineData`` part: the same bytes (sha256) and MIME reach the API. (The vision catalog
    does not know the bare model name under ``acp``: ``vision = true``.)"""
    team = teamctl.write_team("web", [gemini_member("gem", gemini_bin, gemini, vision=True)])
    assert teamctl.run("launch", str(team)).returncode == 0
    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "gem", "look")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    done = teamctl.run("send", "--attach", str(shot), "gem", "look", "--wait", "--timeout",
                       "120")
    assert done.returncode == 0, done.stderr
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
