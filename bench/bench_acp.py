"""Issue 30 figures for an ACP member, on the fake ACP agent (fixtures/bin/fake-acp) and on the
real Qwen Code and Gemini CLI (pinned, installed by ``make e2e``; each against its fake
provider API on 127.0.0.1, as in tests/e2e): the time from ``teamctl launch`` to the member
ready, a turn through teamctl (``send --wait`` over the socket) against a minimal direct ACP
client driving another copy of the same agent on the same API, turn about (the ratio is
teamctl's overhead: journal, queue, MCP token, ledger), and the member's resident memory (its
process group: the agent and the MCP server it started for teamctl). A real agent that is not
installed is left out, and said so.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _harness import REPO, figure, home, inline_toml, median, teamctl

from orchestrator.paths import Home
from tests.support.fake_chat import FakeChat
from tests.support.fake_gemini import FakeGemini

if TYPE_CHECKING:
    from tests.support.fake_provider import FakeProvider

FAKE_ACP = REPO / "fixtures" / "bin" / "fake-acp"
CACHE = REPO / ".cache" / "e2e"


@dataclass
class Agent:
    """One agent: its member (team-file keys), the argv and environment the direct client
    gives it (what the preset gives it through teamctl), and how many samples it gets."""

    name: str
    member: dict[str, Any]
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    turns: int = 30
    starts: int = 5


def agents(api: dict[str, FakeProvider]) -> list[Agent]:
    found = [Agent("", {"command": [str(FAKE_ACP), "--acp"]}, [str(FAKE_ACP), "--acp"])]
    qwen = Path(os.environ.get("TEAMCTL_E2E_QWEN") or CACHE / "qwen/node_modules/.bin/qwen")
    gemini = Path(os.environ.get("TEAMCTL_E2E_GEMINI")
                  or CACHE / "gemini/node_modules/.bin/gemini")
    if qwen.exists():
        keys = {"OPENAI_API_KEY": "sk-bench-dummy", "OPENAI_BASE_URL": f"{api['qwen'].root}/v1"}
        found.append(Agent("qwen", {"acp_agent": "qwen", "command": str(qwen),
                                    "model": "text-model", "env": keys},
                           [str(qwen), "--acp", "--auth-type", "openai"],
                           {**keys, "OPENAI_MODEL": "text-model",
                            "QWEN_CODE_NO_RELAUNCH": "true"}, turns=10, starts=3))
    else:
        print(f"Qwen Code is not installed at {qwen} ('make e2e' installs it): left out")
    if gemini.exists():
        keys = {"GEMINI_API_KEY": "bench-dummy", "GOOGLE_GEMINI_BASE_URL": api["gemini"].root}
        found.append(Agent("gemini", {"acp_agent": "gemini", "command": str(gemini),
                                      "model": "gemini-2.5-flash", "env": keys},
                           [str(gemini), "--acp", "--skip-trust"],
                           {**keys, "GEMINI_MODEL": "gemini-2.5-flash",
                            "GEMINI_CLI_NO_RELAUNCH": "true"}, turns=10, starts=3))
    else:
        print(f"Gemini CLI is not installed at {gemini} ('make e2e' installs it): left out")
    return found


class DirectClient:
    """The least an ACP client does: initialize, session/new, then prompt and read to the
    answer (refusing any request of the agent's) — no journal, no watchdog, no ledger."""

    def __init__(self, agent: Agent, workdir: Path, home_dir: Path) -> None:
        self.process = subprocess.Popen(agent.argv, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        cwd=workdir, text=True, start_new_session=True,
                                        env={"HOME": str(home_dir), "PATH": "/usr/bin:/bin",
                                             **agent.env})
        self.seq = 0
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        self.session = self.request("session/new", {"cwd": str(workdir),
                                                    "mcpServers": []})["sessionId"]

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, object]) -> dict[str, Any]:
        assert self.process.stdout is not None
        self.seq += 1
        self.send({"id": self.seq, "method": method, "params": params})
        for line in self.process.stdout:
            message = json.loads(line)
            if message.get("id") == self.seq and "method" not in message:
                return message["result"]  # type: ignore[no-any-return]
            if "method" in message and "id" in message:
                self.send({"id": message["id"], "error": {"code": -32601, "message": "no"}})
        raise SystemExit("the agent exited")

    def turn(self, text: str) -> None:
        self.request("session/prompt", {"sessionId": self.session,
                                        "prompt": [{"type": "text", "text": text}]})

    def close(self) -> None:
        os.killpg(self.process.pid, 9)
        self.process.wait()


