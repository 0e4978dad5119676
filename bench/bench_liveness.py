"""Issue 26 item 9 figure: how long a frozen idle member goes unnoticed, with the default
settings (``liveness_interval`` 15 s, ``liveness_deadline`` 10 s).

An idle fake Claude is SIGSTOPped at a random moment of its probe cycle; noticed = the
``member_unresponsive`` event minus the SIGSTOP. Bound: interval + deadline (frozen just
after an answered probe); expected mean: interval / 2 + deadline. Then back = the new
process's ``member_ready`` minus the notice (the restart's backoff included: 1 s, doubling
while restarts come within 10 minutes).
Usage: ``bench_liveness.py [SAMPLES]`` (default 3; each takes ~10-25 s).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member. The member is frozen with SIGSTOP.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _harness import FAKE_CLAUDE, figure, home, teamctl

INTERVAL, DEADLINE = 15.0, 10.0  # MemberConfig's defaults (checked below)


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def _wait(log: Path, match: Any, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists():
            for line in log.read_text().splitlines():
                event = json.loads(line)
                if match(event):
                    return event  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise SystemExit("bench_liveness: no matching event within the deadline")


def main() -> None:
    from orchestrator.config import MemberConfig

    defaults = MemberConfig(name="m", runtime="claude")
    assert (defaults.liveness_interval, defaults.liveness_deadline) == (INTERVAL, DEADLINE)
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    noticed, back = [], []
    with home() as env:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "live.toml"
        team.write_text('[team]\nname = "live"\n\n[[members]]\nname = "lead"\n'
                        f'runtime = "claude"\ncommand = "{FAKE_CLAUDE}"\n')
        teamctl(env, "launch", str(team))
        log = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
        for epoch in range(1, samples + 1):
            ready = _wait(log, lambda e, n=epoch: e["event"] == "member_ready"
                          and e.get("epoch") == n)
            time.sleep(random.uniform(0, INTERVAL))  # a random moment of the probe cycle
            frozen_at = time.time()
            os.kill(int(ready["pid"]), signal.SIGSTOP)
            event = _wait(log, lambda e, n=epoch: e["event"] == "member_unresponsive"
                          and e.get("epoch") == n)
            noticed.append(_ts(event) - frozen_at)
            again = _wait(log, lambda e, n=epoch: e["event"] == "member_ready"
                          and e.get("epoch") == n + 1)
            back.append(_ts(again) - _ts(event))
            print(f"sample {epoch}: noticed after {noticed[-1]:6.2f} s, "
                  f"a new process ready {back[-1]:5.2f} s later", flush=True)
    print(f"bound: interval + deadline = {INTERVAL + DEADLINE:.1f} s; expected mean "
          f"{INTERVAL / 2 + DEADLINE:.1f} s (was: a 30 s interval and a max(5 s, interval) "
          "deadline, up to 60 s for a process that hangs; a message sent to it meanwhile "
          "waited for the 600 s turn timeout)")
    figure("liveness_notice_mean_s", sum(noticed) / len(noticed))
    figure("liveness_notice_max_s", max(noticed))
    figure("liveness_restart_ready_mean_s", sum(back) / len(back))


if __name__ == "__main__":
    main()
