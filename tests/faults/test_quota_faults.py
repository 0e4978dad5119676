"""A held account outlives its daemon (docs/costs.md, "Quota windows"): killed with kill -9
while its window is spent, the daemon starts again with the account held until the same
reset, its members make no request before it, and every held message is answered once."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tests.support.daemon import start_daemon
from tests.support.members import fake_member
from tests.support.processes import wait_pid_exit
from tests.support.quota import edit_window, statuses_after_refusal, window

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl


def _journaled(database: Path, account: str) -> float:
    """The reset the journal holds ``account`` until."""
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT until FROM quota_holds WHERE account = ?",
                         (account,)).fetchone()
    finally:
        db.close()
    assert row is not None, "the hold is not in the journal"
    return float(row[0])


def test_a_daemon_killed_while_an_account_is_held_keeps_it_held_until_the_same_reset(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    path = window(teamctl.workdir / "login.json", limit=1, reset_after=10.0)
    members: list[dict[str, Any]] = [
        fake_member(n, env={"FAKE_CLAUDE_WINDOW": str(path)}) for n in ("a", "b", "c")]
    assert teamctl.run("launch", str(teamctl.write_team("web", members))).returncode == 0
    assert teamctl.run("send", "a", "first", "--wait").returncode == 0
    ids = [teamctl.run("send", "a", "second").stdout.strip()]
    held = follow_logs.wait_for(lambda e: e["event"] == "quota_held")
    ids += [teamctl.run("send", n, "while held").stdout.strip() for n in ("b", "c")]
    follow_logs.wait_for(lambda e: e["event"] == "quota_journaled")  # fsynced
    assert _journaled(teamctl.home / "state.db", "claude:operator") == held["until"]

    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)
    edit_window(path, limit=100)  # the next window allows the rest
    start_daemon(teamctl)
    again = follow_logs.wait_for(lambda e: e["event"] == "quota_held_again", timeout=60)
    assert (again["account"], again["until"]) == ("claude:operator", held["until"])
    for name in ("a", "b", "c"):
        follow_logs.wait_for(lambda e, n=name: e["event"] == "member_ready"
                             and e.get("member") == n and e["ts"] > again["ts"], timeout=60)

    released = follow_logs.wait_for(lambda e: e["event"] == "quota_released", timeout=60)
    at = datetime.fromisoformat(released["ts"].replace("Z", "+00:00")).timestamp()
    assert at >= held["until"], "not before the reset the runtime named"
    for message_id in ids:
        follow_logs.wait_for(lambda e, i=message_id: e["event"] == "delivery_answered"
                             and e.get("message_id") == i, timeout=60)
    answered = Counter(e["message_id"] for e in follow_logs.seen
                       if e["event"] == "delivery_answered")
    assert [answered[i] for i in ids] == [1, 1, 1]
    assert statuses_after_refusal(path) == ["allowed"] * 3, \
        "no request between the refusal and the reset, across the restart"
