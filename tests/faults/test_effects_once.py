"""Effects once (issue 26), through the daemon with the fake Claude CLI: a turn that reached
the member and was cut — the daemon killed, the member's process killed, a budget hold, an
interrupt — is continued in the same session (the CLI's transcript shows the continuation, not
the message twice, and no image sent again); a lost session gets the message whole; and a
send_message the first attempt made and the continuation repeats reaches the recipient once."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.daemon import start_daemon
from tests.support.members import fake_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl

CONTINUATION = "[teamctl] your previous turn on message "


def _sessions(teamctl: Teamctl, member: str) -> list[list[dict[str, object]]]:
    """The user turns the fake CLI recorded in each of the member's sessions, in the order
    the member used them (its transcripts under the operator's ~/.claude)."""
    projects = Path(teamctl.env["HOME"]) / ".claude" / "projects"
    ids = dict.fromkeys(e["session_id"] for e in teamctl.log_events()
                        if e["event"] == "member_ready" and e.get("member") == member)
    files = [f for i in ids for f in projects.glob(f"*/{i}.jsonl")]
    return [[r for r in map(json.loads, f.read_text().splitlines()) if r["type"] == "user"]
            for f in files]


def _settle(teamctl: Teamctl, *members: str) -> None:
    """Everything queued for ``members`` so far is delivered (a --wait behind it)."""
    for member in members:
        done = teamctl.run("send", member, "noop", "--wait", "--timeout", "60")
        assert done.returncode == 0, done.stderr


def _recorded(teamctl: Teamctl, member: str, text: str, timeout: float = 30.0) -> None:
    """The fake CLI has read the turn (its transcript holds it): ``delivery_sent`` says only
    that the line reached its stdin, and a kill before the CLI read it is not mid-turn.
    Waits on the transcripts' changes (inotify through watchfiles), with a deadline."""
    import time

    import watchfiles

    def holds() -> bool:
        return any(r["content"] == text for s in _sessions(teamctl, member) for r in s)

    root = Path(teamctl.env["HOME"]) / ".claude"
    root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    if holds():
        return
    for _changes in watchfiles.watch(root, yield_on_timeout=True, rust_timeout=500,
                                     debounce=10, step=10):
        if holds():
            return
        assert time.monotonic() < deadline, f"{member}'s CLI never read {text!r}"


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    assert wait_pid_exit(pid, 10)


def test_a_daemon_killed_mid_turn_continues_the_turn_and_its_message_reaches_the_reviewer_once(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """The defect: after a daemon kill -9 the lead's turn was handed again, called
    send_message again, and the reviewer got the request twice. Now the lead's session gets a
    continuation, its repeated send_message returns the first receipt, and the reviewer gets
    one request and sends one reply."""
    lead = fake_member("lead", env={"FAKE_CLAUDE_HANG_AFTER_TOOLS_ON_TURN": "1",
                                    "FAKE_CLAUDE_REDO_ON_CONTINUE": "1"})
    team = teamctl.write_team("web", [lead, fake_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0
    request = f"MCP send_message {json.dumps({'to': 'rev', 'text': 'review the form'})}"
    message_id = teamctl.run("send", "lead", request).stdout.strip()
    sent = follow_logs.wait_for(lambda e: e["event"] == "teammate_message")
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    _kill(daemon)

    start_daemon(teamctl)
    continued = follow_logs.wait_for(lambda e: e["event"] == "delivery_continued"
                                     and e.get("message_id") == message_id, timeout=60)
    assert continued["cut"] == "daemon_restarted"
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    repeated = follow_logs.wait_for(lambda e: e["event"] == "teammate_message_repeated")
    assert repeated["message_id"] == sent["message_id"]
    _settle(teamctl, "rev", "lead")
    history = teamctl.json("history", "lead")["messages"]
    [turn] = [m for m in history if m["id"] == message_id]
    assert f"mcp: already sent as {sent['message_id']} for rev" in turn["reply"]
    to_rev = [m for m in teamctl.json("history", "rev")["messages"] if m["text"] != "noop"]
    assert [(m["id"], m["sender"]) for m in to_rev] == [(sent["message_id"], "lead")]
    assert len([m for m in history if m["kind"] == "reply"]) == 1, "one reply came back"
    [session] = _sessions(teamctl, "lead")
    assert session[0]["content"] == request
    assert str(session[1]["content"]).startswith(
        f"{CONTINUATION}{message_id} was interrupted (teamctl's daemon stopped)")
    assert [r["content"] for r in session].count(request) == 1, "not the message twice"


def test_a_reply_journaled_answered_but_not_routed_when_the_daemon_died_is_routed_once(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """The defect: a kill -9 between the reviewer's answer being journaled and its reply being
    routed lost the reply for good (the answer was kept, the reply never sent). Now the
    restarted daemon routes the reply it owes, once. The journal is left as that kill leaves
    it: the routed reply's rows removed from a settled exchange."""
    import sqlite3

    team = teamctl.write_team("web", [fake_member("lead"), fake_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0
    request = f"MCP send_message {json.dumps({'to': 'rev', 'text': 'review the form'})}"
    teamctl.run("send", "lead", request)
    sent = follow_logs.wait_for(lambda e: e["event"] == "teammate_message")
    follow_logs.wait_for(lambda e: e["event"] == "reply_routed")
    _settle(teamctl, "rev", "lead")
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    _kill(daemon)
    with sqlite3.connect(teamctl.home / "state.db") as db:
        [(reply,)] = db.execute("SELECT id FROM messages WHERE reply_to = ?",
                                (sent["message_id"],)).fetchall()
        db.execute("DELETE FROM deliveries WHERE message_id = ?", (reply,))
        db.execute("DELETE FROM messages WHERE id = ?", (reply,))
    db.close()

    start_daemon(teamctl)
    routed = follow_logs.wait_for(lambda e: e["event"] == "reply_routed"
                                  and e.get("message_id") != reply, timeout=60)
    assert routed["reply_to"] == sent["message_id"]
    _settle(teamctl, "lead")
    replies = [m for m in teamctl.json("history", "lead")["messages"] if m["kind"] == "reply"]
    assert [m["text"].split(":")[0] for m in replies] == [
        f"reply from rev to {sent['message_id']}"], "the owed reply, once"


def test_a_member_killed_mid_turn_gets_a_continuation_without_its_images(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """The member's process dies mid-turn: the restarted CLI resumes the session and is told
    the turn was interrupted; the image it already has is not sent again."""
    from tests.support import images

    shot = images.save(images.screenshot(400, 300), teamctl.workdir / "shot.png", "PNG")
    team = teamctl.write_team("web", [fake_member("lead", backoff=[0.05, 0.5])])
    assert teamctl.run("launch", str(team)).returncode == 0
    gate = teamctl.workdir / "never"
    message_id = teamctl.run("send", "--attach", str(shot), "lead",
                             f"GATE {gate}").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent"
                         and e.get("message_id") == message_id)
    _recorded(teamctl, "lead", f"GATE {gate}")
    _kill(teamctl.member_pids()[0])
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    [message] = teamctl.json("history", "lead")["messages"]
    assert message["state"] == "answered" and message["attempts"] == 2
    assert f"received: {CONTINUATION}{message_id} was interrupted (your process exited)" \
        in message["reply"]
    [session] = _sessions(teamctl, "lead")
    assert (session[0]["content"], len(session[0]["images"])) == (f"GATE {gate}", 1)
    assert len(session) == 2 and session[1]["images"] == [], "the image is not sent again"


def test_a_member_whose_session_is_gone_gets_the_whole_message(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """The restarted CLI cannot resume the session (No conversation found): a fresh session
    gets the message whole — at least once is kept."""
    team = teamctl.write_team("web", [fake_member(
        "lead", backoff=[0.05, 0.5], env={"FAKE_CLAUDE_FORGET_SESSIONS": "1"})])
    assert teamctl.run("launch", str(team)).returncode == 0
    gate = teamctl.workdir / "gate"
    message_id = teamctl.run("send", "lead", f"GATE {gate}").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent"
                         and e.get("message_id") == message_id)
    _recorded(teamctl, "lead", f"GATE {gate}")
    _kill(teamctl.member_pids()[0])
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent"
                         and e.get("message_id") == message_id and e.get("attempt") == 2,
                         timeout=60)
    gate.touch()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    first, second = _sessions(teamctl, "lead")
    assert [r["content"] for r in first] == [f"GATE {gate}"]
    assert [r["content"] for r in second] == [f"GATE {gate}"], "whole, in the new session"
    assert not any(e["event"] == "delivery_continued" for e in teamctl.log_events())


def test_a_turn_held_by_its_budget_continues_once_raised(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A budget hold cut a turn that had already spent (and done) part of its work: raising
    the budget continues it in its session rather than handing the message again."""
    team = teamctl.write_team("web", [fake_member("lead", budget_usd=0.5)])
    assert teamctl.run("launch", str(team)).returncode == 0
    message_id = teamctl.run("send", "lead", "SPEND 6.0 20").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "member_held" and e.get("hold") == "budget")
    assert teamctl.run("budget", "lead", "--add", "10").returncode == 0
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    [session] = _sessions(teamctl, "lead")
    assert session[0]["content"] == "SPEND 6.0 20"
    assert str(session[1]["content"]).startswith(
        f"{CONTINUATION}{message_id} was interrupted (the budget was reached; it has been "
        "raised since)")
    assert len(session) == 2


def test_an_interrupted_turn_is_continued_not_handed_again(teamctl: Teamctl) -> None:
    """The idle watchdog interrupts a silent turn; the session gets the continuation, not the
    message again."""
    member = fake_member("lead", turn_idle_timeout=1.0, env={"FAKE_CLAUDE_HANG_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "--json", "lead", "are you there?", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    message = json.loads(done.stdout)
    assert f"received: {CONTINUATION}{message['id']} was interrupted (it printed nothing " \
        "for too long and was interrupted)" in message["reply"]
    [session] = _sessions(teamctl, "lead")
    assert [r["content"] for r in session].count("are you there?") == 1
