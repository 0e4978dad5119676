"""Issue 29a figures: a member's start with and without ``sandbox = "process"`` (the fake Claude
on a real daemon: ``member_starting`` → ``member_ready`` in the daemon's log, median of 20
restarts each), and a turn's round trip (``send --wait``) inside the sandbox and outside it."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path

from _harness import FAKE_CLAUDE, REPO, figure, home, median, teamctl, timed_sends

sys.path.insert(0, str(REPO))

from orchestrator import client
from orchestrator.paths import Home
from tests.conftest import fakes_path

RUNS = 20


def _team(directory: Path) -> Path:
    lines = ["[team]", 'name = "bench"']
    for name, sandbox in (("plain", "none"), ("boxed", "process")):
        lines += ["", "[[members]]", f'name = "{name}"', 'runtime = "claude"',
                  'model = "claude-sonnet-4-5"', f'command = "{FAKE_CLAUDE}"',
                  f'sandbox = "{sandbox}"', f'sandbox_ro = ["{REPO / "fixtures"}"]']
    path = directory / "bench.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _starts(log: Path, member: str) -> list[float]:
    """Each launch's member_starting → member_ready (ms), from the daemon's log."""
    starting: dict[int, float] = {}
    found = []
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event.get("member") != member:
            continue
        at = datetime.fromisoformat(event["ts"]).timestamp()
        if event["event"] == "member_starting":
            starting[event["epoch"]] = at
        elif event["event"] == "member_ready" and event["epoch"] in starting:
            found.append((at - starting[event["epoch"]]) * 1000)
    return found


def _wait_ready(ctl: Home, member: str, epoch: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        doc = client.call(ctl, "status", {"team": "bench"})
        state = next(m for m in doc["teams"][0]["members"] if m["name"] == member)
        if state["epoch"] >= epoch and state["readiness"] == "ready":
            return
        time.sleep(0.02)
    raise SystemExit(f"{member} not ready again within 60 s")


def main() -> None:
    with home() as env:
        env["PATH"] = fakes_path(env.get("PATH", ""))  # the fake's python3, not a shim
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        teamctl(env, "launch", str(_team(Path(env["TEAMCTL_BENCH_DIR"]))))
        for member in ("plain", "boxed"):
            for run in range(RUNS):
                client.call(ctl, "restart", {"team": "bench", "member": member})
                _wait_ready(ctl, member, run + 2)
        log = ctl.logs / "teamctl.jsonl"
        plain, boxed = median(_starts(log, "plain")[1:]), median(_starts(log, "boxed")[1:])
        figure("member_start_ms_fake_claude", plain)
        figure("member_start_ms_fake_claude_sandboxed", boxed)
        figure("sandbox_start_overhead_ms", boxed - plain)
        turn_plain = median(timed_sends(ctl, "plain", RUNS))
        turn_boxed = median(timed_sends(ctl, "boxed", RUNS))
        figure("turn_ms_fake_claude", turn_plain)
        figure("turn_ms_fake_claude_sandboxed", turn_boxed)
        figure("sandbox_turn_overhead_ms", turn_boxed - turn_plain)


if __name__ == "__main__":
    main()
