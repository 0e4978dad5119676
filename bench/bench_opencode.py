"""Issue 5 figures: a real `opencode serve` member's RSS after launch and after 10 turns, and
the per-turn overhead of a teamctl member over calling the same server directly (the real
opencode-ai 1.18.33 against the fake chat API; falls back to the fake opencode when the real
one is not installed — `make e2e` installs it).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path

import httpx
from _harness import REPO, figure, home, inline_toml, median, teamctl, timed_sends

from orchestrator import client, protocol
from orchestrator.paths import Home
from tests.support.fake_chat import FakeChat

RUNS = 10
REAL = REPO / ".cache" / "e2e" / "opencode" / "node_modules" / ".bin" / "opencode"


def tree_rss_mib(pid: int) -> float:
    """RSS of a process and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in status.splitlines()
                      if line.startswith("VmRSS:"))
        todo += [int(child) for child in children]
    return total / 1024


def member_toml(opencode: Path, api: FakeChat, workdir: Path) -> str:
    config = {"provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                    "options": {"baseURL": api.base_url, "apiKey": "k"},
                                    "models": {"vision-model": {"name": "v"}}}}}
    return ('[team]\nname = "oc"\nworkdir = "' + str(workdir) + '"\n\n[[members]]\n'
            f'name = "des"\nruntime = "opencode"\nmodel = "fake/vision-model"\nvision = true\n'
            f'command = "{opencode}"\nstart_timeout = 120.0\n'
            f'env = {{ npm_config_registry = "{api.dead_registry}" }}\n'
            f"config = {inline_toml(config)}\n")




def via_teamctl(opencode: Path, api: FakeChat, work: Path) -> tuple[list[float], float, float]:
    with home() as env:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "oc.toml"
        team.write_text(member_toml(opencode, api, work))
        teamctl(env, "launch", str(team))
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        pid = client.call(ctl, protocol.STATUS, {})["teams"][0]["members"][0]["pid"]
        after_launch = tree_rss_mib(pid)
        samples = timed_sends(ctl, "des", RUNS)
        return samples, after_launch, tree_rss_mib(pid)


def direct(opencode: Path, api: FakeChat, work: Path, *, with_events: bool) -> list[float]:
    """The same server driven directly; ``with_events`` also follows ``/event`` (as a member
    must, for liveness), which costs OpenCode itself time on every turn."""
    state = work / ("direct-state-events" if with_events else "direct-state")
    env = dict(os.environ, HOME=str(state / "home"), XDG_CONFIG_HOME=str(state / "config"),
               XDG_DATA_HOME=str(state / "data"), XDG_CACHE_HOME=str(state / "cache"),
               XDG_STATE_HOME=str(state / "state"), PWD=str(work),
               OPENCODE_DISABLE_MODELS_FETCH="1", npm_config_registry=api.dead_registry,
               OPENCODE_CONFIG_CONTENT=json.dumps({
                   "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                         "options": {"baseURL": api.base_url, "apiKey": "k"},
                                         "models": {"vision-model": {"name": "v"}}}}}))
    port = 41000 + os.getpid() % 1000
    process = subprocess.Popen([str(opencode), "serve", "--hostname", "127.0.0.1", "--port",
                                str(port)], cwd=work, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "listening on" in line:
                break
        body = {"model": {"providerID": "fake", "modelID": "vision-model"}}
        base = f"http://127.0.0.1:{port}"
        if with_events:
            threading.Thread(target=_follow_events, args=(base, str(work)), daemon=True).start()
        with httpx.Client(base_url=base, timeout=60, params={"directory": str(work)}) as http:
            session = http.post("/session", json={"title": "bench"}).json()["id"]
            http.post(f"/session/{session}/message",
                      json={**body, "parts": [{"type": "text", "text": "warm up"}]})
            samples = []
            for i in range(RUNS):
                start = time.perf_counter()
                http.post(f"/session/{session}/message",
                          json={**body, "parts": [{"type": "text", "text": f"turn {i}"}]})
                samples.append((time.perf_counter() - start) * 1000)
        return samples
    finally:
        process.terminate()
        process.wait(timeout=30)


def _follow_events(base: str, directory: str) -> None:
    with suppress(httpx.HTTPError), httpx.Client(base_url=base, timeout=None,
                                                 params={"directory": directory}) as http, \
            http.stream("GET", "/event") as response:
        for _line in response.iter_lines():
            pass


def main() -> None:
    opencode = REAL if REAL.exists() else REPO / "fixtures" / "bin" / "opencode"
    print(f"opencode: {opencode} ({'real' if opencode == REAL else 'fake'})")
    with FakeChat() as api, tempfile.TemporaryDirectory(prefix="tc-oc-") as tmp:
        work = Path(tmp)
        plain = direct(opencode, api, work, with_events=False)
        followed = direct(opencode, api, work, with_events=True)
        member, rss_launch, rss_turns = via_teamctl(opencode, api, work)
    overhead = median(member) - median(followed)
    print(f"serve RSS (process tree): {rss_launch:.0f} MiB after launch, {rss_turns:.0f} MiB "
          f"after {RUNS + 1} turns")
    print(f"POST /session/{{id}}/message directly: median {median(plain):.1f} ms; directly with "
          f"an /event subscriber: {median(followed):.1f} ms; through a teamctl member: "
          f"{median(member):.1f} ms; teamctl's own overhead {overhead:.1f} ms per turn")
    figure("opencode_rss_after_launch_mib", rss_launch)
    figure("opencode_rss_after_10_turns_mib", rss_turns)
    figure("opencode_turn_direct_ms", median(plain))
    figure("opencode_turn_direct_with_events_ms", median(followed))
    figure("opencode_turn_member_ms", median(member))
    figure("opencode_turn_overhead_ms", overhead)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
