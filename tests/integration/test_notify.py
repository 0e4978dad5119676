"""Needs you, on the phone (docs/notify.md), through a real daemon, the fake CLIs taught to ask
and a local ntfy server (tests/support/ntfy_fake.py: ntfy's documented publish and subscribe API; no
real ntfy server is installable here). The "phone" is this test: it reads the published
notification's action and POSTs its body to its URL, as the ntfy app does on a tap."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from orchestrator.daemon.notify._tokens import Signer
from orchestrator.protocol.notify import NotifyTestDoc
from tests.support.asking import next_request, reply_to, wait_answered
from tests.support.members import fake_member
from tests.support.notifying import TEAM, launch_notifying, setup_notify
from tests.support.ntfy_fake import FakeNtfy

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import LogFollower, Teamctl


@pytest.fixture
def ntfy() -> Iterator[FakeNtfy]:
    server = FakeNtfy()
    server.start()
    yield server
    if server._server is not None:
        server.stop()


def pushed(ntfy: FakeNtfy, topic: str, needle: str, timeout: float = 30.0) -> dict[str, Any]:
    """The first notification on ``topic`` whose title holds ``needle``."""
    found = ntfy.wait_for(topic, lambda ms: any(needle in m.get("title", "") for m in ms),
                          timeout)
    return next(m for m in found if needle in m.get("title", ""))


def tap(message: dict[str, Any], label: str) -> str:
    """What the ntfy app does on a tap of an ``http`` action: POST its body to its URL."""
    [action] = [a for a in message["actions"] if a["label"] == label]
    assert action["action"] == "http" and action["method"] == "POST"
    httpx.post(action["url"], content=action["body"].encode(), timeout=10).raise_for_status()
    return str(action["body"])


def receipt(ntfy: FakeNtfy, topic: str, text: str, count: int = 1) -> None:
    ntfy.wait_for(topic, lambda ms: sum(text in m.get("title", "") for m in ms) >= count)


def nth_event(follow_logs: LogFollower, name: str, n: int) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []
    return follow_logs.wait_for(lambda e: e["event"] == name and (seen.append(e) or
                                                                   len(seen) >= n))


def test_approve_from_the_phone_applies_it_and_publishes_applied(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """A permission request is published with Approve/Deny; a tap applies it through the
    same path as `teamctl approve` (the file appears) and "applied" comes back."""
    operator = setup_notify(teamctl, ntfy)
    launch_notifying(teamctl, fake_member("lead", permissions="ask"))
    message_id = teamctl.run("send", "lead", "WRITE out.txt hello").stdout.strip()
    row = next_request(teamctl, follow_logs)
    message = pushed(ntfy, operator["topic"], "lead asks: Write")
    assert "out.txt (+1 lines)" in message["message"] and message["priority"] == 4
    assert {a["label"] for a in message["actions"]} == {"Approve", "Deny"}
    assert all(a["url"] == f"{ntfy.url}/{operator['response_topic']}"
               for a in message["actions"])
    tap(message, "Approve")
    receipt(ntfy, operator["topic"], "applied: approved (the runtime confirmed it)")
    wait_answered(follow_logs, message_id)
    assert (teamctl.workdir / "out.txt").read_text() == "hello\n"
    [settled] = teamctl.json("approvals", "--all")["approvals"]
    assert (settled["id"], settled["state"]) == (row["id"], "approved")


def test_a_double_tap_applies_once_and_approve_then_deny_is_a_conflict(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """The same button twice: "already decided: approved", nothing applied twice; Deny after
    Approve: "conflict: already approved"."""
    operator = setup_notify(teamctl, ntfy)
    launch_notifying(teamctl, fake_member("lead", permissions="ask"))
    message_id = teamctl.run("send", "lead", "WRITE out.txt hello").stdout.strip()
    next_request(teamctl, follow_logs)
    message = pushed(ntfy, operator["topic"], "lead asks: Write")
    tap(message, "Approve")
    tap(message, "Approve")
    receipt(ntfy, operator["topic"], "applied: approved")
    receipt(ntfy, operator["topic"], "already decided: approved")
    tap(message, "Deny")
    receipt(ntfy, operator["topic"], "conflict: already approved")
    wait_answered(follow_logs, message_id)
    [settled] = teamctl.json("approvals", "--all")["approvals"]
    assert settled["state"] == "approved"


def refused_counts(follow_logs: LogFollower, total: int) -> dict[str, int]:
    """The ``notify_posts_refused`` counts by cause, summed once they reach ``total``."""
    counts: dict[str, int] = {}

    def add(event: dict[str, Any]) -> bool:
        if event["event"] == "notify_posts_refused":
            for cause, n in event["by_cause"].items():
                counts[cause] = counts.get(cause, 0) + n
        return sum(counts.values()) >= total

    follow_logs.wait_for(add)
    return counts


def test_an_expired_or_forged_token_is_refused_applies_nothing_and_is_not_answered(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """Each is counted by cause in a ``notify_posts_refused`` event; none is answered with
    a push (anyone who saw the response topic could flood the phone that way)."""
    operator = setup_notify(teamctl, ntfy)
    launch_notifying(teamctl, fake_member("lead", permissions="ask"))
    teamctl.run("send", "lead", "WRITE out.txt hello")
    row = next_request(teamctl, follow_logs)
    url = f"{ntfy.url}/{operator['response_topic']}"
    item = f"{TEAM}/{row['id']}"
    expired = Signer(bytes.fromhex(operator["key"])).sign(item, "approve", 1000.0)
    forged = Signer(b"\x00" * 32).sign(item, "approve", 4102444800.0)
    for token in (expired, forged, "approve " + row["id"]):
        httpx.post(url, content=token.encode(), timeout=10).raise_for_status()
    assert refused_counts(follow_logs, 3) == {"expired": 1, "bad_signature": 1,
                                              "not_an_action": 1}
    pushed(ntfy, operator["topic"], "lead asks: Write")
    [only] = ntfy.messages(operator["topic"])  # the request's notification, and no answer
    assert "lead asks: Write" in only["title"]
    [waiting] = teamctl.json("approvals")["approvals"]
    assert waiting["state"] == "pending", "nothing was applied"
    assert not (teamctl.workdir / "out.txt").exists()
    assert teamctl.run("deny", row["id"]).returncode == 0


def _flood(operator: dict[str, Any], item: str) -> list[str]:
    """1,000 posts anyone who saw the response topic can send: junk, forged, expired and
    another team's tokens (400, 300, 200, 100)."""
    ours, forger = Signer(bytes.fromhex(operator["key"])), Signer(b"\x00" * 32)
    posts = [f"approve {item} please #{i}" for i in range(400)]
    posts += [forger.sign(item, "approve", 4102444800.0) for _ in range(300)]
    posts += [ours.sign(item, "approve", 1000.0) for _ in range(200)]
    posts += [ours.sign("other/apv_x", "approve", 4102444800.0) for _ in range(100)]
    return posts


