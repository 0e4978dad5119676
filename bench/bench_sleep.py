"""Issue 47 figures: wake → the woken member's first event, median of 20 — a fake Claude member
and a real Claude Code member (against the local fake Anthropic API); and the memory of
everything teamctl started (the daemon and its process tree: every member's) for a team of
100 fake Claude members, without a cap and with ``max_running = 10``.

Each round waits until the member is asleep (``pause_after``: its process stopped, its session
kept), then sends it a message on the daemon's socket and waits for the reply. Measured from
the send (the wake) to the woken member's ``member_ready`` (its process up on its resumed
session, handshake done: its first event) and to the reply (``send --wait`` returned: the
first turn answered). Beside them, a turn to the same member awake, for the difference.

Members are driven as the operator drives them (requests on the daemon's socket); nothing
calls as a member.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _harness import FAKE_CLAUDE, REPO, figure, home, median, teamctl

ROUNDS = 20
TEAM_SIZE, CAP = 100, 10
CACHE = REPO / ".cache" / "e2e"


def _events(env: dict[str, str]) -> list[dict[str, Any]]:
    path = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def _until(env: dict[str, str], what: str, found: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found(_events(env))
        if value:
            return value
        time.sleep(0.01)  # a benchmark polls; tests wait on events
    raise SystemExit(f"no {what} within {timeout:g} s")


def _send(env: dict[str, str], text: str) -> None:
    from orchestrator import client, protocol
    from orchestrator.paths import Home

    result = client.call(Home(Path(env["TEAMCTL_HOME"])), protocol.SEND,
                         {"member": "m", "text": text, "wait": True, "timeout": 120.0},
                         timeout=150)
    assert result["state"] == "answered", result


def rounds(member: dict[str, Any], pause_after: float) -> tuple[list[float], list[float],
                                                                list[float]]:
    """``ROUNDS`` wakes of ``member``: (wake → ready, wake → reply, an awake turn) in ms."""
    from tests.support.driver import team_toml

    ready, reply, awake = [], [], []
    with home() as env:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "sleep.toml"
        member = {**member, "workdir": env["TEAMCTL_BENCH_DIR"]}
        team.write_text(team_toml("sleep", [member], pause_after=pause_after))
        teamctl(env, "launch", str(team))
        _send(env, "warm up")
        for i in range(ROUNDS):
            asleep = len([e for e in _events(env) if e["event"] == "member_asleep"])
            _until(env, "sleep", lambda events, n=asleep: len(
                [e for e in events if e["event"] == "member_asleep"]) > n)
            woken = len([e for e in _events(env) if e["event"] == "member_ready"])
            start = time.time()
            _send(env, f"wake {i}")
            reply.append((time.time() - start) * 1000)
            [event] = _until(env, "ready", lambda events, n=woken: [
                e for e in events if e["event"] == "member_ready"][n:n + 1])
            assert event.get("woken"), event
            ready.append((_ts(event) - start) * 1000)
            start = time.time()
            _send(env, f"awake {i}")  # before pause_after runs out: the same process
            awake.append((time.time() - start) * 1000)
    return ready, reply, awake


def hundred(limit: int | None) -> tuple[float, int]:
    """A team of ``TEAM_SIZE`` fake members launched (``max_running = limit``): the RSS of the
    daemon's process tree (MiB) and how many members have a process."""
    from orchestrator.processes import process_tree
    from tests.support.driver import team_toml

    with home() as env:
        work = Path(env["TEAMCTL_BENCH_DIR"])
        members = [{"name": f"m{i}", "runtime": "claude", "model": "claude-sonnet-4-5",
                    "command": str(FAKE_CLAUDE), "workdir": str(work)}
                   for i in range(TEAM_SIZE)]
        team = work / "big.toml"
        team.write_text(team_toml("big", members, **({} if limit is None
                                                      else {"max_running": limit})))
        teamctl(env, "launch", str(team), "--timeout", "600")
        daemon = int((Path(env["TEAMCTL_HOME"]) / "daemon.pid").read_text())
        tree = process_tree(daemon)
        assert tree is not None
        running = len([m for m in json.loads(teamctl(env, "status", "--json"))["teams"][0][
            "members"] if m["pid"]])
        return tree.rss_bytes / 2**20, running


def _report(name: str, what: str, samples: tuple[list[float], list[float], list[float]]
            ) -> None:
    ready, reply, awake = samples
    print(f"{what}: wake -> ready {median(ready):.0f} ms (max {max(ready):.0f}), wake -> reply "
          f"{median(reply):.0f} ms (max {max(reply):.0f}); awake turn {median(awake):.0f} ms "
          f"(medians of {ROUNDS})")
    figure(f"wake_ready_ms_{name}", median(ready))
    figure(f"wake_reply_ms_{name}", median(reply))
    figure(f"awake_reply_ms_{name}", median(awake))


def main() -> None:
    from tests.support.fake_anthropic import FakeAnthropic

    for limit in (None, CAP):
        rss, running = hundred(limit)
        print(f"{TEAM_SIZE} fake members, max_running = {limit or 'none'}: {running} running, "
              f"the daemon and its process tree {rss:.0f} MiB")
        figure(f"rss_{TEAM_SIZE}_members_mib_{'max_running_' + str(limit) if limit else 'no_cap'}",
               rss)
    from tests.support.real_members import CLAUDE_VERSION, claude_member, installed

    fake = {"name": "m", "runtime": "claude", "model": "claude-sonnet-4-5",
            "command": str(FAKE_CLAUDE)}
    _report("fake_claude", "fake Claude", rounds(fake, pause_after=0.3))
    claude = installed("TEAMCTL_E2E_CLAUDE", CACHE / "claude/node_modules/.bin/claude")
    with FakeAnthropic() as api:
        _report("claude", f"real Claude Code {CLAUDE_VERSION}",
                rounds(claude_member("m", claude, api), pause_after=2.0))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
