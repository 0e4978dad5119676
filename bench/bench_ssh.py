"""Issue 19 figures. (1) A turn's extra latency through SSH: ``send --wait`` round trips to the
same fake Claude member, local and on a real sshd at 127.0.0.1 (tests/support/sshd.py), median of
20. (2) Reconnect: the local ssh client killed with -9; from the kill to the member ready again
(its ``member_ready`` event), median of 5. (3) How far one machine goes: the memory of one real
Claude Code member and one real Codex app-server member (process trees, after a turn against the
local fake APIs), as members per GiB.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

from _harness import FAKE_CLAUDE, REPO, figure, home, median, teamctl

ROUNDS = 20
CUTS = 5
CACHE = REPO / ".cache" / "e2e"


def _events(env: dict[str, str], name: str) -> list[dict[str, object]]:
    path = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e.get("event") == name]


def _member(name: str, **extra: object) -> dict[str, object]:
    return {"name": name, "runtime": "claude", "model": "claude-sonnet-4-5",
            "command": str(FAKE_CLAUDE), "login": "isolated",
            "env": {"ANTHROPIC_API_KEY": "sk-ant-bench-0000"}, **extra}


def latency_and_reconnect() -> tuple[list[float], list[float], list[float]]:
    from tests.support.driver import team_toml
    from tests.support.sshd import sshd

    local: list[float] = []
    remote: list[float] = []
    reconnect: list[float] = []
    with home() as env, sshd() as box:
        work = Path(env["TEAMCTL_BENCH_DIR"])
        team = work / "ssh.toml"
        team.write_text(team_toml("ssh", [_member("near"), _member(
            "far", host="box", backoff=[0.1, 0.5], max_restarts=100)],
            hosts={"box": box.host()}))
        teamctl(env, "launch", str(team))
        for i in range(ROUNDS + 1):
            for name, into in (("near", local), ("far", remote)):
                start = time.perf_counter()
                teamctl(env, "send", name, f"ping {i}", "--wait")
                if i:  # the first round warms both up
                    into.append((time.perf_counter() - start) * 1000)
        for _ in range(CUTS):
            doc = json.loads(teamctl(env, "status", "--json"))
            far = next(m for m in doc["teams"][0]["members"] if m["name"] == "far")
            seen = len(_events(env, "member_ready"))
            cut = time.time()
            os.kill(far["pid"], signal.SIGKILL)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ready = [e for e in _events(env, "member_ready")[seen:]
                         if e.get("member") == "far"]
                if ready:
                    at = datetime.fromisoformat(str(ready[0]["ts"])).timestamp()
                    reconnect.append((at - cut) * 1000)
                    break
                time.sleep(0.02)  # a benchmark polls; tests wait on events
            else:
                raise SystemExit("the member did not come back")
    return local, remote, reconnect


def memory() -> tuple[float, float]:
    from runtimes.kit.base import process_tree
    from tests.support.driver import team_toml
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_responses import FakeResponses
    from tests.support.real_members import claude_member, codex_member

    claude = CACHE / "claude/node_modules/.bin/claude"
    codex = CACHE / "codex/node_modules/.bin/codex"
    if not claude.exists() or not codex.exists():
        raise SystemExit("the real CLIs are not installed: run 'make e2e' first")
    with home() as env, FakeAnthropic() as anthropic, FakeResponses() as responses:
        work = Path(env["TEAMCTL_BENCH_DIR"])
        members = [claude_member("c", claude, anthropic), codex_member("x", codex, responses)]
        for member in members:
            member["workdir"] = str(work)
        team = work / "mem.toml"
        team.write_text(team_toml("mem", members))
        teamctl(env, "launch", str(team))
        for name in ("c", "x"):
            teamctl(env, "send", name, "hello", "--wait", "--timeout", "120")
        doc = json.loads(teamctl(env, "status", "--json"))
        rss = {}
        for m in doc["teams"][0]["members"]:
            tree = process_tree(m["pid"])
            assert tree is not None
            rss[m["name"]] = tree.rss_bytes / 2**20
    return rss["c"], rss["x"]


def main() -> None:
    local, remote, reconnect = latency_and_reconnect()
    extra = median(remote) - median(local)
    print(f"send --wait round trip: local {median(local):.0f} ms, over ssh to 127.0.0.1 "
          f"{median(remote):.0f} ms (+{extra:.0f} ms; {ROUNDS} turns each, a fake Claude "
          "member, one ControlMaster)")
    print(f"reconnect after kill -9 of the local ssh: median {median(reconnect):.0f} ms, max "
          f"{max(reconnect):.0f} ms ({CUTS} cuts; backoff 0.1 s)")
    figure("turn_local_ms", median(local))
    figure("turn_ssh_ms", median(remote))
    figure("turn_ssh_extra_ms", extra)
    figure("ssh_reconnect_ms", median(reconnect))
    claude, codex = memory()
    print(f"one member's memory after a turn: Claude Code {claude:.0f} MiB "
          f"({1024 / claude:.1f} per GiB), Codex app-server {codex:.0f} MiB "
          f"({1024 / codex:.1f} per GiB)")
    figure("claude_member_mib", claude)
    figure("codex_member_mib", codex)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
