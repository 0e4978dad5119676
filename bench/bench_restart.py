"""Issue 6 figure: restart delays observed against the restart policy's table.

A member that exits at once (crash loop) with backoff = [0.2, 3.2], max_restarts = 6: the policy
says 0.2, 0.4, 0.8, 1.6, 3.2, 3.2 s (±10 % jitter), then fatal. Observed = the next
``member_starting`` minus the ``member_restart_decision`` that scheduled it.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

from _harness import FAKE_CLAUDE, figure, home, teamctl

NOMINAL = [0.2, 0.4, 0.8, 1.6, 3.2, 3.2]


def _ts(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def main() -> None:
    with home() as env:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "loop.toml"
        team.write_text(
            '[team]\nname = "loop"\n\n[[members]]\nname = "bad"\nruntime = "claude"\n'
            f'command = "{FAKE_CLAUDE}"\nbackoff = [0.2, 3.2]\nmax_restarts = 6\n'
            'env = { FAKE_CLAUDE_EXIT_AT_START = "1" }\n')
        teamctl(env, "launch", str(team), "--no-wait")
        log = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            events = [json.loads(line) for line in log.read_text().splitlines()]
            if any(e.get("action") == "fatal" for e in events):
                break
            time.sleep(0.2)
    decisions = [e for e in events if e["event"] == "member_restart_decision"]
    starts = [e for e in events if e["event"] == "member_starting"]
    print("restart  nominal  policy(jittered)  observed   error")
    errors = []
    for n, (decision, nominal) in enumerate(zip(decisions, NOMINAL, strict=False), start=1):
        if decision["action"] != "restart":
            break
        observed = _ts(starts[n]) - _ts(decision)
        errors.append(observed - float(decision["delay"]))
        print(f"{n:>7}  {nominal:>7.1f}  {float(decision['delay']):>16.3f}  {observed:>8.3f}  "
              f"{errors[-1] * 1000:+6.1f} ms")
    print(f"then: {decisions[-1]['action']} ({decisions[-1]['reason']}); "
          f"starts={len(starts)} (1 + {len(starts) - 1} restarts)")
    figure("restart_delay_max_error_ms", max(abs(e) for e in errors) * 1000)


if __name__ == "__main__":
    main()
