"""Issue 50 figures, the forge (docs/forge.md), measured in process on the daemon's own core
around a fake runtime, with the real GitHub client over HTTP on localhost against the fake of
GitHub's REST subset (no real GitHub is reachable here):

- an issue labelled → a task on the board: one intake round (the list asked, the task made
  and the issue's id recorded in one transaction); median and p95 of 20, each a new issue.
  In a running daemon a round starts every ``poll_interval`` (60 s by default), so the wait
  for the round — half the interval on average — is the rest of the latency;
- requests one unchanged round sends, and what they cost of the rate limit (a 304 costs
  nothing), hence requests an hour at the default interval;
- API requests an hour for a team with 10 open pull requests at the default interval: one
  round of the pull requests (each: the pull request, its check runs, its combined status,
  its reviews) asked once to learn the ETags, then counted on an unchanged round — requests
  sent and what they cost of the rate limit;
- a failing check → the owner's stdin, in a real daemon (``python -m orchestrator daemon``)
  with a fake Claude member and ``poll_interval = 5``: issue #1 taken, landed and opened as a
  pull request (tests/support/forge_daemon.py), then each run adds a new failing check run on
  its head and times, from that moment, the poll that sees it (the fake's answer to the
  check-runs request that carries it: the poll's share) and the message's write to the
  member's stdin (the daemon's ``delivery_sent``); median of CHECK_RUNS, each added at a
  random moment of the poll's 5 s cycle;
- the import of the GitHub module (httpx and teamctl's errors), in a fresh interpreter, and
  that process's resident memory.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import anyio
from _harness import REPO, figure, median, percentile

sys.path.insert(0, str(REPO))

from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.forge import Intake, Pulls, open_forge
from orchestrator.daemon.forge import _pull_journal as pj
from orchestrator.forge_config import ForgeSection
from tests.support.driver import LogFollower, Teamctl, fakes_path, operator_home
from tests.support.fake_github import FakeGitHub, _pull
from tests.support.fakes import FakeRuntime, core
from tests.support.forge_daemon import github, landed_pull, launch, remote

RUNS = 20
CHECK_RUNS = 9
TOKEN = "ghp_bench-token"
DEFAULT_INTERVAL = ForgeSection.model_validate({"github": {"repo": "a/b"}}).poll_interval


async def _rounds(tmp: Path) -> tuple[list[float], int, int]:
    times: list[float] = []
    with FakeGitHub(token=TOKEN) as fake:
        section = ForgeSection.model_validate(
            {"github": {"repo": "octo-org/web", "token_env": "T", "api": fake.url}})
        async with core(tmp, FakeRuntime()) as c:
            assert c.built is not None
            forge = open_forge(section, {"T": TOKEN})
            intake = Intake(team="web", repo="octo-org/web", label="teamctl", state="open",
                            forge=forge, board=c.built.board, journal=c.store,
                            clock=time.time)
            try:
                for n in range(RUNS):
                    fake.add_issue(f"issue {n}", body="text", labels=("teamctl",))
                    start = time.perf_counter()
                    done = await intake.poll()
                    times.append((time.perf_counter() - start) * 1000)
                    assert len(done.created) == 1
                sent, left = len(fake.state.requests), fake.state.remaining
                await intake.poll()  # nothing changed
                quiet_requests = len(fake.state.requests) - sent
                quiet_cost = left - fake.state.remaining
            finally:
                await forge.aclose()
    return times, quiet_requests, quiet_cost


class _NoLandings:
    async def last_entry(self) -> int:
        return 0

    async def landed_after(self, team: str, after: int) -> list[tuple[int, int, str, str]]:
        return []

    async def worktree_commit(self, task: object) -> tuple[str, str]:
        raise AssertionError("not asked")


async def _pull_requests(tmp: Path, count: int = 10) -> tuple[int, int]:
    """Requests (and their rate-limit cost) of one unchanged round over ``count`` open pull
    requests."""
    with FakeGitHub(token=TOKEN) as fake:
        section = ForgeSection.model_validate(
            {"github": {"repo": "octo-org/web", "token_env": "T", "api": fake.url},
             "pull_requests": True})
        async with core(tmp, FakeRuntime()) as c:
            assert c.built is not None
            forge = open_forge(section, {"T": TOKEN})
            for n in range(1, count + 1):
                task = await c.built.board.create("web", f"task {n}", created_by=OPERATOR)
                sha = f"{n:040x}"
                fake.state.pulls[n] = _pull(fake.url, "octo-org/web", n, 5000 + n,
                                            {"title": "t", "head": f"teamctl/web/T{task.id}"},
                                            sha, "main")
                fake.add_check_run(sha, "tests", None)  # running: nothing to tell yet
                await c.store.run(pj.started, "web", "octo-org/web", 0)
                await c.store.run(pj.want, "web", "octo-org/web", task=task.id,
                                  branch=f"teamctl/web/T{task.id}", source=str(tmp),
                                  commit=sha, now=time.time())
                await c.store.run(pj.update, "web", "octo-org/web", task.id, time.time(),
                                  pushed=sha, number=n, url="u", state="open", ready=1)
            pulls = Pulls(team="web", section=section, forge=forge, board=c.built.board,
                          journal=c.store, landings=_NoLandings(),
                          epoch_of=lambda t, m: None, clock=time.time, environ={})
            try:
                await pulls.round()  # the ETags learned
                sent, left = len(fake.state.requests), fake.state.remaining
                assert await pulls.round() == count
                return len(fake.state.requests) - sent, left - fake.state.remaining
            finally:
                await forge.aclose()


def _stamp(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def _check_to_stdin(tmp: Path) -> list[tuple[float, float]]:
    """Each run: (seconds to the poll that saw the failing check, seconds to the owner's
    stdin), from the moment the check run was added."""
    (tmp / "work").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEAMCTL_", "FAKE_"))}
    env.update(TEAMCTL_HOME=str(tmp / "home"), PYTHONPATH=str(REPO),
               HOME=str(operator_home(tmp / "operator")), PATH=fakes_path(env["PATH"]))
    ctl = Teamctl(tmp / "home", tmp / "work", env)
    follower: LogFollower | None = None
    found: list[tuple[float, float]] = []
    try:
        _, bare = remote(ctl)
        with github(bare) as fake:
            launch(ctl, fake, bare)
            follower = LogFollower(ctl)
            head = str(landed_pull(ctl, follower, fake)["head"]["sha"])
            for n in range(CHECK_RUNS):
                # a random moment of the poll's cycle (each run would otherwise start just
                # after the round that told the last one, and wait nearly a whole interval)
                time.sleep(random.uniform(0, 5))
                asked = len(fake.state.requests)
                start = time.time()
                run = fake.add_check_run(head, f"tests-{n}", "failure", summary="1 failed",
                                         text="FAILED test_form.py::test_it")
                fake.wait_request(lambda r: r[1].endswith("/check-runs") and r[2] == 200,
                                  after=asked)
                polled = time.time()
                source = f":check:{run['id']}"
                follower.wait_for(lambda e, s=source: e["event"] == "task_owner_told"
                                  and str(e.get("source", "")).endswith(s))
                [notice] = [x for x in ctl.json("task", "show", "T1")["notices"]
                            if x["source"].endswith(source)]
                sent = follower.wait_for(lambda e, m=notice["message_id"]:
                                         e["event"] == "delivery_sent"
                                         and e.get("message_id") == m)
                follower.wait_for(lambda e, m=notice["message_id"]:
                                  e["event"] == "delivery_answered" and e.get("message_id") == m)
                found.append((polled - start, _stamp(sent) - start))
    finally:
        if follower is not None:
            follower.close()
        ctl.shutdown()
    return found


def _import_cost() -> tuple[float, float]:
    code = ("import time, sys; t = time.perf_counter(); import orchestrator.forge.github; "
            "ms = (time.perf_counter() - t) * 1000; rss = [l for l in open('/proc/self/status')"
            " if l.startswith('VmRSS')][0].split()[1]; print(ms, int(rss) / 1024)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        times, quiet_requests, quiet_cost = anyio.run(_rounds, Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        pull_requests, pull_cost = anyio.run(_pull_requests, Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        to_stdin = _check_to_stdin(Path(tmp))
    imports = [_import_cost() for _ in range(3)]
    per_hour = quiet_requests * 3600 / DEFAULT_INTERVAL
    print(f"issue labelled -> task: median {median(times):.1f} ms, p95 "
          f"{percentile(times, 95):.1f} ms over {RUNS} rounds (plus the wait for the round: "
          f"{DEFAULT_INTERVAL / 2:.0f} s on average at the default interval)")
    print(f"an unchanged round: {quiet_requests} request(s), {quiet_cost} of the rate limit; "
          f"{per_hour:.0f} requests an hour at {DEFAULT_INTERVAL:.0f} s")
    pulls_hour = (pull_requests + quiet_requests) * 3600 / DEFAULT_INTERVAL
    print(f"10 open pull requests, an unchanged round: {pull_requests} requests "
          f"({pull_cost} of the rate limit); with intake {pulls_hour:.0f} requests an hour at "
          f"{DEFAULT_INTERVAL:.0f} s, {pull_cost * 3600 / DEFAULT_INTERVAL:.0f} of them counted")
    figure("forge_10_pulls_requests_per_hour", pulls_hour)
    total, poll = median([b for _, b in to_stdin]), median([a for a, _ in to_stdin])
    rest = median([b - a for a, b in to_stdin])
    print(f"a failing check -> the owner's stdin (real daemon, fake member, poll_interval 5 s): "
          f"median {total:.2f} s over {len(to_stdin)} (min {min(b for _, b in to_stdin):.2f}, "
          f"max {max(b for _, b in to_stdin):.2f}); the wait for the poll median {poll:.2f} s "
          f"({100 * poll / total:.0f}% of it), from the poll's answer to stdin median "
          f"{rest * 1000:.0f} ms")
    figure("forge_check_to_stdin_s", total)
    figure("forge_check_to_stdin_poll_s", poll)
    figure("forge_check_to_stdin_after_poll_ms", rest * 1000)
    print("import of orchestrator.forge.github: " + ", ".join(
        f"{ms:.0f} ms / {rss:.1f} MiB" for ms, rss in imports))
    figure("forge_issue_to_task_ms", median(times))
    figure("forge_quiet_round_requests", quiet_requests)
    figure("forge_intake_requests_per_hour", per_hour)
    figure("forge_github_import_ms", median([ms for ms, _ in imports]))
    figure("forge_github_import_rss_mib", median([rss for _, rss in imports]))


if __name__ == "__main__":
    main()
