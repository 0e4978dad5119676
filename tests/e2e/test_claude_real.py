"""The real Claude Code CLI (pinned npm release) driven by teamctl against a local fake API."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.support import images
from tests.support.fake_anthropic import FakeAnthropic, newest_user_images, newest_user_text
from tests.support.real_members import CLAUDE_VERSION, claude_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl

pytestmark = pytest.mark.e2e


def test_real_claude_answers_and_the_api_received_the_turn(
    teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic
) -> None:
    team = teamctl.write_team("e2e", [claude_member("rev", claude_bin, anthropic)])
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stderr + launched.stdout
    status = teamctl.json("status")["teams"][0]["members"][0]
    session_id = status["session_id"]

    done = teamctl.run("send", "rev", "why is this button misaligned?", "--wait",
                       "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: why is this button misaligned?"

    [request] = anthropic.message_requests()
    assert request["path"].startswith("/v1/messages")
    assert request["body"]["model"] == "claude-sonnet-4-5"
    assert request["body"]["stream"] is True
    assert newest_user_text(request["body"]) == "why is this button misaligned?"
    assert request["headers"]["x-claude-code-session-id"] == session_id
    assert request["headers"]["user-agent"].startswith(f"claude-cli/{CLAUDE_VERSION}")
    system = json.dumps(request["body"]["system"])
    assert "You are the team's reviewer." in system

    second = teamctl.run("send", "rev", "and the second turn?", "--wait", "--timeout", "120")
    assert second.returncode == 0 and second.stdout.strip() == "pong: and the second turn?"
    [message_one, message_two] = teamctl.json("history", "rev")["messages"]
    assert message_one["state"] == message_two["state"] == "answered"


def test_real_claude_resumes_its_session_after_restart(
    teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic
) -> None:
    teamctl.run("launch", str(teamctl.write_team("e2e", [claude_member("rev", claude_bin,
                                                                         anthropic)])))
    assert teamctl.run("send", "rev", "remember the word kiwi", "--wait").returncode == 0
    assert teamctl.run("restart", "rev").returncode == 0
    done = teamctl.run("send", "rev", "what was the word?", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    last = anthropic.message_requests()[-1]["body"]
    texts = [
        block.get("text", "")
        for message in last["messages"] if message["role"] == "user"
        for block in (message["content"] if isinstance(message["content"], list) else [])
    ]
    assert "remember the word kiwi" in texts, "the resumed session carries the first turn"
    assert len({r["headers"]["x-claude-code-session-id"]
                for r in anthropic.message_requests()}) == 1


def test_real_claude_api_401_is_a_failed_delivery_with_the_api_message(
    teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic
) -> None:
    teamctl.run("launch", str(teamctl.write_team("e2e", [claude_member("rev", claude_bin,
                                                                         anthropic)])))
    anthropic.error_status = 401
    done = teamctl.run("send", "rev", "hello?", "--wait", "--timeout", "120")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("turn_failed: ")
    assert "401 fake authentication error" in done.stderr, "the API's own message"
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "failed" and message["reply"] is None
    assert "fake authentication error" in message["error"]["message"]
    assert message["error"]["code"] == "turn_failed"
    assert len(anthropic.message_requests()) == 1
    log_text = (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    assert "sk-ant-e2e-dummy-key-0000" not in log_text

    anthropic.error_status = None
    again = teamctl.run("send", "rev", "better now?", "--wait", "--timeout", "120")
    assert again.returncode == 0, "the member survives an API error"
    assert again.stdout.strip() == "pong: better now?"


def test_real_claude_delivers_the_planned_image_bytes_to_the_api(
    teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic
) -> None:
    teamctl.run("launch", str(teamctl.write_team("e2e", [claude_member("rev", claude_bin,
                                                                         anthropic)])))
    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    photo = images.exif_rotated_jpeg(teamctl.workdir / "photo.jpg")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "--attach", str(photo),
                        "rev", "what is misaligned here?")
    planned = [a["variants"][0] for a in plan["attachments"]]
    done = teamctl.run("send", "--attach", str(shot), "--attach", str(photo), "rev",
                       "what is misaligned here?", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: what is misaligned here?"
    [request] = anthropic.message_requests()
    received = newest_user_images(request["body"])
    assert [(r["media_type"], r["mime"], r["width"], r["height"], r["bytes"], r["sha256"])
            for r in received] == [(p["mime"], p["mime"], p["width"], p["height"], p["bytes"],
                                    p["sha256"]) for p in planned]
    assert planned[0]["width"] * planned[0]["height"] <= 1_150_000
    assert (planned[1]["width"], planned[1]["height"]) == (200, 400), "EXIF applied"


def test_real_claude_stuck_turn_is_interrupted_and_redelivered(
    teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic
) -> None:
    """The API stalls mid-turn: after turn_idle_timeout teamctl sends the real CLI an
    `interrupt` control request; the CLI ends the turn and stays up; the message is delivered
    again on the same process and answered."""
    member = claude_member("rev", claude_bin, anthropic, turn_idle_timeout=4.0)
    teamctl.run("launch", str(teamctl.write_team("e2e", [member])))
    pid = teamctl.member_pids()[0]
    anthropic.hang_next = True
    done = teamctl.run("send", "rev", "are you stuck?", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("pong: [teamctl] your previous turn on message "), \
        "the interrupted turn is continued in its session, not handed again"
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "answered" and message["attempts"] == 2
    stuck = [e["action"] for e in teamctl.log_events() if e["event"] == "turn_stuck"]
    assert stuck == ["interrupt"], "the real CLI honoured the interrupt: no kill"
    assert teamctl.member_pids() == [pid]
