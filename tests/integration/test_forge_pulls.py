"""Pull requests in a real daemon (docs/forge.md, "Pull requests"): a team file with
``[forge]`` launched against the local fake of GitHub's REST API over HTTP on localhost (no
real GitHub is reachable here) and a local bare repository as the remote; a fake Claude member
in a worktree writes, commits and completes its task through its MCP tools, the merge queue
lands it, and the forge does the rest — the pull request, its checks and reviews told to the
owner's stdin, the fix pushed to the same pull request, the merge that closes the issue. The
daemon is killed with SIGKILL and started again, its member asleep, GitHub's rate limit spent:
each told once, polling waits for the reset."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from tests.support.daemon import start_daemon
from tests.support.forge_daemon import BRANCH, TOKEN, github, landed_pull, launch, remote
from tests.support.git import git
from tests.support.land import complete, work
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:

    from tests.support.driver import LogFollower, Teamctl

OUTPUT = "E   assert form() == 'ok'\nFAILED test_form.py::test_it - AssertionError"


def _landed_commit(teamctl: Teamctl, follow_logs: LogFollower, after: int = 0
                   ) -> tuple[int, str]:
    """T1's next landing (a queue entry after ``after``): the entry and the owner's commit."""
    landed = follow_logs.wait_for(lambda e: e["event"] in ("task_landed", "task_not_landed")
                                  and e.get("task") == 1 and e["entry"] > after, timeout=60)
    assert landed["event"] == "task_landed", landed
    [entry] = [e for e in teamctl.json("queue")["recent"] if e["id"] == landed["entry"]]
    return int(entry["id"]), str(entry["commit"])


def _message(teamctl: Teamctl, follow_logs: LogFollower, kind: str) -> dict[str, Any]:
    """The one message a task notice of ``kind`` on T1 made, once dev answered it."""
    [notice] = [n for n in teamctl.json("task", "show", "T1")["notices"] if n["kind"] == kind]
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == notice["message_id"], timeout=60)
    [message] = [m for m in teamctl.json("history", "dev")["messages"]
                 if m["id"] == notice["message_id"]]
    assert notice["member"] == "dev"
    return dict(message)


def _told(teamctl: Teamctl, kind: str) -> Counter[str]:
    """The sources told to T1's owner (the log's ``task_owner_told``) of ``kind``."""
    return Counter(e["source"] for e in teamctl.log_events()
                   if e["event"] == "task_owner_told" and f":{kind}:" in e["source"])


def test_an_issue_lands_as_a_pull_request_its_failing_check_is_fixed_and_it_merges(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """Issue #1 → T1 → dev completes it → it lands → a draft pull request from teamctl/web/T1
    with ``Closes #1``; a failing check → dev's stdin carries its name, conclusion, summary and
    output, T1 is dev's again; dev fixes, completes, it lands again and is pushed to the same
    pull request; green and approved → merged (auto_merge) → the fake closes issue #1 and T1
    is done. ``write_back``: the issue was told T1 was claimed, then done with its pull
    request (once: the send-back to dev is not said)."""
    _, bare = remote(teamctl)
    with github(bare) as fake:
        launch(teamctl, fake, bare, auto_merge=True, write_back=True)
        pull = landed_pull(teamctl, follow_logs, fake, written_back=True)
        entry, first = _landed_commit(teamctl, follow_logs)
        assert pull["head"]["sha"] == first == git(bare, "rev-parse", BRANCH).strip()
        assert pull["draft"] is True and pull["base"]["ref"] == "main"
        assert pull["title"] == "#1: Fix the form"
        assert "Closes #1" in pull["body"] and "the form keeps its error" in pull["body"]

        fake.add_check_run(first, "tests", "failure", summary="1 failed", text=OUTPUT)
        follow_logs.wait_for(lambda e: e["event"] == "task_owner_told"
                             and ":check:" in e.get("source", ""))
        message = _message(teamctl, follow_logs, "forge_check")
        assert "the check 'tests' failed (failure) on pull request #2" in message["text"]
        assert "1 failed" in message["text"] and OUTPUT in message["text"]
        assert "FAILED test_form.py::test_it" in message["reply"], "dev's stdin carried it"
        shown = teamctl.json("task", "show", "T1")["task"]
        assert (shown["state"], shown["owner"]) == ("in_progress", "dev")

        work(teamctl, "dev", "form.txt", "the form, fixed")
        complete(teamctl, "dev", 1, "the form keeps its error, tested")
        _, fixed = _landed_commit(teamctl, follow_logs, entry)
        follow_logs.wait_for(lambda e: e["event"] == "forge_pushed"
                             and e.get("commit") == fixed[:12])
        again = fake.pull_of(BRANCH)
        assert again is not None and again["number"] == pull["number"]
        assert again["head"]["sha"] == fixed and len(fake.state.pulls) == 1

        fake.add_check_run(fixed, "tests", "success")
        fake.add_review(pull["number"], "APPROVED", "good")
        follow_logs.wait_for(lambda e: e["event"] == "forge_pull_merged" and e.get("task") == 1)
        status = teamctl.json("status")["teams"][0]["forge"]
        shown_status = teamctl.run("status").stdout
        page = teamctl.json("task", "show", "T1")
    assert fake.state.pulls[pull["number"]]["merged"] is True
    assert fake.state.issues[1]["state"] == "closed", "Closes #1 closed it"
    number = pull["number"]
    assert fake.comments_on(1) == [
        "teamctl: T1 was claimed by `dev`.",
        f"teamctl: T1 is done: pull request #{number}, {pull['html_url']}."]
    assert page["task"]["state"] == "done"
    assert [(p["task"], p["number"], p["state"]) for p in status["pulls"]] == [
        (1, pull["number"], "merged")]
    assert f"pull requests: T1 #{pull['number']} merged" in shown_status
    assert list(_told(teamctl, "check").values()) == [1], "the failure was told once"
    assert set(fake.state.auth_headers) == {f"Bearer {TOKEN}"}
    logs = "\n".join(json.dumps(e) for e in teamctl.log_events())
    assert TOKEN not in logs and TOKEN not in json.dumps(page)


def _asleep(teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """dev idle past ``pause_after`` after its last answer: asleep, its process gone."""
    last = teamctl.json("history", "dev")["messages"][-1]["id"]
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == last, timeout=60)
    follow_logs.wait_after(lambda e: e["event"] == "delivery_answered"
                           and e.get("message_id") == last,
                           lambda e: e["event"] == "member_asleep" and e.get("member") == "dev")


def test_a_change_request_reaches_the_sleeping_owner_once_across_a_kill_9(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """T1's pull request open, dev asleep (``pause_after``): a ``CHANGES_REQUESTED`` review
    with two comments wakes dev with one message carrying both, each with its file and line;
    the daemon is killed with SIGKILL while dev's turn on it is held, and started again — the
    message is delivered again and answered once, and the next daemon's rounds, which see the
    same review, tell nothing again."""
    _, bare = remote(teamctl)
    gate = teamctl.workdir / "turns-go"  # dev's turns answer while it exists
    gate.touch()
    member = {"pause_after": 1.0, "env": {"FAKE_CLAUDE_TURN_GATE": str(gate)}}
    with github(bare) as fake:
        launch(teamctl, fake, bare, member=member)
        pull = landed_pull(teamctl, follow_logs, fake)
        _asleep(teamctl, follow_logs)
        gate.unlink()  # the review's turn is held: the daemon dies with it unanswered
        review = fake.add_review(pull["number"], "CHANGES_REQUESTED", "two things")
        fake.add_review_comment(pull["number"], review["id"], "form.py", 12,
                                "this drops the error")
        fake.add_review_comment(pull["number"], review["id"], "form.css", None,
                                "the rule is unused")
        told = follow_logs.wait_for(lambda e: e["event"] == "task_owner_told"
                                    and ":review:" in e.get("source", ""))
        [notice] = [n for n in teamctl.json("task", "show", "T1")["notices"]
                    if n["kind"] == "forge_review"]
        follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("woken")
                             and e["ts"] > told["ts"])
        follow_logs.wait_for(lambda e: e["event"] == "delivery_sent"
                             and e.get("message_id") == notice["message_id"])
        daemon = teamctl.daemon_pid()
        assert daemon is not None
        os.kill(daemon, signal.SIGKILL)
        assert wait_pid_exit(daemon, 10)

        asked = len(fake.state.requests)
        start_daemon(teamctl)
        gate.touch()
        message = _message(teamctl, follow_logs, "forge_review")
        # two rounds of the new daemon looked at the pull request's reviews: the first ended
        reviews = f"/repos/octo-org/web/pulls/{pull['number']}/reviews"
        fake.wait_request(lambda r: r[1] == reviews and r[2] in (200, 304), after=asked,
                          count=2)
        page = teamctl.json("task", "show", "T1")
        events = teamctl.log_events()
    assert "reviewer requested changes on pull request #2 of task T1" in message["text"]
    assert "two things" in message["text"]
    assert "form.py:12:\nthis drops the error" in message["text"]
    assert "form.css:\nthe rule is unused" in message["text"]
    assert "form.py:12:" in message["reply"] and "form.css:" in message["reply"]
    assert (message["state"], message["attempts"]) == ("answered", 2), "delivered again"
    answered = Counter(e["message_id"] for e in events if e["event"] == "delivery_answered")
    assert answered[notice["message_id"]] == 1
    assert list(_told(teamctl, "review").values()) == [1], "told once, in both daemons"
    assert [n["kind"] for n in page["notices"] if n["kind"].startswith("forge")] == [
        "forge_review"]
    assert [m for m in teamctl.json("history", "dev")["messages"]
            if "requested changes" in m["text"]] == [
        m for m in teamctl.json("history", "dev")["messages"] if m["id"] == message["id"]]


def test_the_rate_limit_spent_while_polling_a_pull_request_is_waited_out_shown_in_status(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """T1's pull request open; a check fails on it while one request is left of the window:
    the round polls the pull request with it and the answer says the window is spent until
    its reset a few seconds on — the client asks nothing more. ``status`` shows the error and
    until when; the loop asks nothing before the reset (the fake would refuse any request
    until then: no 403 in all), then the round runs again and the failure reaches dev."""
    _, bare = remote(teamctl)
    with github(bare) as fake:
        launch(teamctl, fake, bare)
        pull = landed_pull(teamctl, follow_logs, fake)
        head = pull["head"]["sha"]
        asked = len(fake.state.requests)
        reset = int(time.time()) + 8
        fake.spend_rate_limit(reset, renews=True, left=1)
        fake.add_check_run(head, "tests", "failure", summary="1 failed", text=OUTPUT)
        failed = follow_logs.wait_for(lambda e: e["event"] == "forge_failed"
                                      and e.get("code") == "forge_rate_limited")
        spent = fake.state.requests[asked:]
        waiting = teamctl.json("status")["teams"][0]["forge"]
        shown = teamctl.run("status").stdout
        follow_logs.wait_for(lambda e: e["event"] == "task_owner_told"
                             and ":check:" in e.get("source", ""), timeout=30)
        message = _message(teamctl, follow_logs, "forge_check")
        after = teamctl.json("status")["teams"][0]["forge"]
        answered = fake.state.requests[asked:]
    polled = (f"/repos/octo-org/web/pulls/{pull['number']}",
              f"/repos/octo-org/web/commits/{head}/check-runs")
    assert spent[-1][1:] in [(path, 200) for path in polled], (
        f"the window's last request was the pull request's polling, then none: {spent}")
    assert failed["until"] == reset
    assert waiting["waiting_until"] == reset and waiting["remaining"] == 0
    assert waiting["error"].startswith("forge_rate_limited: GitHub's rate limit is spent")
    assert "waiting for the rate limit's reset at " + time.strftime(
        "%H:%M:%S", time.localtime(reset)) in shown
    assert [r for r in answered if r[2] == 403] == [], "nothing asked before the reset"
    assert OUTPUT in message["text"] and list(_told(teamctl, "check").values()) == [1]
    assert after["error"] is None and after["waiting_until"] is None
    assert after["remaining"] is not None and after["remaining"] > 0
