"""Idle members asleep, on the real CLIs (pinned releases, each against its fake API): Claude
Code, Codex (app-server and exec), OpenCode and Qwen Code over ACP. A member answers, falls
asleep past ``pause_after`` (its process gone), and the message that wakes it is answered by
a process that remembers the conversation: the request its CLI sends the API carries the turn
from before the sleep (``--resume``, ``thread/resume`` or ``exec resume``, OpenCode's
session, ACP ``session/load``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.real_members import claude_member, codex_member, opencode_member, qwen_member

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.driver import LogFollower, Teamctl

pytestmark = pytest.mark.e2e

PAUSE_AFTER = 2.0  # seconds: short, and longer than a real CLI's own start-up chatter
BEFORE = "remember the word kiwi"
AFTER = "what was the word?"


@dataclass
class Real:
    """One real CLI on its fake API: its member, and the API requests of its turns."""

    member: Callable[..., dict[str, Any]]
    requests: Callable[[], list[dict[str, Any]]]


@pytest.fixture(params=["claude", "codex", "codex-exec", "opencode", "qwen"])
def real(request: pytest.FixtureRequest) -> Real:
    name = request.param
    if name == "claude":
        api = request.getfixturevalue("anthropic")
        binary = request.getfixturevalue("claude_bin")
        return Real(lambda n, **x: claude_member(n, binary, api, **x), api.message_requests)
    if name.startswith("codex"):
        api = request.getfixturevalue("responses")
        binary = request.getfixturevalue("codex_bin")
        transport = "exec" if name == "codex-exec" else "app-server"
        return Real(lambda n, **x: codex_member(n, binary, api, transport=transport, **x),
                    api.response_requests)
    api = request.getfixturevalue("chat")
    if name == "opencode":
        binary = request.getfixturevalue("opencode_bin")
        return Real(lambda n, **x: opencode_member(n, binary, api, model="fake/text-model",
                                                   **x), api.chat_requests)
    binary = request.getfixturevalue("qwen_bin")
    return Real(lambda n, **x: qwen_member(n, binary, api, **x), api.chat_requests)


def test_a_real_member_falls_asleep_and_wakes_remembering_the_conversation(
        teamctl: Teamctl, follow_logs: LogFollower, real: Real) -> None:
    launched = teamctl.run("launch", str(teamctl.write_team(
        "e2e", [real.member("rev", pause_after=PAUSE_AFTER)])), timeout=180)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    first = teamctl.json("send", "rev", BEFORE, "--wait", "--timeout", "120")
    assert first["ok"] and first["reply"] == f"pong: {BEFORE}", first
    follow_logs.wait_after(
        lambda e: e["event"] == "delivery_answered" and e.get("message_id") == first["id"],
        lambda e: e["event"] == "member_asleep", timeout=60)
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert (row["launch"], row["pid"]) == ("asleep", None), row
    assert teamctl.member_pids() == []
    session = row["session_id"]

    done = teamctl.run("send", "rev", AFTER, "--wait", "--timeout", "120", timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"pong: {AFTER}"
    assert "resuming: rev was asleep since " in done.stderr, done.stderr
    woken = follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("woken"))
    assert (woken["resumed"], woken["session_id"]) == (True, session), woken
    # the woken turn's requests (a CLI may add a side request, e.g. a title, beside its turn's)
    woken_turn = [json.dumps(r["body"]) for r in real.requests() if AFTER in json.dumps(r["body"])]
    assert any(BEFORE in body for body in woken_turn), "the woken member's request carries " \
        "the turn from before its sleep"
    messages = teamctl.json("history", "rev")["messages"]
    assert [(m["state"], m["attempts"]) for m in messages] == [("answered", 1), ("answered", 1)]
