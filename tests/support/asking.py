"""What the approvals tests share: launch a team, wait for the next request the daemon
journaled, wait for a message's answer — each on a log event, with a deadline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


def launch(teamctl: Teamctl, team: str, *members: dict[str, Any]) -> None:
    done = teamctl.run("launch", str(teamctl.write_team(team, list(members))))
    assert done.returncode == 0, done.stdout + done.stderr


def next_request(teamctl: Teamctl, follow_logs: LogFollower, *, not_id: str | None = None,
                 timeout: float = 60.0) -> dict[str, Any]:
    """The next request journaled (other than ``not_id``), as ``teamctl approvals`` lists it."""
    event = follow_logs.wait_for(lambda e: e["event"] == "approval_requested"
                                 and e["approval_id"] != not_id, timeout=timeout)
    rows = {r["id"]: r for r in teamctl.json("approvals")["approvals"]}
    return rows[event["approval_id"]]  # type: ignore[no-any-return]


def wait_answered(follow_logs: LogFollower, message_id: str, timeout: float = 60.0) -> None:
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=timeout)


def reply_to(teamctl: Teamctl, follow_logs: LogFollower, member: str, message_id: str) -> str:
    """The reply to ``message_id`` once it was answered."""
    wait_answered(follow_logs, message_id)
    [message] = [m for m in teamctl.json("history", member)["messages"]
                 if m["id"] == message_id]
    return str(message["reply"])
