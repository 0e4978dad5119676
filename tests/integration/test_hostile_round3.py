"""Hostile input on what issues 25-27 added: the approvals paging and kept-rule methods, the
approve preview, the strict budget call, and the new team-file keys — each refused typed, the
daemon up, and a message queued behind a busy turn answered."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.conftest import fake_member

if TYPE_CHECKING:
    from tests.conftest import LogFollower, Teamctl


def test_hostile_calls_on_the_new_socket_methods_are_refused_and_nothing_is_lost(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))) \
        .returncode == 0
    gate = teamctl.workdir / "gate"
    teamctl.run("send", "lead", f"GATE {gate}")
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent")
    queued = teamctl.run("send", "lead", "kept through it all").stdout.strip()
    apv = "apv_" + "A" * 26
    for method, params in (
            ("approvals", {"limit": 0}), ("approvals", {"limit": 10**6}),
            ("approvals", {"offset": -1}), ("approvals", {"offset": 2**80}),
            ("approvals", {"limit": "all"}), ("approvals", {"offset": 1.5}),
            ("approval_rules", {"member": "../lead"}), ("approval_rules", {"all": "maybe"}),
            ("approval_rules", {"member": ["lead"]}),
            ("revoke_rule", {"rule": ""}), ("revoke_rule", {"rule": "W" * 10_000}),
            ("revoke_rule", {"rule": None}), ("revoke_rule", {"member": "-x", "rule": "Write"}),
            ("approve", {"id": apv, "preview": "maybe"}),
            ("approve", {"id": apv, "always": True, "rule": "x" * 5000}),
            ("approve", {"id": "apv_../../x"}),
            ("budget", {"member": "lead", "usd": "5"}), ("budget", {"member": "lead",
                                                                    "usd": True}),
            ("budget", {"member": "lead", "tokens": 2**70})):
        answer = teamctl.rpc(method, params)
        assert answer["error"]["code"] == "usage_error", (method, params, answer)
    unknown = teamctl.rpc("revoke_rule", {"rule": "Write(docs/**)"})  # nothing kept: no-op
    assert unknown.get("error", {}).get("code") != "internal_error", unknown
    assert teamctl.run("status").returncode == 0, "the daemon is up"
    gate.touch()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == queued)
    states = {m["id"]: m["state"] for m in teamctl.json("history", "lead")["messages"]}
    assert states[queued] == "answered", "the queued message was not lost"


@pytest.mark.parametrize(("key", "value"), [
    ("interrupt_grace", -1.0), ("interrupt_grace", "soon"), ("liveness_deadline", 0),
    ("liveness_deadline", float("inf")), ("recycle_check_interval", -5.0),
    ("recycle_check_interval", 1e9), ("liveness_interval", "fast")])
def test_hostile_values_of_the_new_member_keys_are_refused_naming_the_key(
        teamctl: Teamctl, key: str, value: object) -> None:
    team = teamctl.write_team("web", [fake_member("lead", **{key: value})])
    done = teamctl.run("launch", str(team))
    assert done.returncode == 2, done.stderr
    assert f"members[0].{key}" in done.stderr
    assert teamctl.run("status").returncode == 4, "nothing was started for it"
