"""Issue 13: what teammates' messaging costs.

- ``teamctl mcp`` start-up: spawn → the answer to ``tools/list`` (the same server for every
  runtime; each CLI adds its own spawn around it), median of 10;
- the extra per-turn cost of messaging for a Codex member (codex starts the required MCP
  server on every ``exec``): the same real codex, messaging on and off, median of 15 turns each;
- a member's ``send_message`` to the recipient's stdin: the RPC the MCP server makes, then the
  journal write → the line on the recipient's stdin (fake claude members), median of 40.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import REPO, figure, home, inline_toml, median, teamctl, timed_sends
from bench_codex import REAL, provider_config
from bench_scale import events

from orchestrator import client
from orchestrator.paths import Home
from tests.e2e.fake_responses import FakeResponses

FAKE_CLAUDE = REPO / "fixtures" / "bin" / "claude"


def mcp_startup(runs: int = 10) -> None:
    requests = "".join(json.dumps(r) + "\n" for r in (
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25"}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "orchestrator", "mcp"], cwd=REPO,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(requests)
        process.stdin.flush()
        process.stdout.readline()
        assert '"tools"' in process.stdout.readline()
        samples.append((time.perf_counter() - start) * 1000)
        process.stdin.close()
        process.wait(timeout=10)
    print(f"teamctl mcp: spawn to the tools/list answer median {median(samples):.0f} ms "
          f"({runs} runs)")
    figure("mcp_startup_ms", median(samples))


def codex_turn_cost(runs: int = 15) -> None:
    if not REAL.exists():
        print("codex per-turn cost: skipped figure (the real codex is not installed: make e2e)")
        return
    with FakeResponses() as api, tempfile.TemporaryDirectory(prefix="tc-msg-") as tmp, \
            home() as env:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "cx.toml"
        members = "".join(
            f'\n[[members]]\nname = "{name}"\nruntime = "codex"\nmodel = "gpt-5.4-mini"\n'
            f'command = "{REAL}"\nmessaging = {flag}\n'
            'env = { FAKE_OPENAI_API_KEY = "sk-x" }\n'
            f"config = {inline_toml(provider_config(api))}\n"
            for name, flag in (("on", "true"), ("off", "false")))
        team.write_text(f'[team]\nname = "cx"\nworkdir = "{tmp}"\n{members}')
        teamctl(env, "launch", str(team))
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        on, off = timed_sends(ctl, "on", runs), timed_sends(ctl, "off", runs)
    print(f"a Codex turn with messaging (codex starts teamctl mcp, required): median "
          f"{median(on):.0f} ms; without: {median(off):.0f} ms; the MCP server costs "
          f"{median(on) - median(off):.0f} ms per turn")
    figure("codex_turn_messaging_extra_ms", median(on) - median(off))


def send_to_stdin(runs: int = 40) -> None:
    with home() as env:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "duo.toml"
        # sent from outside the lead's turns, yet the lead is busy with the routed replies: a
        # send during such a turn continues its chain, so the bench lifts the depth limit
        team.write_text('[team]\nname = "duo"\npair_cooldown = 0.0\nmax_messages_per_minute = 600'
                        "\nmax_chain_depth = 50\n" + "".join(
                            f'\n[[members]]\nname = "{n}"\nruntime = "claude"\n'
                            f'command = "{FAKE_CLAUDE}"\n' for n in ("lead", "rev")))
        teamctl(env, "launch", str(team))
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        token = json.loads((ctl.member_dir("duo", "lead") / "mcp.json").read_text())[
            "mcpServers"]["teamctl"]["env"]["TEAMCTL_MEMBER_TOKEN"]
        rpc, ids = [], []
        for i in range(runs):
            start = time.perf_counter()
            receipt = client.call(ctl, "member.send_message",
                                  {"token": token, "to": "rev", "text": f"hop {i}"})
            rpc.append((time.perf_counter() - start) * 1000)
            ids.append(receipt["id"])
            # the next hop only once this one was delivered: a latency, not a queue
            client.call(ctl, "send", {"member": "rev", "text": "settle", "wait": True,
                                      "timeout": 120.0}, timeout=180)
        sent = {str(e["message_id"]): float(e["journal_to_stdin_ms"])  # type: ignore[arg-type]
                for e in events(ctl) if e["event"] == "delivery_sent"
                and e.get("member") == "rev" and e.get("journal_to_stdin_ms") is not None}
    to_stdin = [sent[i] for i in ids if i in sent]
    print(f"send_message as a member: the RPC (journaled, receipt back) median "
          f"{median(rpc):.1f} ms; journal → the line on the recipient's stdin median "
          f"{median(to_stdin):.1f} ms ({len(to_stdin)} of {runs}, each to an idle recipient)")
    figure("send_message_rpc_ms", median(rpc))
    figure("send_message_to_stdin_ms", median(to_stdin))


if __name__ == "__main__":
    mcp_startup()
    send_to_stdin()
    codex_turn_cost()
