"""Issue 49 figures, the merge queue (docs/land.md), measured in process on the daemon's own core
around a fake runtime, with real git on a real repository (members in worktrees):

- a task done → landed on the integration branch, with a trivial check (``true``): from the
  owner's ``task_complete`` (the board's ``complete``: the gate, the snapshot of the owner's
  worktree, the queue's entry) to the entry ``landed`` (the scratch worktree made, the merge,
  the check inside the owner's boundary, the branch moved, the scratch removed); median of 20;
- a conflict → the owner's stdin: from ``complete`` to teamctl's message naming the conflict
  reaching the owner's process (its turn); median of 20;
- 20 tasks from 5 members through the queue (each member's commit touches a file of its own;
  the check a real interpreter start, ``python -c pass``): the throughput, and the share of the
  queue's time the integration check took.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _harness import REPO, figure, median, percentile

sys.path.insert(0, str(REPO))

from orchestrator.contracts import TextPart, Turn
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from tests.support.fakes import FakeRuntime, core
from tests.support.land import commit_in, integrating_team, land_repo, settled_entry

RUNS = 20
MEMBERS = 5
TASKS = 20


async def _done_to_landed(tmp: Path) -> list[float]:
    repo = land_repo(tmp / "repo")
    samples = []
    async with core(tmp, FakeRuntime()) as c:
        assert c.built is not None
        board = c.built.board
        await c.teams.launch(integrating_team(repo, "dev", check="true"), "t.toml", wait=True,
                             timeout=10)
        tree = Path(c.supervisor.member("web", "dev").workdir)
        for run in range(RUNS):
            task = await board.create("web", f"task {run}", created_by=OPERATOR,
                                      assignee=Assignee("dev", 1))
            commit_in(tree, f"f{run}.txt", f"{run}\n")
            start = time.perf_counter()
            await board.complete(task.id, by=Actor("dev"), summary="done", team="web")
            entry = await settled_entry(c, task.id)
            samples.append((time.perf_counter() - start) * 1000)
            assert entry.state == "landed", entry
    return samples


async def _conflict_to_stdin(tmp: Path) -> list[float]:
    repo = land_repo(tmp / "repo")
    runtime = FakeRuntime()
    samples = []
    async with core(tmp, runtime) as c:
        assert c.built is not None
        board = c.built.board
        await c.teams.launch(integrating_team(repo, "a", "b", retries=100), "t.toml",
                             wait=True, timeout=10)
        trees = {m: Path(c.supervisor.member("web", m).workdir) for m in ("a", "b")}
        for run in range(RUNS):
            ta = await board.create("web", f"a {run}", created_by=OPERATOR,
                                    assignee=Assignee("a", 1))
            tb = await board.create("web", f"b {run}", created_by=OPERATOR,
                                    assignee=Assignee("b", 1))
            commit_in(trees["a"], f"c{run}.txt", "from a\n")
            commit_in(trees["b"], f"c{run}.txt", "from b\n")
            await board.complete(ta.id, by=Actor("a"), summary="done", team="web")
            assert (await settled_entry(c, ta.id)).state == "landed"
            b = next(p for p in reversed(runtime.opened) if p.spec.member == "b")
            turns = len(b.turns)
            start = time.perf_counter()
            await board.complete(tb.id, by=Actor("b"), summary="done", team="web")
            with anyio.fail_after(20):
                while not _told(b.turns[turns:]):
                    version = c.built.changes.version
                    await c.built.changes.wait(version, 0.05)
            samples.append((time.perf_counter() - start) * 1000)
            await board.cancel(tb.id, by=OPERATOR)  # b's branch stays in conflict: next run
            _reset(trees["b"], repo)
    return samples


def _told(turns: list[Turn]) -> bool:
    return any(isinstance(p, TextPart) and "did not land" in p.text for t in turns
               for p in t.parts)


def _reset(tree: Path, repo: Path) -> None:
    """b's worktree moved to the integration branch (its next conflict is a fresh one)."""
    from tests.support.git import git
    git(tree, "reset", "-q", "--hard", git(repo, "rev-parse", "teamctl/web/main").strip())


async def _throughput(tmp: Path) -> tuple[float, float, float]:
    repo = land_repo(tmp / "repo")
    members = [f"m{i}" for i in range(MEMBERS)]
    check = f"{shlex.quote(sys.executable)} -c pass"
    async with core(tmp, FakeRuntime()) as c:
        assert c.built is not None
        board, land = c.built.board, c.built.land
        await c.teams.launch(integrating_team(repo, *members, check=check), "t.toml",
                             wait=True, timeout=10)
        trees = {m: Path(c.supervisor.member("web", m).workdir) for m in members}
        tasks = []
        for i in range(TASKS):
            member = members[i % MEMBERS]
            task = await board.create("web", f"task {i}", created_by=OPERATOR,
                                      assignee=Assignee(member, 1))
            commit_in(trees[member], f"{member}/{i}.txt", f"{i}\n")
            tasks.append((task.id, member))
        await land.queue("web", pause=True)  # all done first: the queue alone is timed
        for task_id, member in tasks:
            await board.complete(task_id, by=Actor(member), summary="done", team="web")
        start = time.perf_counter()
        await land.queue("web", resume=True)
        entries = [await settled_entry(c, task_id, deadline=300) for task_id, _ in tasks]
        elapsed = time.perf_counter() - start
    assert all(e.state == "landed" for e in entries), [e.note for e in entries]
    checked = sum(e.check_seconds or 0.0 for e in entries)
    return TASKS / elapsed * 60, elapsed, checked / elapsed


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tc-bench-land-") as tmp:
        for sub in ("landed", "conflict", "queue"):
            (Path(tmp) / sub).mkdir()
        landed = anyio.run(_done_to_landed, Path(tmp) / "landed")
        conflict = anyio.run(_conflict_to_stdin, Path(tmp) / "conflict")
        per_minute, elapsed, share = anyio.run(_throughput, Path(tmp) / "queue")
    print(f"task done -> landed (check 'true'): median {median(landed):.1f} ms, p95 "
          f"{percentile(landed, 95):.1f} ms ({RUNS} runs)")
    print(f"a conflict -> the owner's stdin: median {median(conflict):.1f} ms, p95 "
          f"{percentile(conflict, 95):.1f} ms ({RUNS} runs)")
    print(f"{TASKS} tasks from {MEMBERS} members through the queue: {elapsed:.2f} s, "
          f"{per_minute:.0f} tasks/min; the check ('python -c pass') {share * 100:.0f} % of it")
    figure("land_done_to_landed_ms", median(landed))
    figure("land_conflict_to_stdin_ms", median(conflict))
    figure("land_tasks_per_minute", per_minute)
    figure("land_check_share_pct", share * 100)


if __name__ == "__main__":
    main()
