"""Issue 48 figures: quota windows shared by the members of one login (docs/costs.md, "Quota
windows"). Three fake Claude members (a real daemon) count their requests against one window
file (fixtures/window.py), as one login's members spend one provider window.

(1) Requests sent to the provider after its window was refused, beyond the refused one: each
cycle holds two members' turns in flight (at their gates, their requests not yet made), then a
third member's request is refused; the gates open — target 0. (2) Reset → first resumed
delivery: from the reset the refusal named to the first ``delivery_sent`` of the account's
members after it, median of 20 cycles (``RESET_MARGIN`` of it by design: a reset is a whole
second of the provider's clock). (3) The lead's turns answered during a reserve pause:
with ``quota_reserve = 0.5`` and the window past half used, the lead's messages answered while
the lower priority's teammate message waits.

Each drives the daemon as the operator does (the CLI over the socket); nothing calls as a
member."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _harness import FAKE_CLAUDE, REPO, figure, home, median, percentile, teamctl

from orchestrator.daemon.quota._service import RESET_MARGIN
from tests.support.quota import edit_window, requests, window

CYCLES = 20
RESET_AFTER = 1.0
LEAD_TURNS = 10


def _team(directory: Path, path: Path, **team: object) -> Path:
    lines = ["[team]", 'name = "quota"', f'workdir = "{directory}"',
             *(f"{k} = {json.dumps(v)}" for k, v in team.items())]
    for name in ("lead", "dev", "qa"):
        lines += ["", "[[members]]", f'name = "{name}"', 'runtime = "claude"',
                  'model = "claude-sonnet-4-5"', f'command = "{FAKE_CLAUDE}"',
                  f"lead = {'true' if name == 'lead' else 'false'}",
                  f'env = {{ FAKE_CLAUDE_WINDOW = "{path}" }}']
    file = directory / "quota.toml"
    file.write_text("\n".join(lines) + "\n")
    return file


def _events(env: dict[str, str]) -> list[dict[str, Any]]:
    log = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def _until_answered(env: dict[str, str], ids: list[str], deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        answered = {e.get("message_id") for e in _events(env)
                    if e["event"] == "delivery_answered"}
        if set(ids) <= answered:
            return
        time.sleep(0.05)  # a benchmark polls; tests wait on events
    raise SystemExit(f"not answered: {set(ids) - answered}")


def _until_event(env: dict[str, str], event: str, after: int, deadline: float = 30.0
                 ) -> dict[str, Any]:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        found = [e for e in _events(env)[after:] if e["event"] == event]
        if found:
            return found[0]
        time.sleep(0.02)  # a benchmark polls; tests wait on events
    raise SystemExit(f"no {event}")


def refusals() -> tuple[int, list[float]]:
    """(1) and (2): the requests beyond each cycle's refused one, and each reset → first
    resumed delivery (ms)."""
    beyond, resumed = 0, []
    with home() as env:
        directory = Path(env["TEAMCTL_BENCH_DIR"])
        path = window(directory / "login.json", limit=100, reset_after=RESET_AFTER)
        teamctl(env, "launch", str(_team(directory, path)))
        for cycle in range(CYCLES):
            edit_window(path, used=100, resets_at=None)  # spent: the next request is refused
            seen = len(_events(env))
            before = len(requests(path))
            gate = directory / f"gate-{cycle}"
            ids = [teamctl(env, "send", name, f"GATE {gate}").strip() for name in ("qa", "lead")]
            ids.append(teamctl(env, "send", "dev", f"cycle {cycle}").strip())
            held = _until_event(env, "quota_held", seen)
            gate.touch()
            _until_answered(env, ids)
            statuses = [r["status"] for r in requests(path)[before:]]
            beyond += statuses.count("rejected") - 1
            sent = [e for e in _events(env)[seen:] if e["event"] == "delivery_sent"
                    and _ts(e) >= held["until"]]
            resumed.append((_ts(sent[0]) - held["until"]) * 1000)
    return beyond, resumed


def reserve() -> tuple[int, int]:
    """(3): the lead's turns answered, and the lower priority's turns taken, during a reserve
    pause."""
    with home() as env:
        directory = Path(env["TEAMCTL_BENCH_DIR"])
        path = window(directory / "login.json", limit=100, warn=0.5, reset_after=600)
        teamctl(env, "launch", str(_team(directory, path, quota_reserve=0.5)))
        edit_window(path, used=49)
        teamctl(env, "send", "lead", "plan", "--wait")  # the 50th request: past the reserve
        handed = json.dumps({"to": "dev", "text": "review this"})
        teamctl(env, "send", "lead", f"MCP send_message {handed}", "--wait")
        answered = sum(
            1 for i in range(LEAD_TURNS)
            if "received" in teamctl(env, "send", "lead", f"turn {i}", "--wait"))
        dev = json.loads(teamctl(env, "history", "dev", "--json"))["messages"]
        taken = sum(1 for m in dev if m["state"] != "queued")
    return answered, taken


def main() -> None:
    beyond, resumed = refusals()
    print(f"requests after a refused window, beyond the refused one: {beyond} in {CYCLES} "
          "cycles (two members' turns in flight at each refusal, a third's refused)")
    after = [ms - RESET_MARGIN * 1000 for ms in resumed]
    print(f"reset → first resumed delivery: median {median(resumed):.1f} ms, p95 "
          f"{percentile(resumed, 95):.1f} ms, max {max(resumed):.1f} ms ({CYCLES} resets) — "
          f"RESET_MARGIN ({RESET_MARGIN * 1000:.0f} ms, by design) then median "
          f"{median(after):.1f} ms")
    figure("quota_requests_after_refusal", beyond)
    figure("quota_reset_to_delivery_ms", median(resumed))
    figure("quota_margin_to_delivery_ms", median(after))
    answered, taken = reserve()
    print(f"during a reserve pause: the lead answered {answered} of {LEAD_TURNS} turns; the "
          f"lower priority took {taken} turns")
    figure("quota_lead_turns_in_reserve", answered)
    figure("quota_paused_turns_in_reserve", taken)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
