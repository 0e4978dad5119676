"""The real ACP agents (pinned Qwen Code and Gemini CLI, each against its fake provider API) in
the cases that are not a plain turn: a permission request answered from ``teamctl approvals``
(approve runs the command, deny refuses it), a stalled turn ended by ``session/cancel`` and
delivered again on the same process, and a kill -9 of the agent after which the member restarts,
loads the same session and its next turn carries the earlier conversation to the API again."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import fake_chat, fake_gemini
from tests.support.asking import launch, next_request, wait_answered
from tests.support.daemon import kill_the_agent
from tests.support.real_members import gemini_member, qwen_member

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.fake_provider import FakeProvider

pytestmark = pytest.mark.e2e

TEAM = "e2e"
REDELIVERED = "pong: [teamctl] your previous turn on message "


@dataclass
class Agent:
    """One real agent on its fake API: its member, its turn requests, their user texts."""

    member: Callable[..., dict[str, Any]]
    api: FakeProvider
    turns: Callable[[], list[dict[str, Any]]]
    user_texts: Callable[[dict[str, Any]], list[str]]
    before_kill: Callable[[Path, str], None] = lambda home, session: None


def _gemini_session_started_a_minute_earlier(home: Path, session: str) -> None:
    """Gemini CLI 0.61.0 names a session's file by the minute it started
    (``chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl``) and, loading a session, first starts a
    new recording of that id — in the same minute, into the same file, resetting its
    messages — then reads it: a load in the session's first minute finds nothing
    (docs/runtimes.md § ACP). The file is moved a minute back, as if the session had started
    a minute earlier, so the load runs as it does for any later restart. (Between turns the
    agent writes nothing there.)"""
    [chat] = (home / ".gemini" / "tmp").glob(f"*/chats/session-*-{session[:8]}.jsonl")
    started = datetime.strptime(chat.name[8:24], "%Y-%m-%dT%H-%M")
    earlier = (started - timedelta(minutes=1)).strftime("%Y-%m-%dT%H-%M")
    chat.rename(chat.with_name(f"session-{earlier}{chat.name[24:]}"))


def _chat_user_texts(body: dict[str, Any]) -> list[str]:
    return [fake_chat.newest_user_text({"messages": [m]}) for m in body.get("messages", [])
            if m.get("role") == "user"]


@pytest.fixture(params=["qwen", "gemini"])
def agent(request: pytest.FixtureRequest) -> Agent:
    if request.param == "qwen":
        chat: fake_chat.FakeChat = request.getfixturevalue("chat")
        qwen_bin: Path = request.getfixturevalue("qwen_bin")
        return Agent(lambda name, **extra: qwen_member(name, qwen_bin, chat, **extra), chat,
                     chat.chat_requests, _chat_user_texts)
    gemini: fake_gemini.FakeGemini = request.getfixturevalue("gemini")
    gemini_bin: Path = request.getfixturevalue("gemini_bin")
    return Agent(lambda name, **extra: gemini_member(name, gemini_bin, gemini, **extra), gemini,
                 gemini.turn_requests, fake_gemini.user_texts,
                 _gemini_session_started_a_minute_earlier)


def _shell(command: str) -> str:
    """The scripted model's call of the agent's shell tool (both name it so)."""
    return "DO_CALL run_shell_command " + json.dumps(
        {"command": command, "description": "Run a test command"})


def test_real_acp_agent_asks_approve_runs_the_command_and_deny_refuses_it(
        teamctl: Teamctl, agent: Agent, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, agent.member("ag", permissions="ask"))
    target = teamctl.workdir / "approved.txt"
    first = teamctl.run("send", "ag", _shell(f"touch {target}")).stdout.strip()
    row = next_request(teamctl, follow_logs, timeout=120)
    assert (row["kind"], row["tool"], row["runtime"]) == ("permission", "execute", "acp")
    assert f"touch {target}" in row["summary"] and not target.exists()
    done = teamctl.run("approve", row["id"])
    assert done.returncode == 0 and "confirmed" in done.stdout, done.stdout + done.stderr
    wait_answered(follow_logs, first, timeout=120)
    assert target.exists()

    refused = teamctl.workdir / "refused.txt"
    second = teamctl.run("send", "ag", _shell(f"touch {refused}")).stdout.strip()
    row = next_request(teamctl, follow_logs, not_id=row["id"], timeout=120)
    assert teamctl.run("deny", row["id"], "--message", "not that file").returncode == 0
    wait_answered(follow_logs, second, timeout=120)
    assert not refused.exists()
    states = {r["id"]: r["state"] for r in teamctl.json("approvals", "--all")["approvals"]}
    assert sorted(states.values()) == ["approved", "denied"]


def test_real_acp_agent_stalled_turn_is_cancelled_and_redelivered_on_the_same_process(
        teamctl: Teamctl, agent: Agent) -> None:
    """The API stalls mid-turn: past turn_idle_timeout teamctl sends ``session/cancel``; the
    real agent ends the prompt ``cancelled`` and stays up; the message goes again to the same
    session and is answered."""
    launch(teamctl, TEAM, agent.member("ag", turn_idle_timeout=5.0))
    [pid] = teamctl.member_pids()
    agent.api.hang_next = True
    done = teamctl.run("send", "ag", "are you there?", "--wait", "--timeout", "150")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(REDELIVERED), done.stdout
    [message] = teamctl.json("history", "ag")["messages"]
    story = [(e["event"], e.get("action") or e.get("attempt"), e["ts"][11:23])
             for e in teamctl.log_events() if e["event"].startswith(("delivery_", "turn_"))]
    assert (message["state"], message["attempts"]) == ("answered", 2), story
    actions = [e["action"] for e in teamctl.log_events() if e["event"] == "turn_stuck"]
    assert actions == ["interrupt"], "the real agent honoured session/cancel: no kill"
    assert teamctl.member_pids() == [pid]


def test_real_acp_agent_killed_restarts_loads_its_session_and_the_history_reaches_the_api(
        teamctl: Teamctl, agent: Agent, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, agent.member("ag", backoff=[0.1, 1.0]))
    first = teamctl.run("send", "ag", "remember the word papaya", "--wait", "--timeout", "120")
    assert first.returncode == 0, first.stderr
    [session] = {e["session_id"] for e in teamctl.log_events() if e["event"] == "runtime_ready"}
    agent.before_kill(teamctl.home / "members" / TEAM / "ag" / "runtime" / "home", session)
    before, after = kill_the_agent(teamctl, follow_logs, timeout=120)
    assert (after["resumed"], after["session_id"]) == (True, before["session_id"])
    done = teamctl.run("send", "ag", "what was the word?", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: what was the word?"
    [texts] = [t for t in map(agent.user_texts, (r["body"] for r in agent.turns()))
               if t[-1:] == ["what was the word?"]]
    assert "remember the word papaya" in texts, "the loaded session carried the history"
