"""Issue 14 figures for a Codex member on `codex app-server` (the real codex 0.171.0 against the
fake Responses API; the fake codex when the real one is not installed — `make e2e` installs
it): the member's resident memory (the server and its children, its MCP server included) over
50 turns, and the time from `turn/interrupt` to the end of a stalled turn (median of 5).
The per-turn time against an exec member is bench_codex.py's.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from _harness import REPO, figure, home, inline_toml, median, teamctl
from bench_codex import REAL, provider_config

from orchestrator import client, protocol
from orchestrator.paths import Home
from runtimes.kit.base import process_tree
from tests.support.fake_responses import FakeResponses

TURNS = 50
STALLS = 5


def _launch(env: dict[str, str], codex: Path, api: FakeResponses, work: Path,
            name: str, extra: str = "") -> Home:
    team = Path(env["TEAMCTL_BENCH_DIR"]) / f"{name}.toml"
    team.write_text(
        f'[team]\nname = "{name}"\nworkdir = "{work}"\n\n[[members]]\n'
        f'name = "rev"\nruntime = "codex"\nmodel = "gpt-5.4-mini"\ncommand = "{codex}"\n'
        'env = { FAKE_OPENAI_API_KEY = "sk-x" }\n' + extra +
        f"config = {inline_toml(provider_config(api))}\n")
    teamctl(env, "launch", str(team))
    return Home(Path(env["TEAMCTL_HOME"]))


def _send(ctl: Home, text: str) -> dict[str, object]:
    answer: dict[str, object] = client.call(ctl, protocol.SEND, {
        "member": "rev", "text": text, "wait": True, "timeout": 120.0}, timeout=150)
    return answer


def memory(codex: Path, api: FakeResponses, work: Path) -> None:
    with home() as env:
        ctl = _launch(env, codex, api, work, "mem")
        [row] = json.loads(teamctl(env, "status", "--json"))["teams"][0]["members"]
        pid = row["pid"]
        samples: dict[int, tuple[float, int]] = {}
        for turn in range(1, TURNS + 1):
            assert _send(ctl, f"turn {turn}")["state"] == "answered"
            tree = process_tree(pid)
            assert tree is not None, "the server is gone"
            samples[turn] = (tree.rss_bytes / 2**20, tree.children)
        [row] = json.loads(teamctl(env, "status", "--json"))["teams"][0]["members"]
        assert row["pid"] == pid, "one process for all the turns"
    shown = ", ".join(f"turn {t}: {samples[t][0]:.0f} MiB / {samples[t][1]} children"
                      for t in (1, 10, 25, 50))
    print(f"app-server member memory (server + children) over {TURNS} turns: {shown}")
    figure("app_server_rss_turn1_mib", samples[1][0])
    figure("app_server_rss_turn50_mib", samples[TURNS][0])
    figure("app_server_rss_growth_mib", samples[TURNS][0] - samples[1][0])
    figure("app_server_children_turn50", samples[TURNS][1])


def _ts(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def interrupts(codex: Path, api: FakeResponses, work: Path) -> None:
    with home() as env:
        ctl = _launch(env, codex, api, work, "stall", "turn_idle_timeout = 2.0\n")
        for i in range(STALLS):
            api.hang_next = True
            result = _send(ctl, f"stall {i}")
            assert result["state"] == "answered" and result["attempts"] == 2, result
        log = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
        events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    asked = [_ts(e) for e in events if e["event"] == "turn_stuck"
             and e.get("action") == "interrupt"]
    ended = [_ts(e) for e in events if e["event"] == "delivery_failed"
             and e.get("code") == "runtime_stuck"]
    kills = [e for e in events if e["event"] == "turn_stuck" and e.get("action") == "kill"]
    assert len(asked) == len(ended) == STALLS and not kills, (asked, ended, kills)
    samples = [(end - start) * 1000 for start, end in zip(asked, ended, strict=True)]
    print(f"a stalled turn: turn/interrupt to the turn's end (re-queued) median "
          f"{median(samples):.0f} ms, max {max(samples):.0f} ms ({STALLS} stalls, no kill)")
    figure("app_server_interrupt_ms", median(samples))


def main() -> None:
    codex = REAL if REAL.exists() else REPO / "fixtures" / "bin" / "codex"
    print(f"codex: {codex} ({'real' if codex == REAL else 'fake: run make e2e for the real one'})")
    with FakeResponses() as api, tempfile.TemporaryDirectory(prefix="tc-app-") as tmp:
        memory(codex, api, Path(tmp))
        if codex == REAL:  # the fake answers without the API: no request of its can stall
            interrupts(codex, api, Path(tmp))
        else:
            print("a stalled turn: skipped figure (the real codex is not installed: make e2e)")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
