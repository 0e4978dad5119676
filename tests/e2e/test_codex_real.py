"""The real Codex CLI (@openai/codex@0.171.0) on the `exec` transport (one process per turn),
driven by teamctl against a fake Responses API."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support import images
from tests.support.fake_responses import FakeResponses, newest_user_images, newest_user_text
from tests.support.real_members import CODEX_VERSION, codex_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl

pytestmark = pytest.mark.e2e


def test_real_codex_text_image_and_third_turn_on_one_thread(
    teamctl: Teamctl, codex_bin: Path, responses: FakeResponses
) -> None:
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", [
        codex_member("rev", codex_bin, responses, transport="exec")])))
    assert launched.returncode == 0, launched.stdout + launched.stderr

    first = teamctl.run("send", "rev", "remember the word papaya", "--wait", "--timeout", "120")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "pong: remember the word papaya"
    thread = teamctl.json("status")["teams"][0]["members"][0]["session_id"]

    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "rev", "what is off?")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    second = teamctl.run("send", "--attach", str(shot), "rev", "what is off?", "--wait",
                         "--timeout", "120")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "pong: what is off?"
    [image] = newest_user_images(responses.response_requests()[-1]["body"])
    assert (image["data_url_mime"], image["mime"], image["width"], image["height"],
            image["bytes"], image["sha256"]) == (planned["mime"], planned["mime"],
                                                 planned["width"], planned["height"],
                                                 planned["bytes"], planned["sha256"])

    third = teamctl.run("send", "rev", "and the word?", "--wait", "--timeout", "120")
    assert third.stdout.strip() == "pong: and the word?"
    requests = responses.response_requests()
    assert len(requests) == 3
    assert {r["headers"]["session-id"] for r in requests} == {thread}
    assert requests[-1]["headers"]["user-agent"].startswith(f"codex_exec/{CODEX_VERSION}")
    history_texts = [newest_user_text({"input": [item]}) for item in requests[-1]["body"]["input"]]
    assert "remember the word papaya" in history_texts


def test_real_codex_api_401_is_a_failed_delivery_with_the_api_message(
    teamctl: Teamctl, codex_bin: Path, responses: FakeResponses
) -> None:
    teamctl.run("launch", str(teamctl.write_team("e2e", [
        codex_member("rev", codex_bin, responses, transport="exec")])))
    responses.error_status = 401
    done = teamctl.run("send", "rev", "hello?", "--wait", "--timeout", "120")
    assert done.returncode == 1
    assert done.stderr.startswith("turn_failed: unexpected status 401")
    assert "Incorrect API key provided (fake 401)" in done.stderr
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "failed" and message["error"]["retryable"] is False
    assert len(responses.response_requests()) == 1, "retries are off"
    assert "sk-e2e-dummy-key-000000" not in (teamctl.home / "logs" / "teamctl.jsonl").read_text()


def test_real_codex_thread_continues_after_a_relaunch(
    teamctl: Teamctl, codex_bin: Path, responses: FakeResponses
) -> None:
    team = teamctl.write_team("e2e", [codex_member("rev", codex_bin, responses, transport="exec")])
    teamctl.run("launch", str(team))
    assert teamctl.run("send", "rev", "remember kiwi", "--wait", "--timeout", "120"
                       ).returncode == 0
    thread = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    assert teamctl.run("stop", "e2e").returncode == 0
    assert teamctl.run("launch", str(team)).returncode == 0
    done = teamctl.run("send", "rev", "which fruit?", "--wait", "--timeout", "120")
    assert done.stdout.strip() == "pong: which fruit?"
    last = responses.response_requests()[-1]
    assert last["headers"]["session-id"] == thread
    assert "cold_resume" in last["headers"]["x-codex-turn-metadata"]
    texts = [newest_user_text({"input": [item]}) for item in last["body"]["input"]]
    assert "remember kiwi" in texts
