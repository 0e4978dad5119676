"""Quota windows through the daemon (docs/costs.md, "Quota windows"), with the fake Claude and
Codex CLIs counting their requests against one shared window file (fixtures/window.py), as the
members of one login spend one provider window: the first refusal holds every member of the
account before it sends another request, all resume by themselves at the reset and every held
message is answered once; a warning past the reserve pauses the lower priority while the lead
goes on; a transient 429 holds nobody; a reset nobody named is probed by one member."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from tests.support.members import codex_member, fake_member
from tests.support.quota import edit_window, statuses_after_refusal, window

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl


def _claude(name: str, path: Path, **extra: Any) -> dict[str, Any]:
    env = {"FAKE_CLAUDE_WINDOW": str(path), **extra.pop("env", {})}
    return fake_member(name, env=env, **extra)


def _history(teamctl: Teamctl, member: str) -> list[dict[str, Any]]:
    return teamctl.rpc("history", {"team": None, "member": member, "limit": 50,
                                   "before": None})["result"]["messages"]


def _members(teamctl: Teamctl) -> dict[str, dict[str, Any]]:
    doc = teamctl.rpc("status", {"team": None})["result"]
    return {m["name"]: m for m in doc["teams"][0]["members"]}


def _answered_once(follow_logs: LogFollower, message_ids: list[str]) -> None:
    """Every message answered, each exactly once."""
    for message_id in message_ids:
        follow_logs.wait_for(lambda e, i=message_id: e["event"] == "delivery_answered"
                             and e.get("message_id") == i, timeout=60)
    answered = Counter(e["message_id"] for e in follow_logs.seen
                       if e["event"] == "delivery_answered")
    assert all(answered[i] == 1 for i in message_ids), answered


def test_after_the_first_refusal_no_member_of_the_login_sends_until_the_reset(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """Three members on the operator's one login: dev's request is refused while qa's and the
    lead's turns are in flight (held at their gates, their requests not yet made). Every one
    of them is held before it sends another request — the turns in flight are stopped, the
    messages sent meanwhile wait — and at the reset the window named all resume by
    themselves, each held message answered once."""
    path = window(teamctl.workdir / "login.json", limit=1, reset_after=3.0, window="five_hour")
    gates = {name: teamctl.workdir / f"gate-{name}" for name in ("dev", "qa", "lead")}
    team = teamctl.write_team("web", [_claude("lead", path, lead=True), _claude("dev", path),
                                      _claude("qa", path)])
    assert teamctl.run("launch", str(team)).returncode == 0
    account = {m["account"] for m in _members(teamctl).values()}
    assert account == {"claude:operator"}, "one login, one account"

    gates["dev"].touch()
    assert teamctl.run("send", "dev", f"GATE {gates['dev']}", "--wait").returncode == 0
    in_flight = {name: teamctl.run("send", name, f"GATE {gates[name]}").stdout.strip()
                 for name in ("qa", "lead")}
    for message_id in in_flight.values():
        follow_logs.wait_for(lambda e, i=message_id: e["event"] == "delivery_sent"
                             and e.get("message_id") == i)
    refused = teamctl.run("send", "dev", "second").stdout.strip()  # the window is spent
    held = follow_logs.wait_for(lambda e: e["event"] == "quota_held")
    assert held["account"] == "claude:operator" and held["named"]
    for name in ("qa", "lead"):  # stopped in flight, before their requests
        follow_logs.wait_for(lambda e, n=name: e["event"] == "account_stop"
                             and e.get("member") == n)
        follow_logs.wait_for(lambda e, i=in_flight[name]: e["event"] == "delivery_failed"
                             and e.get("message_id") == i)
    later = {name: teamctl.run("send", name, "while held") for name in ("qa", "lead")}
    for gate in gates.values():
        gate.touch()

    members = _members(teamctl)
    until = held["until"]
    for name, member in members.items():
        assert member["hold"] is not None and member["hold"].startswith(
            "held: claude:operator five-hour window until "), (name, member["hold"])
    assert all("held: claude:operator five-hour window until" in done.stderr
               for done in later.values()), later
    [shown] = teamctl.rpc("accounts", {"team": None})["result"]["accounts"]
    assert shown["held"]["until"] == until and shown["held"]["named"]
    assert [m["member"] for m in shown["members"]] == ["lead", "dev", "qa"], \
        "priority order: the lead first"
    text = teamctl.run("accounts").stdout.splitlines()
    assert text[0].startswith("claude:operator  five-hour window 100% used (rejected)"), text
    assert text[1].startswith("  held: five-hour until ") and "(in " in text[1], text
    assert text[2].startswith("  web/lead  priority 1  held: claude:operator"), text
    assert teamctl.run("accounts", "--team", "nope").returncode != 0

    edit_window(path, limit=100)  # the next window allows what the test sends
    released = follow_logs.wait_for(lambda e: e["event"] == "quota_released", timeout=30)
    assert released["members"] == ["web/lead", "web/dev", "web/qa"]
    ids = [refused, *in_flight.values(), *(done.stdout.strip() for done in later.values())]
    _answered_once(follow_logs, ids)
    assert statuses_after_refusal(path) == ["allowed"] * 5, \
        "no request reached the provider between the refusal and the reset"
    for name in ("dev", "qa", "lead"):
        assert all(m["state"] == "answered" and m["attempts"] == 1
                   for m in _history(teamctl, name)), "a hold spends no attempt"
    assert all(m["hold"] is None for m in _members(teamctl).values())


def test_a_warning_past_the_reserve_pauses_the_lower_priority_while_the_lead_goes_on(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """``quota_reserve = 0.5``: once the window reports half used, dev (priority 0) takes no
    teammate's message until the reset while the lead (priority 1) answers on; the
    operator's own message to dev still goes; at the reset dev's held message is answered."""
    path = window(teamctl.workdir / "login.json", limit=20, warn=0.5, reset_after=4.0)
    team = teamctl.write_team("web", [_claude("lead", path, lead=True), _claude("dev", path)],
                              quota_reserve=0.5)
    assert teamctl.run("launch", str(team)).returncode == 0
    edit_window(path, used=9)  # the next request is the tenth of twenty: a warning
    assert teamctl.run("send", "lead", "plan", "--wait").returncode == 0
    paused = follow_logs.wait_for(lambda e: e["event"] == "quota_reserve")
    assert paused["paused"] == ["web/dev"] and paused["used"] == 0.5

    hold = _members(teamctl)["dev"]["hold"]
    assert hold.startswith("paused: claude:operator five-hour window 50% used, the last 50% "
                           "kept for priority 1 until "), hold
    handed = json.dumps({"to": "dev", "text": "review this"})
    receipt = teamctl.run("send", "lead", f"MCP send_message {handed}", "--wait")
    assert receipt.returncode == 0 and "dev waits — paused: claude:operator five-hour window " \
        "55% used" in receipt.stdout, receipt.stdout  # its own request made 11 of 20
    for text in ("review", "approve"):  # the lead's turns go on
        done = teamctl.run("send", "lead", text, "--wait")
        assert done.returncode == 0 and "received: " + text in done.stdout, done.stderr
    [waiting] = _history(teamctl, "dev")
    assert (waiting["state"], waiting["attempts"]) == ("queued", 0), "dev took no new turn"
    own = teamctl.run("send", "dev", "from the operator", "--wait")
    assert own.returncode == 0 and "received: from the operator" in own.stdout, own.stderr

    follow_logs.wait_for(lambda e: e["event"] == "quota_reserve_over", timeout=30)
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == waiting["id"], timeout=30)
    assert not [e for e in follow_logs.seen if e["event"] == "quota_held"], "never refused"


def test_a_transient_429_is_retried_by_the_cli_and_holds_nobody(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    path = window(teamctl.workdir / "login.json", limit=100)
    team = teamctl.write_team("web", [
        _claude("dev", path, env={"FAKE_CLAUDE_TRANSIENT_429": "2"}),
        codex_member("cx", env={"FAKE_CODEX_WINDOW": str(path),
                                "FAKE_CODEX_TRANSIENT_429": "2"}),
        _claude("qa", path)])
    assert teamctl.run("launch", str(team)).returncode == 0
    for name in ("dev", "cx", "qa"):
        assert teamctl.run("send", name, "hello", "--wait").returncode == 0
    retries = [e for e in follow_logs.seen if e["event"] == "runtime_retry_notice"]
    follow_logs.wait_for(lambda e: e["event"] == "runtime_retry_notice" and e["member"] == "cx")
    assert len([e for e in follow_logs.seen if e["event"] == "runtime_retry_notice"
                and e["member"] == "dev"]) == 2, retries
    assert not [e for e in follow_logs.seen if e["event"] in ("quota_held", "member_held")]
    assert all(m["hold"] is None for m in _members(teamctl).values())
    shown = teamctl.rpc("accounts", {"team": None})["result"]["accounts"]
    assert {a["name"]: a["held"] for a in shown} == {"claude:operator": None,
                                                      "codex:operator": None}


def test_codex_members_of_one_login_are_held_together_and_resume_at_the_reset(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """Codex app-server: the refusal (account/rateLimits/updated at 100 %, then
    usageLimitExceeded) holds every member of ``codex:operator`` until the window's reset;
    messages sent meanwhile make no request, and all are answered once after it."""
    path = window(teamctl.workdir / "codex.json", limit=1, reset_after=3.0)
    env = {"FAKE_CODEX_WINDOW": str(path)}
    team = teamctl.write_team("web", [codex_member(n, env=env) for n in ("a", "b", "c")])
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "a", "first", "--wait").returncode == 0
    refused = teamctl.run("send", "b", "second").stdout.strip()
    held = follow_logs.wait_for(lambda e: e["event"] == "quota_held")
    assert held["account"] == "codex:operator" and held["window"] == "five_hour"
    waiting = [teamctl.run("send", n, "while held").stdout.strip() for n in ("a", "c")]
    assert statuses_after_refusal(path) == [], "nothing sent while the account is held"
    edit_window(path, limit=100)
    _answered_once(follow_logs, [refused, *waiting])
    assert statuses_after_refusal(path) == ["allowed"] * 3


def _count(follow_logs: LogFollower, event: str) -> int:
    return len([e for e in follow_logs.seen if e["event"] == event])


def test_a_reset_nobody_named_is_probed_by_one_member_not_all(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A refusal that names no reset holds the account ``TEAMCTL_QUOTA_PROBE_AFTER``, then one
    member with work tries it; the others wait for its answer. Refused again, it is held
    again: one request per probe, never one per member; answered, all go on."""
    teamctl.env["TEAMCTL_QUOTA_PROBE_AFTER"] = "1"
    path = window(teamctl.workdir / "login.json", limit=1, named=False, reset_after=3600)
    team = teamctl.write_team("web", [_claude(n, path) for n in ("a", "b", "c")])
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "a", "first", "--wait").returncode == 0
    ids = [teamctl.run("send", "a", "work").stdout.strip()]
    held = follow_logs.wait_for(lambda e: e["event"] == "quota_held")
    assert not held["named"], "no reset named: teamctl's own wait"
    ids += [teamctl.run("send", n, "work").stdout.strip() for n in ("b", "c")]
    follow_logs.wait_for(lambda e: e["event"] == "quota_held"
                         and _count(follow_logs, "quota_held") >= 3, timeout=30)
    refused = statuses_after_refusal(path).count("rejected")
    probes = _count(follow_logs, "quota_probe")
    assert 2 <= refused <= probes, "each probe is one member's one request"
    edit_window(path, resets_at=0, limit=100)  # the provider's window reset meanwhile
    released = follow_logs.wait_for(lambda e: e["event"] == "quota_released", timeout=30)
    assert released["why"].endswith(("reported it allowed", "turn was answered"))
    _answered_once(follow_logs, ids)
    assert all(m["hold"] is None for m in _members(teamctl).values())
