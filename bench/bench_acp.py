"""Issue 30 figures for an ACP member on the fake ACP agent (fixtures/bin/fake-acp): the time
from ``teamctl launch`` to the member ready, a turn through teamctl (``send --wait`` over the
socket) against a minimal direct ACP client driving the same fake agent (the ratio is teamctl's
overhead: journal, queue, MCP token, ledger), and the member's resident memory (the agent
process; the fake is a small Python script, so this is the floor an agent adds to)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import REPO, figure, home, median, rss_mib, teamctl, timed_sends

from orchestrator.paths import Home

FAKE_ACP = REPO / "fixtures" / "bin" / "fake-acp"
TURNS = 30
STARTS = 5


class DirectClient:
    """The least an ACP client does: initialize, session/new, then prompt and read to the
    answer — no journal, no watchdog, no ledger."""

    def __init__(self, workdir: Path, home_dir: Path) -> None:
        self.process = subprocess.Popen([str(FAKE_ACP), "--acp"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, cwd=workdir, text=True,
                                        env={"HOME": str(home_dir), "PATH": "/usr/bin:/bin"})
        self.seq = 0
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        self.session = self.request("session/new", {"cwd": str(workdir),
                                                    "mcpServers": []})["sessionId"]

    def request(self, method: str, params: dict[str, object]) -> dict[str, object]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.seq += 1
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.seq,
                                             "method": method, "params": params}) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            message = json.loads(line)
            if message.get("id") == self.seq and "method" not in message:
                return message["result"]  # type: ignore[no-any-return]
        raise SystemExit("the agent exited")

    def turn(self, text: str) -> None:
        self.request("session/prompt", {"sessionId": self.session,
                                        "prompt": [{"type": "text", "text": text}]})

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def direct_turns(work: Path) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="tc-acp-direct-") as tmp:
        client = DirectClient(work, Path(tmp))
        client.turn("warm up")
        samples = []
        for i in range(TURNS):
            start = time.perf_counter()
            client.turn(f"turn {i}")
            samples.append((time.perf_counter() - start) * 1000)
        client.close()
    return samples


def _team(env: dict[str, str], work: Path, name: str) -> Path:
    team = Path(env["TEAMCTL_BENCH_DIR"]) / f"{name}.toml"
    team.write_text(f'[team]\nname = "{name}"\nworkdir = "{work}"\n\n[[members]]\n'
                    f'name = "qw"\nruntime = "acp"\ncommand = ["{FAKE_ACP}", "--acp"]\n')
    return team


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tc-acp-work-") as tmp:
        work = Path(tmp)
        with home() as env:
            team = _team(env, work, "acp")
            starts = []
            for _ in range(STARTS):
                start = time.perf_counter()
                teamctl(env, "launch", str(team))  # returns once the member is ready
                starts.append((time.perf_counter() - start) * 1000)
                teamctl(env, "stop", "acp")
            teamctl(env, "launch", str(team))
            [row] = json.loads(teamctl(env, "status", "--json"))["teams"][0]["members"]
            assert row["readiness"] == "ready", row
            through = timed_sends(Home(Path(env["TEAMCTL_HOME"])), "qw", TURNS)
            rss = rss_mib(row["pid"])
        direct = direct_turns(work)
    print(f"ACP member: launch to ready median {median(starts):.0f} ms over {STARTS}; a turn "
          f"through teamctl {median(through):.1f} ms vs direct {median(direct):.1f} ms "
          f"(median of {TURNS}); the agent's RSS {rss:.1f} MiB")
    figure("acp_launch_ready_ms", median(starts))
    figure("acp_turn_teamctl_ms", median(through))
    figure("acp_turn_direct_ms", median(direct))
    figure("acp_turn_overhead_ratio", median(through) / median(direct))
    figure("acp_member_rss_mib", rss)


if __name__ == "__main__":
    sys.exit(main())
