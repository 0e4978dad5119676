"""The real Qwen Code (pinned) as an ACP member against the fake chat-completions API: a text
turn with its usage, a teammate message through teamctl's MCP tool, an image turn whose planned
bytes reach the API."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.e2e.conftest import (
    QWEN_VERSION,
    first_acp_turn,
    message_the_peer,
    qwen_member,
    send_planned_image,
)
from tests.e2e.fake_chat import FakeChat, newest_user_images, newest_user_text

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Teamctl

pytestmark = pytest.mark.e2e


def _member_row(teamctl: Teamctl, name: str) -> dict:
    rows = {r["name"]: r for r in teamctl.json("status")["teams"][0]["members"]}
    return rows[name]  # type: ignore[no-any-return]


def test_real_qwen_answers_a_text_turn_over_acp_and_its_usage_is_journaled(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    ready = first_acp_turn(teamctl, qwen_member("qw", qwen_bin, chat), "hello qwen")
    assert (ready["agent"], ready["image"]) == ("qwen-code", True)
    turns = [r for r in chat.chat_requests() if newest_user_text(r["body"]) == "hello qwen"]
    assert turns and turns[0]["body"]["model"] == "text-model"
    [message] = teamctl.json("history", "qw")["messages"]
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (11, 3)
    version = subprocess.run([str(qwen_bin), "--version"], capture_output=True, text=True,
                             timeout=60, check=False)
    assert version.stdout.strip() == QWEN_VERSION, "the pinned release"


def test_real_qwen_messages_a_teammate_through_teamctls_mcp_tool(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat, tmp_path: Path) -> None:
    message_the_peer(teamctl, qwen_member("qw", qwen_bin, chat, permissions="full"),
                     "mcp__teamctl__send_message", chat.chat_requests,
                     lambda body: {t["function"]["name"] for t in body.get("tools", [])})


def test_real_qwen_sends_the_planned_image_bytes_to_the_api(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    """The planned variant goes as an ACP image block; Qwen Code puts it in the chat request
    as a data URL: the same bytes (sha256) and MIME reach the provider. (Qwen Code gates
    images by the model's name: a name it thinks text-only gets "[image: image/png]" instead,
    so the model here is a Qwen VL name.)"""
    planned = send_planned_image(teamctl, qwen_member("qw", qwen_bin, chat,
                                                      model="qwen3-vl-plus", vision=True))
    sent = [i for r in chat.chat_requests() for i in newest_user_images(r["body"])]
    assert sent, "the image reached the API"
    assert (sent[0]["sha256"], sent[0]["data_url_mime"], sent[0]["width"]) == (
        planned["sha256"], planned["mime"], planned["width"])
