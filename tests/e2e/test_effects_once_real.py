"""Effects once with the real Claude CLI (issue 26): the daemon is killed with kill -9 while
the lead's turn is in flight, right after its model called send_message; the restarted daemon
continues the turn in the resumed session, the model (scripted to repeat its step) calls
send_message again and gets the first receipt, and the reviewer gets the request once."""

from __future__ import annotations

import os
import signal
import threading
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.daemon import start_daemon
from tests.support.fake_anthropic import FakeAnthropic, newest_tool_result, newest_user_text
from tests.support.processes import wait_pid_exit
from tests.support.real_members import claude_member

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl

pytestmark = pytest.mark.e2e

CONTINUATION = "[teamctl] your previous turn on message "


class CutAnthropic(FakeAnthropic):
    """The fake API, with the lead's turn cut after its tool call: the request that carries
    the first send_message's result hangs (until the test ends), and a teamctl continuation is
    answered with the same send_message again, as a model that repeats its steps would."""

    def __init__(self) -> None:
        super().__init__()
        self.hung = threading.Event()
        self.repeated = False

    def stream(self, body: dict[str, Any]) -> bytes:
        repeat = self._repeat(body)
        if repeat is not None:
            _, to, message = repeat.split(" ", 2)
            return self._tool(body.get("model", "?"), "mcp__teamctl__send_message",
                              {"to": to, "text": message})
        if newest_tool_result(body) is not None and not self.hung.is_set():
            self.hung.set()
            self.released.wait(120)  # the turn never ends: the daemon is killed meanwhile
        return super().stream(body)


    def _repeat(self, body: dict[str, Any]) -> str | None:
        """The DO_SEND step to do again, once: for the continuation's own model call (the one
        offered the tools, with the cut turn in its history), not the CLI's side calls."""
        if not newest_user_text(body).startswith(CONTINUATION):
            return None
        first = next((t[t.index("DO_SEND "):] for t in _user_texts(body) if "DO_SEND " in t),
                     None)  # the cut turn in the history, else the continuation's reminder
        tools = [t.get("name") for t in body.get("tools", [])]
        with self.lock:
            if first is None or "mcp__teamctl__send_message" not in tools or self.repeated:
                return None
            self.repeated = True
        return first


def _user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body.get("messages", []):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts += [b.get("text", "") for b in blocks or []
                  if message.get("role") == "user" and b.get("type") == "text"]
    return texts


@pytest.fixture
def cut_api() -> Iterator[CutAnthropic]:
    with CutAnthropic() as api:
        yield api


def test_real_claude_continues_a_turn_cut_by_a_daemon_kill_and_messages_once(
        teamctl: Teamctl, claude_bin: Path, cut_api: CutAnthropic,
        follow_logs: LogFollower) -> None:
    team = teamctl.write_team("e2e", [claude_member("lead", claude_bin, cut_api),
                                      claude_member("rev", claude_bin, cut_api)])
    assert teamctl.run("launch", str(team)).returncode == 0
    message_id = teamctl.run("send", "lead", "DO_SEND rev review the form").stdout.strip()
    sent = follow_logs.wait_for(lambda e: e["event"] == "teammate_message", timeout=120)
    assert cut_api.hung.wait(120), "the lead's turn is held open after its tool call"
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)

    start_daemon(teamctl)
    continued = follow_logs.wait_for(lambda e: e["event"] == "delivery_continued"
                                     and e.get("message_id") == message_id, timeout=120)
    assert continued["cut"] == "daemon_restarted"
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=180)
    repeated = follow_logs.wait_for(lambda e: e["event"] == "teammate_message_repeated")
    assert repeated["message_id"] == sent["message_id"]
    for member in ("rev", "lead"):
        done = teamctl.run("send", member, "settle", "--wait", "--timeout", "180", timeout=240)
        assert done.returncode == 0, done.stderr
    [turn] = [m for m in teamctl.json("history", "lead")["messages"] if m["id"] == message_id]
    assert turn["state"] == "answered"
    assert f"already sent as {sent['message_id']} for rev" in turn["reply"]
    to_rev = [m for m in teamctl.json("history", "rev")["messages"] if m["text"] != "settle"]
    assert [(m["id"], m["text"]) for m in to_rev] == [(sent["message_id"], "review the form")]
    mine = f"{CONTINUATION}{message_id} "  # (the reviewer's turn may be continued too)
    lead_bodies = [r["body"] for r in cut_api.message_requests()
                   if any(t.startswith(mine) for t in _user_texts(r["body"]))
                   and any(t.get("name") == "mcp__teamctl__send_message"
                           for t in r["body"].get("tools", []))]  # not the CLI's side calls
    assert lead_bodies, "the resumed session got the continuation"
    texts = _user_texts(lead_bodies[0])
    assert texts.count("DO_SEND rev review the form") <= 1, "never handed again as new"
    [continuation] = [t for t in texts if t.startswith(mine)]
    assert continuation.startswith(f"{CONTINUATION}{message_id} was interrupted (teamctl's "
                                   "daemon stopped)")
    assert continuation.endswith("(not a new request):\n\nDO_SEND rev review the form"), \
        "the message as a reminder: the CLI may not have written the cut turn before it died"
    reviews = [r for r in cut_api.message_requests()
               if newest_user_text(r["body"]) == "review the form"]
    assert len(reviews) == 1, "the reviewer did the work once"
