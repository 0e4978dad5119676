"""Issue 17 figures. (1) The overshoot of a budget crossed mid-turn: a fake Claude member
(real daemon) runs a long turn of priced model calls ($0.30 each at claude-sonnet-4-5's rate,
0.05 s apart); how far past the budget the cost went before the interrupt took effect, in
dollars and in model calls, for several budgets. (2) The accounting's per-turn overhead: the
ledger's in-turn readings (on the event loop) and its settle (one journal transaction), on a
real SQLite journal, median of 500 turns.

(1) drives its member as the operator does (send over the socket); (2) is measured in process.
Nothing calls as a member."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from _harness import FAKE_CLAUDE, REPO, figure, home, median, percentile, teamctl

BUDGETS = (0.5, 1.0, 2.0, 4.0)
STEP_USD = 0.30
TURNS = 500


def overshoot() -> list[float]:
    over = []
    for budget in BUDGETS:
        with home() as env:
            team = Path(env["TEAMCTL_BENCH_DIR"]) / "spend.toml"
            team.write_text(
                '[team]\nname = "spend"\nworkdir = "' + env["TEAMCTL_BENCH_DIR"] + '"\n\n'
                '[[members]]\nname = "lead"\nruntime = "claude"\nmodel = "claude-sonnet-4-5"\n'
                f'command = "{FAKE_CLAUDE}"\nbudget_usd = {budget}\n')
            teamctl(env, "launch", str(team))
            message_id = teamctl(env, "send", "lead", f"SPEND {STEP_USD * 40:.2f} 40").strip()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                doc = json.loads(teamctl(env, "history", "lead", "--json"))
                usage = doc["messages"][-1].get("usage")
                if doc["messages"][-1]["state"] == "queued" and usage:
                    break
                time.sleep(0.1)  # a benchmark polls; tests wait on events
            else:
                raise SystemExit("the turn was not stopped")
            assert doc["messages"][-1]["id"] == message_id
            spent = usage["cost_usd"]
            over.append(spent - budget)
            print(f"budget ${budget:.2f}: charged ${spent:.2f} — overshoot ${spent - budget:.2f}"
                  f" ({(spent - budget) / STEP_USD:.1f} model calls of ${STEP_USD:.2f})")
    return over


def overhead() -> tuple[list[float], list[float]]:
    import anyio
    import structlog

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # no console output

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import TokenUsage, UsageReading
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.daemon.migrations import open_journal
    from orchestrator.daemon.queue import AsyncStore

    readings_us: list[float] = []
    settle_ms: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = open_journal(Path(tmp) / "state.db")
        for i in range(TURNS):
            store.add_message(f"m{i}", "web", "x", ["lead"])

        async def run() -> None:
            async with anyio.create_task_group() as tg:
                ledger = Ledger(AsyncStore(store), tg, on_release=lambda team, member: None,
                                on_budget_change=lambda team, member: None,
                                on_change=lambda: None)
                await ledger.configure(TeamConfig.model_validate({
                    "team": {"name": "web", "budget_usd": 1e5}, "members": [
                        {"name": "lead", "runtime": "claude", "model": "claude-sonnet-4-5",
                         "budget_usd": 1e5}]}))
                await ledger.meter("web", "lead", "claude", "claude-sonnet-4-5")
                for i in range(TURNS):
                    start = time.perf_counter()
                    for step in range(1, 4):  # two in-turn estimates, then the result
                        ledger.observe("web", "lead", f"m{i}", UsageReading(
                            tokens=TokenUsage(input_tokens=1000 * step), estimate=step < 3,
                            counter=None if step < 3 else "claude-session:s",
                            cost_usd=None if step < 3 else 0.01 * (i + 1),
                            turn_tokens=step == 3), "claude-sonnet-4-5")
                        ledger.gate("web", "lead")
                    readings_us.append((time.perf_counter() - start) * 1e6 / 3)
                    start = time.perf_counter()
                    await ledger.settle("web", "lead", f"m{i}")
                    settle_ms.append((time.perf_counter() - start) * 1000)
                tg.cancel_scope.cancel()

        anyio.run(run)
        store.close()
    return readings_us, settle_ms


def main() -> None:
    over = overshoot()
    print(f"overshoot of a budget crossed mid-turn: median ${median(over):.2f}, max "
          f"${max(over):.2f} (a model call is ${STEP_USD:.2f}; {len(BUDGETS)} budgets)")
    figure("budget_overshoot_usd_median", median(over))
    figure("budget_overshoot_calls_max", max(over) / STEP_USD)
    readings, settles = overhead()
    print(f"accounting per turn: a reading (+ the gate) median {median(readings):.1f} µs, "
          f"p95 {percentile(readings, 95):.1f} µs on the event loop; settle (one journal "
          f"transaction, fsynced) median {median(settles):.2f} ms, p95 "
          f"{percentile(settles, 95):.2f} ms ({TURNS} turns)")
    figure("ledger_reading_us", median(readings))
    figure("ledger_settle_ms", median(settles))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