def test_a_flood_of_refused_posts_pushes_nothing_while_a_real_approval_still_arrives(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """Issue 44 item 10: every post to the response topic that was not a teamctl action was
    answered with a push (200 junk posts: 200 buzzes, outside max_per_minute). Now 1,000
    junk, forged, expired and other-team posts and 20 replays of a real Approve, with that
    Approve tapped in the middle: the approval is applied and its receipt arrives; the
    publish topic gets the request, the receipt and at most one "already decided" — within
    max_per_minute; every refused post is counted by cause; the daemon answers."""
    operator = setup_notify(teamctl, ntfy)
    topic, url = operator["topic"], f"{ntfy.url}/{operator['response_topic']}"
    launch_notifying(teamctl, fake_member("lead", permissions="ask"), max_per_minute=5)
    message_id = teamctl.run("send", "lead", "WRITE out.txt hello").stdout.strip()
    row = next_request(teamctl, follow_logs)
    message = pushed(ntfy, topic, "lead asks: Write")
    flood = _flood(operator, f"{TEAM}/{row['id']}")
    with httpx.Client(timeout=10) as phone:
        for post in flood[:500]:
            phone.post(url, content=post.encode()).raise_for_status()
        approve = tap(message, "Approve")
        for post in flood[500:] + [approve] * 20:
            phone.post(url, content=post.encode()).raise_for_status()
    receipt(ntfy, topic, "applied: approved (the runtime confirmed it)")
    wait_answered(follow_logs, message_id)
    assert (teamctl.workdir / "out.txt").read_text() == "hello\n"
    assert refused_counts(follow_logs, 1020) == {
        "not_an_action": 400, "bad_signature": 300, "expired": 200, "other_team": 100,
        "replay": 20}
    assert teamctl.run("status").returncode == 0, "the daemon is up"
    titles = [m["title"] for m in ntfy.messages(topic)]  # 3 at most: inside the window of 5
    assert titles[:2] == [message["title"],
                          "teamctl: applied: approved (the runtime confirmed it)"]
    assert len(titles) <= 3, f"at most one answer to the 20 replays: {titles}"
    assert all("already decided" in t or "used already" in t for t in titles[2:]), titles


def test_a_replayed_nonce_is_refused_after_a_daemon_restart(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """The used nonces are journaled (the journal's notify_used_nonces, migration 15): the
    same token posted again after the daemon restarted is refused, and no notify.db is
    made beside the journal."""
    operator = setup_notify(teamctl, ntfy)
    path = launch_notifying(teamctl, fake_member("lead", permissions="ask"))
    teamctl.run("send", "lead", "WRITE out.txt hello")
    next_request(teamctl, follow_logs)
    message = pushed(ntfy, operator["topic"], "lead asks: Write")
    body = tap(message, "Deny")
    receipt(ntfy, operator["topic"], "applied: denied")
    assert teamctl.run("stop").returncode == 0
    assert teamctl.run("launch", str(path)).returncode == 0
    nth_event(follow_logs, "notify_subscribed", 2)
    httpx.post(message["actions"][0]["url"], content=body.encode(), timeout=10)
    receipt(ntfy, operator["topic"], "already decided: denied")
    assert refused_counts(follow_logs, 1) == {"replay": 1}
    assert not (teamctl.home / "notify.db").exists()


def test_the_server_down_loses_nothing_and_publishes_on_recovery(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """ntfy down while a request arrives: the daemon stays up, retries with backoff, and
    publishes it when the server answers again; the tap then applies it."""
    operator = setup_notify(teamctl, ntfy)
    launch_notifying(teamctl, fake_member("lead", permissions="ask"))
    follow_logs.wait_for(lambda e: e["event"] == "notify_subscribed")
    ntfy.stop()
    message_id = teamctl.run("send", "lead", "WRITE out.txt hello").stdout.strip()
    next_request(teamctl, follow_logs)
    follow_logs.wait_for(lambda e: e["event"] == "notify_publish_failed")
    assert teamctl.run("status").returncode == 0, "the daemon is up"
    ntfy.start()
    message = pushed(ntfy, operator["topic"], "lead asks: Write")
    follow_logs.wait_for(lambda e: e["event"] == "notify_subscribed"
                         and e.get("down_for") is not None)
    tap(message, "Approve")
    receipt(ntfy, operator["topic"], "applied: approved")
    wait_answered(follow_logs, message_id)
    assert (teamctl.workdir / "out.txt").exists()


def test_notify_test_sends_each_kind_and_makes_the_round_trip(
        teamctl: Teamctl, ntfy: FakeNtfy) -> None:
    operator = setup_notify(teamctl, ntfy)
    launch_notifying(teamctl, fake_member("lead"))
    done = teamctl.json("notify", "test", "--timeout", "20")
    NotifyTestDoc.model_validate(done)  # docs/json.md's notify-test
    assert [c["what"] for c in done["checks"]] == [
        "approval", "question", "fatal", "budget", "review", "integrate", "quota",
        "round trip"]
    assert all(c["ok"] for c in done["checks"]), done
    titles = [m.get("title", "") for m in ntfy.messages(operator["topic"])]
    assert sum("[test]" in t for t in titles) == 7 and "teamctl: applied: test" in titles


def test_a_question_is_answered_through_the_response_topic(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """With include_text = true the question's text is published; the answer token, a space
    and the text posted to the response topic answer it as `teamctl answer` does."""
    operator = setup_notify(teamctl, ntfy)
    launch_notifying(teamctl, fake_member("lead", permissions="ask"), include_text=True)
    message_id = teamctl.run("send", "lead", "ASK which colour?").stdout.strip()
    next_request(teamctl, follow_logs)
    message = pushed(ntfy, operator["topic"], "lead asks a question")
    assert "which colour?" in message["message"]
    token = message["message"].split("response topic: ")[1].split()[0]
    httpx.post(f"{ntfy.url}/{operator['response_topic']}", content=f"{token} blue".encode(),
               timeout=10).raise_for_status()
    receipt(ntfy, operator["topic"], "applied: answered")
    reply = reply_to(teamctl, follow_logs, "lead", message_id)
    assert 'answer: {"which colour?": "blue"}' in reply


LIVE_VIEW = "http://127.0.0.1:8787"
SECRET = "sk-ant-api03-" + "Q" * 40  # a key a member's stderr leaks: never published
OPERATOR_REVIEWS = '\n[board]\nreview_by = "operator"\n'


def lasting_team(teamctl: Teamctl) -> list[dict[str, Any]]:
    """A member that fails to start (fatal past max_restarts = 0, a key in its stderr), one
    with a budget of two turns, and one that completes the tasks it is given."""
    return [fake_member("lead", max_restarts=0, env={"FAKE_CLAUDE_EXIT_AT_START": "1",
                                                      "FAKE_CLAUDE_STDERR": f"key={SECRET}"}),
            fake_member("rev", budget_usd=0.02), fake_member("dev")]


def hold_rev(teamctl: Teamctl, follow_logs: LogFollower) -> None:
    for text in ("one", "two"):  # 0.01 each: the second reaches the budget
        assert teamctl.run("send", "rev", text, "--wait").returncode == 0
    teamctl.run("send", "rev", "three")
    follow_logs.wait_for(lambda e: e["event"] == "member_held" and e.get("hold") == "budget")


def to_review(teamctl: Teamctl, title: str) -> int:
    """A task ``dev`` completes: in review, waiting on the operator (review_by)."""
    task = int(teamctl.run("task", "add", title).stdout.strip().lstrip("T"))
    assert teamctl.run("task", "assign", f"T{task}", "dev").returncode == 0
    args = json.dumps({"id": f"T{task}", "summary": "done, tests pass"})
    done = teamctl.run("send", "dev", f"MCP task_complete {args}", "--wait")
    assert done.returncode == 0 and "mcp: " in done.stdout, done.stdout + done.stderr
    assert teamctl.json("task", "show", f"T{task}")["task"]["state"] == "review"
    return task


def count(ntfy: FakeNtfy, topic: str, needle: str) -> int:
    return sum(needle in m.get("title", "") for m in ntfy.messages(topic))


def assert_alert_only(message: dict[str, Any]) -> None:
    """A notification that cannot be answered from the phone: no Approve/Deny, the link to
    the live view (its click and its one "Open" action), nothing secret."""
    assert message["click"] == LIVE_VIEW
    assert message["actions"] == [{"action": "view", "label": "Open", "url": LIVE_VIEW}]
    assert SECRET not in json.dumps(message)


def test_a_fatal_member_a_budget_hold_and_a_review_are_each_published_once(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """Through a real daemon: a member the supervisor gave up on (its error redacted, what to
    run, no buttons), a member held by its budget (what to run, no buttons) and a task
    waiting for the operator's review (Approve/Deny: the tap settles it) are each published
    once, with the live view's link — later passes (a later item's) send none again."""
    operator = setup_notify(teamctl, ntfy)
    topic = operator["topic"]
    launch_notifying(teamctl, *lasting_team(teamctl), board=OPERATOR_REVIEWS, check=False,
                     live_view_url=LIVE_VIEW)
    fatal = pushed(ntfy, topic, "lead stopped (fatal)")
    assert fatal["message"].startswith(f"{TEAM}/lead: ")
    assert "'teamctl restart lead' once fixed" in fatal["message"]
    assert "did not start" in fatal["message"] and "[REDACTED]" in fatal["message"]
    assert_alert_only(fatal)
    hold_rev(teamctl, follow_logs)
    held = pushed(ntfy, topic, "rev is paused: budget")
    assert "budget reached: member 'rev' spent $0.0200 of $0.02" in held["message"]
    assert "'teamctl budget rev --add USD'" in held["message"]
    assert_alert_only(held)
    first = to_review(teamctl, "add the session table")
    review = pushed(ntfy, topic, f"T{first} waits for your review")
    assert f"T{first} add the session table (by dev)" in review["message"]
    assert "done, tests pass" not in review["message"], "a summary only with include_text"
    assert review["click"] == LIVE_VIEW
    assert [a["label"] for a in review["actions"]] == ["Approve", "Deny", "Open"]
    tap(review, "Approve")
    receipt(ntfy, topic, "applied: approved (done)")
    assert teamctl.json("task", "show", f"T{first}")["task"]["state"] == "done"
    second = to_review(teamctl, "wire the form")  # a later pass: nothing earlier again
    pushed(ntfy, topic, f"T{second} waits for your review")
    assert [count(ntfy, topic, n) for n in ("lead stopped", "rev is paused",
                                            f"T{first} waits")] == [1, 1, 1]


def test_after_a_daemon_restart_what_still_waits_is_published_again_once(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """The lasting kinds outlive the daemon: after a restart the fatal member (fatal again),
    the budget hold and the task still in review are published again, each once; the task
    reviewed before the restart is not."""
    operator = setup_notify(teamctl, ntfy)
    topic = operator["topic"]
    path = launch_notifying(teamctl, *lasting_team(teamctl), board=OPERATOR_REVIEWS,
                            check=False, live_view_url=LIVE_VIEW)
    pushed(ntfy, topic, "lead stopped (fatal)")
    hold_rev(teamctl, follow_logs)
    pushed(ntfy, topic, "rev is paused: budget")
    settled, waiting = to_review(teamctl, "settled before"), to_review(teamctl, "still waits")
    pushed(ntfy, topic, f"T{waiting} waits for your review")
    assert teamctl.run("task", "review", f"T{settled}", "--approve").returncode == 0
    assert teamctl.run("stop").returncode == 0
    teamctl.run("launch", str(path), "--timeout", "30")
    for needle in ("lead stopped (fatal)", "rev is paused: budget",
                   f"T{waiting} waits for your review"):
        ntfy.wait_for(topic, lambda ms, n=needle: sum(n in m.get("title", "") for m in ms) >= 2)
    later = to_review(teamctl, "after the restart")  # a later pass: nothing again
    pushed(ntfy, topic, f"T{later} waits for your review")
    assert [count(ntfy, topic, n) for n in ("lead stopped", "rev is paused", f"T{waiting} ",
                                            f"T{settled} ")] == [2, 2, 2, 1]


def test_after_a_daemon_restart_the_continued_turns_new_request_is_published_and_applied(
        teamctl: Teamctl, follow_logs: LogFollower, ntfy: FakeNtfy) -> None:
    """A request pending at a restart expires (its old button answers "expired"); the cut
    turn goes on and asks again: that new request is published with its own buttons, and
    a tap on them applies it (the file is written)."""
    operator = setup_notify(teamctl, ntfy)
    topic = operator["topic"]
    path = launch_notifying(teamctl, fake_member(  # a model that redoes its cut steps
        "lead", permissions="ask", env={"FAKE_CLAUDE_REDO_ON_CONTINUE": "1"}))
    message_id = teamctl.run("send", "lead", "WRITE out.txt hello").stdout.strip()
    first = next_request(teamctl, follow_logs)
    old = pushed(ntfy, topic, "lead asks: Write")
    assert teamctl.run("stop").returncode == 0
    assert teamctl.run("launch", str(path)).returncode == 0
    again = next_request(teamctl, follow_logs, not_id=first["id"])
    ntfy.wait_for(topic, lambda ms: sum("lead asks: Write" in m.get("title", "")
                                        for m in ms) == 2)
    new = [m for m in ntfy.messages(topic) if "lead asks: Write" in m.get("title", "")][-1]
    assert new["actions"] != old["actions"], "the new request's own tokens"
    tap(old, "Approve")
    receipt(ntfy, topic, "teamctl: expired")
    tap(new, "Approve")
    receipt(ntfy, topic, "applied: approved (the runtime confirmed it)")
    wait_answered(follow_logs, message_id)
    assert (teamctl.workdir / "out.txt").read_text() == "hello\n"
    states = {r["id"]: r["state"] for r in teamctl.json("approvals", "--all")["approvals"]}
    assert (states[first["id"]], states[again["id"]]) == ("expired", "approved")