def interleaved_turns(agent: Agent, work: Path, env: dict[str, str]
                      ) -> tuple[list[float], list[float]]:
    """A turn through teamctl, then one of the direct client on its own copy of the agent,
    turn about — on a shared machine both see the same load (ms, ms)."""
    from orchestrator import client, protocol

    ctl = Home(Path(env["TEAMCTL_HOME"]))

    def through(text: str) -> None:
        result = client.call(ctl, protocol.SEND, {"member": "qw", "text": text, "wait": True,
                                           "timeout": 120.0}, timeout=150)
        assert result["state"] == "answered", result

    with tempfile.TemporaryDirectory(prefix="tc-acp-direct-") as tmp:
        direct = DirectClient(agent, work, Path(tmp))
        through("warm up")
        direct.turn("warm up")
        samples: tuple[list[float], list[float]] = ([], [])
        for i in range(agent.turns):
            for run, times in ((through, samples[0]), (direct.turn, samples[1])):
                start = time.perf_counter()
                run(f"turn {i}")
                times.append((time.perf_counter() - start) * 1000)
        direct.close()
    return samples


def group_rss_mib(pgid: int) -> float:
    """The resident memory of every process in the group (the member's processes)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # after the name: state, ppid, pgrp, …, rss is the 22nd
            total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    return total / 2**20


def _team(env: dict[str, str], work: Path, agent: Agent) -> Path:
    team = Path(env["TEAMCTL_BENCH_DIR"]) / f"acp{agent.name}.toml"
    keys = {"runtime": "acp", "login": "isolated", "start_timeout": 120.0, **agent.member}
    team.write_text(f'[team]\nname = "acp{agent.name}"\nworkdir = "{work}"\n\n[[members]]\n'
                    'name = "qw"\n' + "".join(f"{k} = {inline_toml(v)}\n"
                                              for k, v in keys.items()))
    return team


def measure(agent: Agent) -> None:
    with tempfile.TemporaryDirectory(prefix="tc-acp-work-") as tmp:
        work = Path(tmp)
        with home() as env:
            team = _team(env, work, agent)
            starts = []
            for _ in range(agent.starts):
                start = time.perf_counter()
                teamctl(env, "launch", str(team))  # returns once the member is ready
                starts.append((time.perf_counter() - start) * 1000)
                teamctl(env, "stop", f"acp{agent.name}")
            teamctl(env, "launch", str(team))
            [row] = json.loads(teamctl(env, "status", "--json"))["teams"][0]["members"]
            assert row["readiness"] == "ready", row
            rss = group_rss_mib(row["pid"])
            through, direct = interleaved_turns(agent, work, env)
    what = agent.name or "the fake agent"
    print(f"ACP member on {what}: launch to ready median {median(starts):.0f} ms over "
          f"{agent.starts}; a turn through teamctl {median(through):.1f} ms vs direct "
          f"{median(direct):.1f} ms (median of {agent.turns}); the member's RSS {rss:.1f} MiB")
    prefix = f"acp_{agent.name}_" if agent.name else "acp_"
    figure(f"{prefix}launch_ready_ms", median(starts))
    figure(f"{prefix}turn_teamctl_ms", median(through))
    figure(f"{prefix}turn_direct_ms", median(direct))
    figure(f"{prefix}turn_overhead_ratio", median(through) / median(direct))
    figure(f"{prefix}member_rss_mib", rss)


def main() -> None:
    with ExitStack() as stack:
        api: dict[str, FakeProvider] = {"qwen": stack.enter_context(FakeChat()),
                                        "gemini": stack.enter_context(FakeGemini())}
        for agent in agents(api):
            measure(agent)


if __name__ == "__main__":
    main()
