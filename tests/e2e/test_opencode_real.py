"""The real OpenCode (opencode-ai@1.18.33) `serve`, driven by teamctl, against a fake
OpenAI-compatible chat-completions API."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.support import images
from tests.support.fake_chat import FakeChat, newest_user_images, newest_user_text, replaced_images
from tests.support.real_members import OPENCODE_VERSION, opencode_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl

pytestmark = pytest.mark.e2e


def test_real_opencode_text_and_image_turns(teamctl: Teamctl, opencode_bin: Path,
                                            chat: FakeChat) -> None:
    team = teamctl.write_team("e2e", [
        opencode_member("des", opencode_bin, chat, model="fake/vision-model", vision=True)])
    launched = teamctl.run("launch", str(team), timeout=180)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    session = teamctl.json("status")["teams"][0]["members"][0]["session_id"]

    text = teamctl.run("send", "des", "what colour is a stop sign?", "--wait", "--timeout", "120")
    assert text.returncode == 0, text.stderr
    assert text.stdout.strip() == "pong: what colour is a stop sign?"

    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "des", "what is off?")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    done = teamctl.run("send", "--attach", str(shot), "des", "what is off?", "--wait",
                       "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: what is off?"
    last = chat.chat_requests()[-1]
    assert newest_user_text(last["body"]) == "what is off?"
    assert replaced_images(last["body"]) == []
    [image] = newest_user_images(last["body"])
    assert (image["data_url_mime"], image["mime"], image["width"], image["height"],
            image["bytes"], image["sha256"]) == (planned["mime"], planned["mime"],
                                                 planned["width"], planned["height"],
                                                 planned["bytes"], planned["sha256"])
    assert last["headers"]["user-agent"].startswith(f"opencode/{OPENCODE_VERSION}")
    assert last["headers"].get("x-session-id") == session
    assert not chat.chat_requests(titles=True)[len(chat.chat_requests()):], "titled: no title call"


def test_real_opencode_text_only_model_is_refused_before_any_request(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat) -> None:
    teamctl.run("launch", str(teamctl.write_team("e2e", [
        opencode_member("txt", opencode_bin, chat, model="fake/text-model", vision=False)])),
        timeout=180)
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    done = teamctl.run("send", "--attach", str(shot), "txt", "look")
    assert done.returncode == 3
    assert done.stderr.startswith("attachment_model_vision_unsupported: fake/text-model")
    assert chat.chat_requests(titles=True) == [], "nothing reached the API"
    ok = teamctl.run("send", "txt", "text still works", "--wait", "--timeout", "120")
    assert ok.returncode == 0 and ok.stdout.strip() == "pong: text still works"


def test_real_opencode_api_401_is_a_failed_delivery_with_the_api_message(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat) -> None:
    teamctl.run("launch", str(teamctl.write_team("e2e", [
        opencode_member("des", opencode_bin, chat, model="fake/vision-model", vision=True)])),
        timeout=180)
    chat.error_status = 401
    done = teamctl.run("send", "des", "hello?", "--wait", "--timeout", "120")
    assert done.returncode == 1
    assert done.stderr.strip() == "turn_failed: Incorrect API key provided (fake)"
    [message] = teamctl.json("history", "des")["messages"]
    assert message["state"] == "failed" and message["error"]["retryable"] is False
    assert "sk-e2e-dummy-opencode-key" not in (teamctl.home / "logs" / "teamctl.jsonl"
                                               ).read_text()


def test_real_opencode_session_is_reused_after_a_relaunch(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat) -> None:
    team = teamctl.write_team("e2e", [
        opencode_member("des", opencode_bin, chat, model="fake/vision-model", vision=True)])
    teamctl.run("launch", str(team), timeout=180)
    session = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    assert teamctl.run("send", "des", "remember mango", "--wait", "--timeout", "120"
                       ).returncode == 0
    assert teamctl.run("stop", "e2e").returncode == 0
    assert teamctl.run("launch", str(team), timeout=180).returncode == 0
    assert teamctl.json("status")["teams"][0]["members"][0]["session_id"] == session
    done = teamctl.run("send", "des", "which fruit?", "--wait", "--timeout", "120")
    assert done.stdout.strip() == "pong: which fruit?"
    history = json.dumps(chat.chat_requests()[-1]["body"]["messages"])
    assert "remember mango" in history, "the new serve process carried the session on"
