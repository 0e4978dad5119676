"""Approvals rules, paging and follow with a real daemon and the fake Claude taught to ask
(issues 25 #12-13, 26 #3 and #7): each test is named after the failure it guards against."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from tests.support.asking import launch, next_request, wait_answered
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl

TEAM = "web"


def _new_request(teamctl: Teamctl, follow_logs: LogFollower, seen: set[str]) -> dict[str, Any]:
    """The next request journaled that is not in ``seen`` (which it joins)."""
    event = follow_logs.wait_for(lambda e: e["event"] == "approval_requested"
                                 and e["approval_id"] not in seen, timeout=60)
    seen.add(event["approval_id"])
    [row] = [r for r in teamctl.json("approvals")["approvals"]
             if r["id"] == event["approval_id"]]
    return row


def test_an_allow_glob_no_longer_approves_a_write_that_climbs_out_with_dot_dot(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """``Write(*/rules/*)`` approved ``rules/../escaped.txt``: the path is resolved first, so
    the operator is asked — and a write inside ``rules/`` is still approved by the rule."""
    (teamctl.workdir / "rules").mkdir()
    launch(teamctl, TEAM, fake_member("lead", permissions="ask", allow=["Write(rules/*)",
                                                                         "Write(*/rules/*)"]))
    inside = teamctl.run("send", "lead", "WRITE rules/ok.txt fine", "--wait")
    assert inside.returncode == 0 and "wrote ok.txt" in inside.stdout, "no operator needed"
    message_id = teamctl.run("send", "lead", "WRITE rules/../escaped.txt out").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert row["state"] == "pending" and "escaped.txt" in row["summary"]
    assert not (teamctl.workdir / "escaped.txt").exists()
    assert teamctl.run("deny", row["id"]).returncode == 0
    wait_answered(follow_logs, message_id)
    assert not (teamctl.workdir / "escaped.txt").exists()


def test_always_no_longer_keeps_a_bare_tool_rule_that_approves_outside_the_worktree(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """``approve --always`` on ``docs/notes.md`` shows and keeps ``Write(docs/**)``: the next
    write under docs/ needs no operator, one outside the worktree is asked; the rule is listed
    and, once revoked, approves nothing."""
    (teamctl.workdir / "docs").mkdir()
    launch(teamctl, TEAM, fake_member("lead", permissions="ask"))
    seen: set[str] = set()
    first = teamctl.run("send", "lead", "WRITE docs/notes.md one").stdout.strip()
    row = _new_request(teamctl, follow_logs, seen)
    done = teamctl.run("approve", "--always", row["id"], input="")
    assert done.returncode == 0, done.stderr
    shown, *rest = done.stdout.splitlines()
    assert shown == "will approve Write under docs/ in lead's worktree: rule Write(docs/**)"
    assert any("rule kept for web/lead: Write(docs/**)" in line for line in rest)
    wait_answered(follow_logs, first)
    assert teamctl.run("restart", "lead").returncode == 0  # the CLI's session rule is gone
    again = teamctl.run("send", "lead", "WRITE docs/guide/two.md two", "--wait")
    assert again.returncode == 0 and "wrote two.md" in again.stdout, "kept rule, no operator"

    outside = teamctl.run("send", "lead", "WRITE ../outside.txt x").stdout.strip()
    asked = _new_request(teamctl, follow_logs, seen)
    assert asked["summary"].startswith(f"{teamctl.workdir}/../outside.txt"), "asked, not ruled"
    assert teamctl.run("deny", asked["id"]).returncode == 0
    wait_answered(follow_logs, outside)

    [kept] = teamctl.json("approvals", "--rules")["rules"]
    assert (kept["member"], kept["rule"], kept["approval_id"]) == ("lead", "Write(docs/**)",
                                                                   row["id"])
    listed = teamctl.run("approvals", "--rules")
    assert "web/lead  Write(docs/**)  kept: will approve Write under docs/" in listed.stdout
    unknown = teamctl.run("approvals", "--revoke", "Write(src/**)")
    assert unknown.returncode == 1 and "no kept rule named" in unknown.stderr
    [take_back] = [line.split("; '", 1)[1].split("' to take it back")[0] for line in rest
                   if "to take it back" in line]  # the command it printed, run as printed
    assert shlex.split(take_back)[0] == "teamctl"
    assert teamctl.run(*shlex.split(take_back)[1:]).returncode == 0
    assert teamctl.json("approvals", "--rules")["rules"] == []
    third = teamctl.run("send", "lead", "WRITE docs/three.md 3").stdout.strip()
    asked_again = _new_request(teamctl, follow_logs, seen)
    assert asked_again["summary"].startswith(str(teamctl.workdir / "docs" / "three.md"))
    assert teamctl.run("approve", asked_again["id"]).returncode == 0
    wait_answered(follow_logs, third)


def test_approvals_no_longer_hides_rows_beyond_its_page_without_saying_so(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, fake_member("lead", permissions="ask"),
           fake_member("dev", permissions="ask"))
    seen: set[str] = set()
    teamctl.run("send", "lead", "WRITE a.txt 1")
    _new_request(teamctl, follow_logs, seen)
    teamctl.run("send", "dev", "WRITE b.txt 2")
    _new_request(teamctl, follow_logs, seen)
    page = teamctl.run("approvals", "--limit", "1")
    assert page.stdout.splitlines()[-1] == \
        "showing 1 of 2 (rows 1-1; --offset 1 for the next)"
    rest = teamctl.json("approvals", "--limit", "1", "--offset", "1")
    assert rest["total"] == 2 and [r["member"] for r in rest["approvals"]] == ["dev"]
    assert "showing" not in teamctl.run("approvals").stdout, "all of them: nothing to say"


def test_follow_no_longer_replays_the_settled_history_first(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """``approvals -f`` prints what waits, then new requests — never the settled rows."""
    launch(teamctl, TEAM, fake_member("lead", permissions="ask"))
    first = teamctl.run("send", "lead", "WRITE old.txt 1").stdout.strip()
    settled = next_request(teamctl, follow_logs)
    assert teamctl.run("deny", settled["id"]).returncode == 0
    wait_answered(follow_logs, first)
    follower = subprocess.Popen([sys.executable, "-m", "orchestrator", "approvals", "-f",
                                 "--json"], env=teamctl.env, stdout=subprocess.PIPE, text=True)
    try:
        teamctl.run("send", "lead", "WRITE new.txt 2")
        assert follower.stdout is not None
        row = json.loads(follower.stdout.readline())  # blocks until the daemon has one
        assert row["id"] != settled["id"], "the settled request was replayed"
        assert (row["state"], row["tool"]) == ("pending", "Write")
        assert row["summary"].startswith(str(teamctl.workdir / "new.txt"))
    finally:
        follower.terminate()
        follower.wait(timeout=10)
        if follower.stdout is not None:
            follower.stdout.close()
