"""The real Qwen Code (pinned) as an ACP member against the fake chat-completions API: a text
turn with its usage, a teammate message through teamctl's MCP tool, an image turn whose planned
bytes reach the API."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests import images
from tests.e2e.conftest import QWEN_VERSION, qwen_member
from tests.e2e.fake_chat import FakeChat, newest_user_images, newest_user_text
from tests.integration.test_acp_member import acp_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Teamctl

pytestmark = pytest.mark.e2e


def _member_row(teamctl: Teamctl, name: str) -> dict:
    rows = {r["name"]: r for r in teamctl.json("status")["teams"][0]["members"]}
    return rows[name]  # type: ignore[no-any-return]


def test_real_qwen_answers_a_text_turn_over_acp_and_its_usage_is_journaled(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    team = teamctl.write_team("web", [qwen_member("qw", qwen_bin, chat)])
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    ready = [e for e in teamctl.log_events() if e["event"] == "runtime_ready"]
    assert ready and ready[0]["agent"] == "qwen-code" and ready[0]["image"] is True
    done = teamctl.run("send", "qw", "hello qwen", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: hello qwen"
    turns = [r for r in chat.chat_requests() if newest_user_text(r["body"]) == "hello qwen"]
    assert turns and turns[0]["body"]["model"] == "text-model"
    [message] = teamctl.json("history", "qw")["messages"]
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (11, 3)
    version = subprocess.run([str(qwen_bin), "--version"], capture_output=True, text=True,
                             timeout=60, check=False)
    assert version.stdout.strip() == QWEN_VERSION, "the pinned release"


def test_real_qwen_messages_a_teammate_through_teamctls_mcp_tool(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat, tmp_path: Path) -> None:
    team = teamctl.write_team("web", [qwen_member("qw", qwen_bin, chat, permissions="full"),
                                      acp_member("peer")])
    assert teamctl.run("launch", str(team)).returncode == 0
    call = json.dumps({"to": "peer", "text": "please review the form"})
    done = teamctl.run("send", "qw", f"DO_CALL mcp__teamctl__send_message {call}", "--wait",
                       "--timeout", "120")
    tools = {t["function"]["name"] for r in chat.chat_requests()
             for t in r["body"].get("tools", [])}
    assert "mcp__teamctl__send_message" in tools, sorted(tools)
    assert done.returncode == 0, done.stderr
    assert "done: " in done.stdout and "queued as " in done.stdout
    peer = teamctl.json("history", "peer")["messages"]
    assert peer and "please review the form" in peer[0]["text"]


def test_real_qwen_sends_the_planned_image_bytes_to_the_api(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    """The planned variant goes as an ACP image block; Qwen Code puts it in the chat request
    as a data URL: the same bytes (sha256) and MIME reach the provider. (Qwen Code gates
    images by the model's name: a name it thinks text-only gets "[image: image/png]" instead,
    so the model here is a Qwen VL name.)"""
    team = teamctl.write_team("web", [qwen_member("qw", qwen_bin, chat, model="qwen3-vl-plus",
                                                  vision=True)])
    assert teamctl.run("launch", str(team)).returncode == 0
    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "qw", "look")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    done = teamctl.run("send", "--attach", str(shot), "qw", "look", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    sent = [i for r in chat.chat_requests() for i in newest_user_images(r["body"])]
    assert sent, "the image reached the API"
    assert (sent[0]["sha256"], sent[0]["data_url_mime"], sent[0]["width"]) == (
        planned["sha256"], planned["mime"], planned["width"])
