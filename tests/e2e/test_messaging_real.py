"""Teammates talk with the real CLIs: each fake API is scripted to call teamctl's MCP tool
(as protocols/teammates.md's fakes did); the real CLI starts `teamctl mcp`, the router queues the
message, the recipient's API receives the sender's text, and the recipient's answer comes back
to the sender's API as a routed reply."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.support.fake_anthropic import newest_user_text as claude_text
from tests.support.fake_chat import newest_user_text as chat_text
from tests.support.fake_responses import newest_user_text as responses_text
from tests.support.real_members import claude_member, codex_member, opencode_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


def _settle(teamctl: Teamctl, *members: str) -> None:
    """Every message queued for ``members`` so far is delivered (a --wait behind them)."""
    for member in members:
        done = teamctl.run("send", member, "settle", "--wait", "--timeout", "180",
                           timeout=240)
        assert done.returncode == 0, done.stderr


def _texts(requests: list[dict[str, Any]], newest: Any) -> list[str]:
    return [newest(r["body"]) for r in requests]


def test_real_claude_lead_messages_a_real_codex_reviewer_and_gets_the_reply(
        teamctl: Teamctl, claude_bin: Path, codex_bin: Path, anthropic: FakeAnthropic,
        responses: FakeResponses) -> None:
    team = teamctl.write_team("e2e", [claude_member("lead", claude_bin, anthropic),
                                      codex_member("rev", codex_bin, responses)])
    assert teamctl.run("launch", str(team)).returncode == 0
    done = teamctl.run("send", "lead", "DO_SEND rev please review the login form", "--wait",
                       "--timeout", "180", timeout=240)
    assert done.returncode == 0, done.stderr
    assert "done: queued as " in done.stdout and "for rev" in done.stdout
    first = anthropic.message_requests()[0]["body"]
    names = [t.get("name") for t in first.get("tools", [])]
    assert "mcp__teamctl__send_message" in names and "SendMessage" not in names
    _settle(teamctl, "rev", "lead")
    assert "please review the login form" in _texts(responses.response_requests(),
                                                    responses_text)
    codex_tools = [t.get("name") or t.get("type")
                   for t in responses.response_requests()[0]["body"].get("tools", [])]
    assert "multi_agent_v1" not in codex_tools, "codex's own sub-agents bypass the router"
    lead_texts = _texts(anthropic.message_requests(), claude_text)
    routed = [t for t in lead_texts if t.startswith("reply from rev to ")]
    assert routed and "pong: please review the login form" in routed[0]


def test_real_codex_messages_a_real_opencode_designer(
        teamctl: Teamctl, codex_bin: Path, opencode_bin: Path, responses: FakeResponses,
        chat: FakeChat) -> None:
    team = teamctl.write_team("e2e", [
        codex_member("rev", codex_bin, responses),
        opencode_member("des", opencode_bin, chat, model="fake/text-model", vision=False)])
    assert teamctl.run("launch", str(team)).returncode == 0
    done = teamctl.run("send", "rev", "DO_SEND des check the spacing", "--wait",
                       "--timeout", "180", timeout=240)
    assert done.returncode == 0, done.stderr
    assert "queued as " in done.stdout
    _settle(teamctl, "des", "rev")
    assert "check the spacing" in _texts(chat.chat_requests(), chat_text)
    routed = [t for t in _texts(responses.response_requests(), responses_text)
              if t.startswith("reply from des to ")]
    assert routed and "pong: check the spacing" in routed[0]


def test_real_opencode_messages_a_real_claude(
        teamctl: Teamctl, opencode_bin: Path, claude_bin: Path, chat: FakeChat,
        anthropic: FakeAnthropic) -> None:
    team = teamctl.write_team("e2e", [
        opencode_member("des", opencode_bin, chat, model="fake/text-model", vision=False),
        claude_member("lead", claude_bin, anthropic)])
    assert teamctl.run("launch", str(team)).returncode == 0
    done = teamctl.run("send", "des", "DO_SEND lead the header is done", "--wait",
                       "--timeout", "180", timeout=240)
    assert done.returncode == 0, done.stderr
    _settle(teamctl, "lead", "des")
    assert "the header is done" in _texts(anthropic.message_requests(), claude_text)
    routed = [t for t in _texts(chat.chat_requests(), chat_text)
              if t.startswith("reply from lead to ")]
    assert routed and "pong: the header is done" in routed[0]
    [message] = [m for m in teamctl.json("history", "lead")["messages"]
                 if m["text"] == "the header is done"]
    assert (message["sender"], message["depth"]) == ("des", 1)


def test_an_image_sent_by_a_teammate_reaches_the_recipients_api_as_planned(
        teamctl: Teamctl, claude_bin: Path, codex_bin: Path, anthropic: FakeAnthropic,
        responses: FakeResponses) -> None:
    from tests.support import images
    from tests.support.fake_responses import newest_user_images

    team = teamctl.write_team("e2e", [claude_member("lead", claude_bin, anthropic),
                                      codex_member("rev", codex_bin, responses)])
    assert teamctl.run("launch", str(team)).returncode == 0
    shot = images.save(images.screenshot(1600, 900), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "rev", "x")
    [variant] = plan["attachments"][0]["variants"]
    done = teamctl.run("send", "lead", f"DO_SEND_IMAGE rev {shot} is this aligned?", "--wait",
                       "--timeout", "180", timeout=240)
    assert done.returncode == 0 and "queued as " in done.stdout, done.stdout + done.stderr
    _settle(teamctl, "rev")
    [request] = [r for r in responses.response_requests()
                 if responses_text(r["body"]) == "is this aligned?"]
    [received] = newest_user_images(request["body"])
    assert (received["sha256"], int(received["width"]), int(received["height"])) == (
        variant["sha256"], variant["width"], variant["height"])


def test_a_scripted_ping_pong_between_real_claudes_stops_at_the_depth_limit(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    """Two models scripted to always pass the message back: the router stops the chain at
    depth 5, journals the refusal, and the number of messages stays bounded."""
    team = teamctl.write_team("e2e", [claude_member("a", claude_bin, anthropic),
                                      claude_member("b", claude_bin, anthropic)],
                              pair_cooldown=0.0)
    assert teamctl.run("launch", str(team)).returncode == 0
    done = teamctl.run("send", "a", "DO_PINGPONG a b", "--wait", "--timeout", "180",
                       timeout=240)
    assert done.returncode == 0, done.stderr
    for _ in range(4):  # every hop and reply delivered (each round settles both queues)
        _settle(teamctl, "b", "a")
    refused = [e for e in teamctl.log_events() if e["event"] == "teammate_message_refused"]
    assert refused and refused[0]["code"] == "messaging_chain_too_deep"
    messages = [m for member in ("a", "b") for m in teamctl.json("history", member)["messages"]
                if m["text"] != "settle"]
    assert max(m["depth"] for m in messages if m["kind"] == "message") == 5
    assert len(messages) < 2 ** 6
