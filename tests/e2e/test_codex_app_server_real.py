"""The real codex 0.171.0 as a long-lived `codex app-server` member (the default transport)
against the fake Responses API: text with the role as developer instructions, an image whose
bytes reach the API as planned, a third turn on the same thread and the same process, a
relaunch that resumes the thread, a stalled turn interrupted on the same process, an API 401
with the API's message — and the pinned version's own schema still has every field teamctl
relies on."""

from __future__ import annotations

import json
import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from runtimes.codex.schema import check
from tests.support import images
from tests.support.fake_responses import newest_user_images, newest_user_text
from tests.support.real_members import codex_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


def test_real_app_server_turns_image_one_process_and_a_resumed_thread(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    team = teamctl.write_team("e2e", [codex_member("rev", codex_bin, responses,
                                                   prompt="You review code, tersely.")])
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
    body = responses.response_requests()[0]["body"]
    assert newest_user_text(body) == "remember the word papaya", "the role is not the message"
    assert "You review code, tersely." in json.dumps(body), "the role reached the model"
    assert teamctl.json("history", "rev")["messages"][0]["usage"]["output_tokens"] == 10

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
    team = teamctl.write_team("e2e", [codex_member("rev", codex_bin, responses)])
    assert teamctl.run("launch", str(team)).returncode == 0
    responses.error_status = 401
    done = teamctl.run("send", "rev", "hello?", "--wait", "--timeout", "120")
    assert done.returncode == 1
    assert "Incorrect API key provided (fake 401)" in done.stderr
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "failed"


def test_real_app_server_interrupts_a_stalled_turn_and_redelivers_on_the_same_process(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    team = teamctl.write_team("e2e", [codex_member("rev", codex_bin, responses,
                                                   turn_idle_timeout=3.0)])
    assert teamctl.run("launch", str(team)).returncode == 0
    [pid] = teamctl.member_pids()
    responses.hang_next = True  # headers, then nothing: the API stalls mid-stream
    done = teamctl.run("send", "rev", "are you there?", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    # continued on the same thread: told the turn was cut, the message as a reminder
    assert done.stdout.strip().startswith("pong: [teamctl] your previous turn on message")
    assert done.stdout.strip().endswith("(not a new request):\n\nare you there?")
    [message] = teamctl.json("history", "rev")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 2)
    assert teamctl.member_pids() == [pid], "turn/interrupt ended it: no kill, no restart"
    actions = [e["action"] for e in teamctl.log_events() if e["event"] == "turn_stuck"]
    assert actions == ["interrupt"]


def test_the_pinned_schema_has_every_field_teamctl_relies_on(
        codex_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "schema"
    subprocess.run([str(codex_bin), "app-server", "generate-json-schema", "--out", str(out)],
                   check=True, capture_output=True, timeout=120)
    assert check(out) == [], "a field teamctl relies on changed in the pinned codex"
    notifications = out / "ServerNotification.json"  # and the check does see a change:
    doc = json.loads(notifications.read_text())
    del doc["definitions"]["ErrorNotification"]["properties"]["willRetry"]
    notifications.write_text(json.dumps(doc))
    assert check(out) == ["error: willRetry: no 'willRetry' there any more "
                          "(a fatal error must end the turn)"]
