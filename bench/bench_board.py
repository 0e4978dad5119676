"""Issue 28 figures: the time from a dependency's ``done`` to the dependent task's offer on the
next idle claimer's stdin (the daemon's own core around a fake runtime: the offer's turn
reaching the member's process), the claim latency with 50 members racing for one task (the
daemon's Board on its journal), and ``task_list`` on 10,000 tasks through a real daemon's
socket (a page of 1000, and the ready filter).

The offer is timed in process (the daemon's core around a fake runtime); the race on the Board
in process; the task list through the operator's socket. Nothing calls as a member from outside
it."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _harness import REPO, figure, home, median, percentile, teamctl

sys.path.insert(0, str(REPO))

from orchestrator import client, protocol
from orchestrator.config import TeamConfig
from orchestrator.contracts import TextPart, Turn
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from orchestrator.errors import TaskRefused
from orchestrator.paths import Home
from tests.support.fakes import FakeRuntime, core

RUNS = 20
RACERS = 50
TASKS = 10_000


async def _offer_latency(tmp: Path) -> list[float]:
    """Per run: T_a in progress under the lead, T_b waiting on it, the claimer idle; the
    lead completes T_a; the time until the claimer's process is handed T_b's turn (ms)."""
    runtime = FakeRuntime()
    config = TeamConfig.model_validate({
        "team": {"name": "web", "workdir": str(tmp)},
        "members": [{"name": "lead", "runtime": "claude"},
                    {"name": "dev", "runtime": "claude", "claims": True}]})
    samples = []
    async with core(tmp, runtime) as c:
        assert c.built is not None
        board = c.built.board
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        for _ in range(RUNS):
            first = await board.create("web", "first", created_by=OPERATOR,
                                       assignee=Assignee("lead", 1))
            second = await board.create("web", "second", blocked_by=[first.id],
                                        created_by=OPERATOR)
            dev = next(p for p in reversed(runtime.opened) if p.spec.member == "dev")
            turns = len(dev.turns)
            start = time.perf_counter()
            await board.complete(first.id, by=Actor("lead"), summary="done")
            with anyio.fail_after(10):  # the delivery moves on the change feed
                while (version := c.built.changes.version) and \
                        not _handed(dev.turns[turns:], second.id):
                    await c.built.changes.wait(version, 1.0)
            samples.append((time.perf_counter() - start) * 1000)
            await board.complete(second.id, by=Actor("dev"), summary="done")
    return samples


def _handed(turns: list[Turn], task_id: int) -> bool:
    """Whether one of ``turns`` hands the member task ``task_id`` (not another turn: a
    reminder of the task it held before, issue 49's, is a turn as well)."""
    return any(f"T{task_id}" in part.text for turn in turns for part in turn.parts
               if isinstance(part, TextPart))


async def _claim_race(tmp: Path) -> list[float]:
    """50 members claim one ready task at once, 20 times: each claim's latency (ms)."""
    samples: list[float] = []
    async with core(tmp, FakeRuntime()) as c:
        assert c.built is not None
        board = c.built.board
        for run in range(RUNS):
            task = await board.create("race", f"task {run}", created_by=OPERATOR)

            async def claim(member: str, task_id: int = task.id) -> None:
                start = time.perf_counter()
                with contextlib.suppress(TaskRefused):
                    await board.claim("race", member, epoch=1, task_id=task_id)
                samples.append((time.perf_counter() - start) * 1000)

            async with anyio.create_task_group() as tg:
                for i in range(RACERS):
                    tg.start_soon(claim, f"m{run}-{i}")
    return samples


def _task_list(env: dict[str, str]) -> tuple[float, float]:
    """10,000 tasks added over the socket; then one page of 1000 and the ready page (ms)."""
    ctl = Home(Path(env["TEAMCTL_HOME"]))
    team = Path(env["TEAMCTL_BENCH_DIR"]) / "board.toml"
    team.write_text('[team]\nname = "board"\n\n[[members]]\nname = "dev"\nruntime = "claude"\n'
                    f'command = "{REPO / "fixtures" / "bin" / "claude"}"\n')
    teamctl(env, "launch", str(team))
    for i in range(TASKS):
        client.call(ctl, protocol.TASK_ADD, {"team": "board", "title": f"task {i}",
                                      "blocked_by": [i] if i % 2 else []}, timeout=30)
    timings = []
    for params in ({"limit": 1000}, {"limit": 1000, "status": "ready"}):
        start = time.perf_counter()
        doc = client.call(ctl, protocol.TASK_LIST, {"team": "board", **params}, timeout=30)
        timings.append((time.perf_counter() - start) * 1000)
        assert doc["total"] in (TASKS, TASKS // 2), doc["total"]
    return timings[0], timings[1]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tc-bench-board-") as tmp:
        for sub in ("offer", "race"):
            (Path(tmp) / sub).mkdir()
        offers = anyio.run(_offer_latency, Path(tmp) / "offer")
        claims = anyio.run(_claim_race, Path(tmp) / "race")
    print(f"dependency done -> offer on the next idle member's stdin: median "
          f"{median(offers):.2f} ms, p95 {percentile(offers, 95):.2f} ms ({RUNS} runs)")
    print(f"claim with {RACERS} racing: p50 {percentile(claims, 50):.2f} ms, "
          f"p99 {percentile(claims, 99):.2f} ms ({RUNS} races)")
    figure("board_done_to_offer_ms", median(offers))
    figure("board_claim_race_p50_ms", percentile(claims, 50))
    figure("board_claim_race_p99_ms", percentile(claims, 99))
    with home() as env:
        page, ready = _task_list(env)
    print(f"task_list on {TASKS} tasks: a page of 1000 {page:.1f} ms, ready filter {ready:.1f} ms")
    figure("board_task_list_10k_page_ms", page)
    figure("board_task_list_10k_ready_ms", ready)


if __name__ == "__main__":
    main()
