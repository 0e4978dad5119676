"""The `ask` profile with the real CLIs against fake APIs scripted to call a write tool: the
request appears in `teamctl approvals --json`, `approve` makes the file appear in the member's
workdir, `deny --message` makes the model's next request carry that message, and a kill -9 of
the daemon while a request waits leaves it `expired` and a new request after recovery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support.asking import launch, next_request, wait_answered
from tests.support.driver import REPO
from tests.support.fake_anthropic import newest_tool_result
from tests.support.processes import wait_pid_exit
from tests.support.real_members import claude_member, codex_member, opencode_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


TEAM = "e2e"

def test_real_claude_asks_approve_writes_and_deny_reaches_the_model(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic,
        follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, claude_member("lead", claude_bin, anthropic,
                                                    permissions="ask"))
    target = teamctl.workdir / "approved.txt"
    first = teamctl.run("send", "lead", f"DO_WRITE {target}").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["tool"], row["kind"], row["runtime"]) == ("Write", "permission", "claude")
    assert row["summary"].startswith(str(target)) and not target.exists()
    done = teamctl.run("approve", row["id"])
    assert done.returncode == 0, done.stderr
    assert "confirmed" in done.stdout
    wait_answered(follow_logs, first)
    assert target.read_text() == "written by fake model\n"

    refused = teamctl.workdir / "refused.txt"
    second = teamctl.run("send", "lead", f"DO_WRITE {refused}").stdout.strip()
    row = next_request(teamctl, follow_logs, not_id=row["id"])
    assert teamctl.run("deny", row["id"], "--message", "write it under docs/").returncode == 0
    wait_answered(follow_logs, second)
    assert not refused.exists()
    result = newest_tool_result(anthropic.message_requests()[-1]["body"])
    assert result is not None and "write it under docs/" in result, result


def test_real_claude_ask_user_question_is_answered_from_the_cli(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic,
        follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, claude_member("lead", claude_bin, anthropic,
                                                    permissions="ask"))
    first = teamctl.run("send", "lead", "DO_ASK tabs or spaces?").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["kind"], row["tool"], row["questions"]) == (
        "question", "AskUserQuestion", ["tabs or spaces?"])
    assert teamctl.run("answer", row["id"], "spaces").returncode == 0
    wait_answered(follow_logs, first)
    result = newest_tool_result(anthropic.message_requests()[-1]["body"])
    assert result is not None and "spaces" in result, result


def test_real_claude_request_waiting_when_the_daemon_dies_expires_and_is_asked_again(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic,
        follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, claude_member("lead", claude_bin, anthropic,
                                                    permissions="ask"))
    target = teamctl.workdir / "later.txt"
    message_id = teamctl.run("send", "lead", f"DO_WRITE {target}").stdout.strip()
    first = next_request(teamctl, follow_logs)
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "daemon"],
                               env=teamctl.env, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    teamctl.spawned.append(process)
    assert process.stdout is not None and "ready" in process.stdout.readline()
    process.stdout.close()
    second = next_request(teamctl, follow_logs, not_id=first["id"])
    assert teamctl.run("approve", first["id"]).returncode == 1, "the stale one applies nothing"
    assert teamctl.run("approve", second["id"]).returncode == 0
    wait_answered(follow_logs, message_id)
    assert target.exists()
    states = {r["id"]: r["state"] for r in teamctl.json("approvals", "--all")["approvals"]}
    assert (states[first["id"]], states[second["id"]]) == ("expired", "approved")


def test_real_opencode_asks_over_http_approve_runs_and_deny_reaches_the_model(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat,
        follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, opencode_member(
        "des", opencode_bin, chat, model="fake/text-model", vision=False, permissions="ask"))
    target = teamctl.workdir / "made.txt"
    first = teamctl.run("send", "des", f"DO_BASH touch {target}").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["tool"], row["runtime"]) == ("bash", "opencode")
    assert f"touch {target}" in row["summary"]
    done = teamctl.run("approve", row["id"])
    assert done.returncode == 0 and "confirmed" in done.stdout, done.stdout + done.stderr
    wait_answered(follow_logs, first)
    assert target.exists()

    second = teamctl.run("send", "des", f"DO_WRITE {teamctl.workdir / 'no.txt'}"
                         ).stdout.strip()
    row = next_request(teamctl, follow_logs, not_id=row["id"])
    assert row["tool"] == "edit"
    assert teamctl.run("deny", row["id"], "--message", "not that file").returncode == 0
    wait_answered(follow_logs, second)
    assert not (teamctl.workdir / "no.txt").exists()
    bodies = json.dumps(chat.chat_requests()[-1]["body"])
    assert "not that file" in bodies, "the model was told why"


def test_real_opencode_question_is_answered_from_the_cli(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat,
        follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, opencode_member(
        "des", opencode_bin, chat, model="fake/text-model", vision=False, permissions="ask"))
    first = teamctl.run("send", "des", "DO_ASK tabs or spaces?").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["kind"], row["questions"]) == ("question", ["tabs or spaces?"])
    done = teamctl.run("answer", row["id"], "spaces")
    assert done.returncode == 0 and "confirmed" in done.stdout, done.stdout + done.stderr
    wait_answered(follow_logs, first)
    tool_output = json.dumps(chat.chat_requests()[-1]["body"]["messages"][-1])
    assert "spaces" in tool_output, "the model got the operator's answer"


def test_real_codex_app_server_asks_and_approve_runs_the_command(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses,
        follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, codex_member("rev", codex_bin, responses,
                                                   permissions="ask"))
    target = teamctl.workdir / "ran.txt"
    first = teamctl.run("send", "rev", f"DO_ESCALATE touch {target}").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["tool"], row["runtime"]) == ("commandExecution", "codex")
    assert "touch" in row["summary"]
    done = teamctl.run("approve", row["id"])
    assert done.returncode == 0, done.stderr
    wait_answered(follow_logs, first)
    assert target.exists()
    assert teamctl.json("approvals", "--all")["approvals"][0]["confirmed_at"] is not None
