"""The real codex 0.171.0 as a long-lived `codex app-server` member (transport =
"app-server") against the fake Responses API: text, an image whose bytes reach the API as
planned, a third turn on the same thread and the same process, a relaunch that resumes the
thread, and an API 401 with the API's message."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from tests import images
from tests.e2e.conftest import codex_member
from tests.e2e.fake_responses import newest_user_images, newest_user_text

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Teamctl
    from tests.e2e.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


def test_real_app_server_turns_image_one_process_and_a_resumed_thread(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    team = teamctl.write_team("e2e", [codex_member("rev", codex_bin, responses,
                                                   transport="app-server")])
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [row] = teamctl.json("status")["teams"][0]["members"]
    pid, thread = row["pid"], row["session_id"]
    exe = os.readlink(f"/proc/{pid}/exe")
    assert exe.endswith("/bin/codex") and "node" not in os.path.basename(exe), \
        "the native binary, not the node wrapper"
    first = teamctl.run("send", "rev", "remember the word papaya", "--wait", "--timeout", "120")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "pong: remember the word papaya"

    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "rev", "what is off?")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    second = teamctl.run("send", "--attach", str(shot), "rev", "what is off?", "--wait",
                         "--timeout", "120")
    assert second.returncode == 0 and second.stdout.strip() == "pong: what is off?"
    [image] = newest_user_images(responses.response_requests()[-1]["body"])
    assert (image["mime"], image["width"], image["height"], image["sha256"]) == (
        planned["mime"], planned["width"], planned["height"], planned["sha256"])

    third = teamctl.run("send", "rev", "and the word?", "--wait", "--timeout", "120")
    assert third.stdout.strip() == "pong: and the word?"
    assert teamctl.member_pids() == [pid], "one app-server for every turn"
    assert {r["headers"]["session-id"] for r in responses.response_requests()} == {thread}

    assert teamctl.run("stop", "e2e").returncode == 0
    assert teamctl.run("launch", str(team)).returncode == 0
    fourth = teamctl.run("send", "rev", "still the same thread?", "--wait", "--timeout", "120")
    assert fourth.returncode == 0, fourth.stderr
    last = responses.response_requests()[-1]
    assert last["headers"]["session-id"] == thread
    texts = [newest_user_text({"input": [item]}) for item in last["body"]["input"]]
    assert "remember the word papaya" in texts, "the history was carried"


def test_real_app_server_api_401_is_a_failed_delivery_with_the_api_message(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    team = teamctl.write_team("e2e", [codex_member("rev", codex_bin, responses,
                                                   transport="app-server")])
    assert teamctl.run("launch", str(team)).returncode == 0
    responses.error_status = 401
    done = teamctl.run("send", "rev", "hello?", "--wait", "--timeout", "120")
    assert done.returncode == 1
    assert "Incorrect API key provided (fake 401)" in done.stderr
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "failed"
