"""Issue 15 figures (fake claude members, a real daemon): the time from the runtime's
permission request to its row in `teamctl approvals` (the long poll that `approvals -f` uses
returns it), and from `approve` to the runtime's confirmation that it applied the answer
(median of 20 each).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member. The permission requests are the fake runtime's own."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from _harness import FAKE_CLAUDE, REPO, figure, home, median, percentile, teamctl

from orchestrator import client, protocol
from orchestrator.paths import Home

RUNS = 20


def main() -> None:
    with home() as env:
        trace = Path(env["TEAMCTL_BENCH_DIR"]) / "asked.trace"
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "ask.toml"
        team.write_text(
            '[team]\nname = "ask"\nworkdir = "' + env["TEAMCTL_BENCH_DIR"] + '"\n\n'
            '[[members]]\nname = "lead"\nruntime = "claude"\nmodel = "claude-sonnet-4-5"\n'
            f'command = "{FAKE_CLAUDE}"\npermissions = "ask"\n'
            f'env = {{ FAKE_CLAUDE_ASK_TRACE = "{trace}" }}\n')
        teamctl(env, "launch", str(team))
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        to_row, to_confirmed, cursor = [], [], 0
        for i in range(RUNS):
            sender = threading.Thread(target=client.call, args=(ctl, protocol.SEND, {
                "member": "lead", "text": f"WRITE f{i}.txt x", "wait": True, "timeout": 60.0}),
                kwargs={"timeout": 90})
            sender.start()
            doc = client.call(ctl, protocol.APPROVALS, {"after": cursor, "wait": 20.0}, timeout=30)
            seen = time.time()
            [row] = doc["approvals"]
            cursor = doc["cursor"]
            asked = float(trace.read_text().split()[-1])
            to_row.append((seen - asked) * 1000)
            start = time.time()
            decided = client.call(ctl, protocol.APPROVE, {"id": row["id"]}, timeout=30)
            assert decided["confirmed"], decided
            to_confirmed.append((decided["approval"]["confirmed_at"] - start) * 1000)
            sender.join()  # the turn ended: the next request is the next message's
    print(f"runtime's request -> its row in `approvals`: median {median(to_row):.1f} ms, "
          f"p95 {percentile(to_row, 95):.1f} ms ({RUNS} requests)")
    print(f"`approve` -> the runtime's confirmation: median {median(to_confirmed):.1f} ms, "
          f"p95 {percentile(to_confirmed, 95):.1f} ms")
    figure("approval_request_to_row_ms", median(to_row))
    figure("approval_approve_to_confirmed_ms", median(to_confirmed))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
