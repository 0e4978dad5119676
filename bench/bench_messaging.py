"""Issue 13: what teammates' messaging costs.

- ``teamctl mcp`` start-up: spawn → the answer to ``tools/list`` (the same server for every
  runtime; each CLI adds its own spawn around it), median of 10 — measured from outside, as a
  process start (the tools/list answer needs no member);
- the extra per-turn cost of messaging for a Codex member (codex starts the required MCP
  server on every ``exec``): the same real codex, messaging on and off, median of 15 turns each
  — the members driven by ``send --wait``, codex calling nothing;
- a member's ``send_message`` to the recipient's stdin, median of 40. Driven as a member drives
  it: from inside the member, through its own MCP server. ``lead``'s runtime is a wrapper that
  forks, before it becomes the fake claude, a child in the member's own process tree that starts
  ``teamctl mcp`` from the member's MCP config (as a CLI keeps one server for its session) and
  calls ``send_message`` on it when the bench says so, timing each tool call (the server's RPC:
  journaled, receipt back). The journal write → the line on the recipient's stdin is the
  daemon's own figure (``delivery_sent``). A member's token from any process outside its tree
  is refused (``mcp_token_not_yours``): the bench's own process never calls as a member.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from _harness import REPO, figure, home, inline_toml, median, teamctl, timed_sends
from bench_codex import REAL, provider_config
from bench_scale import events

from orchestrator import client, protocol
from orchestrator.paths import Home
from tests.support.fake_responses import FakeResponses
from tests.support.scripts import python_script

FAKE_CLAUDE = REPO / "fixtures" / "bin" / "claude"


def mcp_startup(runs: int = 10) -> None:
    """``teamctl mcp`` as a runtime starts it (the relay, ``python -I -S``) until it has
    answered ``tools/list`` — the daemon's MCP server answering through it."""
    from orchestrator.contracts import McpServer

    requests = "".join(json.dumps(r) + "\n" for r in (
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25"}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    samples = []
    with home() as env:
        client.ensure_daemon(Home(Path(env["TEAMCTL_HOME"])))
        relay_env = {"TEAMCTL_MCP_HOME": env["TEAMCTL_HOME"]}  # no member's: it lists only
        for _ in range(runs):
            start = time.perf_counter()
            process = subprocess.Popen([sys.executable, "-I", "-S", str(McpServer.RELAY)],
                                       cwd=REPO, env=relay_env, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
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


# lead's runtime: before it becomes the fake claude (exec, same pid) it forks the member-side
# client: teamctl mcp from lead's own MCP config, one session, a send_message per line the
# bench writes on its socket, answered with the tool call's time and text
MEMBER_CLIENT = """import json, os, socket, subprocess, sys, time
if "--mcp-config" in sys.argv and os.fork() == 0:
    config = json.load(open(sys.argv[sys.argv.index("--mcp-config") + 1]))
    server = config["mcpServers"]["teamctl"]
    mcp = subprocess.Popen([server["command"], *server.get("args", [])], text=True,
                           env={{**os.environ, **server.get("env", {{}})}},
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    def ask(number, method, params):
        mcp.stdin.write(json.dumps({{"jsonrpc": "2.0", "id": number, "method": method,
                                    "params": params}}) + "\\n")
        mcp.stdin.flush()
        while (answer := json.loads(mcp.stdout.readline())).get("id") != number:
            pass
        return answer
    ask(0, "initialize", {{"protocolVersion": "2025-11-25", "capabilities": {{}},
                          "clientInfo": {{"name": "bench", "version": "0"}}}})
    mcp.stdin.write(json.dumps({{"jsonrpc": "2.0", "method": "notifications/initialized"}})
                    + "\\n")
    ask(1, "tools/list", {{}})
    bench = socket.socket(socket.AF_UNIX)
    bench.connect({sock!r})
    lines = bench.makefile("rw", buffering=1)
    for number, line in enumerate(lines, 2):
        start = time.perf_counter()
        call = {{"name": "send_message", "arguments": json.loads(line)}}
        answer = ask(number, "tools/call", call)
        lines.write(json.dumps([(time.perf_counter() - start) * 1000, answer["result"]]) + "\\n")
    os._exit(0)
os.execv({claude!r}, [{claude!r}, *sys.argv[1:]])
"""


def send_to_stdin(runs: int = 40) -> None:
    with home() as env:
        tmp = Path(env["TEAMCTL_BENCH_DIR"])
        wrapper = python_script(tmp / "lead-runtime", MEMBER_CLIENT.format(
            sock=str(tmp / "bench.sock"), claude=str(FAKE_CLAUDE)))
        team = tmp / "duo.toml"
        # the lead is busy with the routed replies: a send during such a turn continues its
        # chain, so the bench lifts the depth limit
        team.write_text('[team]\nname = "duo"\npair_cooldown = 0.0\nmax_messages_per_minute = 600'
                        "\nmax_chain_depth = 50\n" + "".join(
                            f'\n[[members]]\nname = "{n}"\nruntime = "claude"\n'
                            f'command = "{c}"\n' for n, c in (("lead", wrapper),
                                                               ("rev", FAKE_CLAUDE))))
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(tmp / "bench.sock"))
            listener.listen(1)
            listener.settimeout(120)
            teamctl(env, "launch", str(team))
            ctl = Home(Path(env["TEAMCTL_HOME"]))
            member, _ = listener.accept()
            with member, member.makefile("rw", buffering=1) as lead:
                member.settimeout(120)
                rpc, ids = hops(ctl, lead, runs)
        sent = {str(e["message_id"]): float(e["journal_to_stdin_ms"])  # type: ignore[arg-type]
                for e in events(ctl) if e["event"] == "delivery_sent"
                and e.get("member") == "rev" and e.get("journal_to_stdin_ms") is not None}
    to_stdin = [sent[i] for i in ids if i in sent]
    assert len(to_stdin) == runs, f"{len(to_stdin)} of {runs} hops reached rev's stdin"
    print(f"send_message as a member (its tool call through its own teamctl mcp: the RPC, "
          f"journaled, receipt back) median {median(rpc):.1f} ms; journal → the line on the "
          f"recipient's stdin median {median(to_stdin):.1f} ms ({runs} hops, each to an idle "
          "recipient)")
    figure("send_message_rpc_ms", median(rpc))
    figure("send_message_to_stdin_ms", median(to_stdin))


def hops(ctl: Home, lead: TextIO, runs: int) -> tuple[list[float], list[str]]:
    """``runs`` send_message calls lead's client makes on the bench's word: their times and
    message ids. The next hop only once this one was delivered: a latency, not a queue."""
    rpc, ids = [], []
    for i in range(runs):
        lead.write(json.dumps({"to": "rev", "text": f"hop {i}"}) + "\n")
        lead.flush()
        took, result = json.loads(lead.readline())
        text = result["content"][0]["text"]
        assert not result.get("isError") and text.startswith("queued as "), result
        rpc.append(took)
        ids.append(text.split()[2])
        client.call(ctl, protocol.SEND, {"member": "rev", "text": "settle", "wait": True,
                                  "timeout": 120.0}, timeout=180)
    return rpc, ids


if __name__ == "__main__":
    mcp_startup()
    send_to_stdin()
    codex_turn_cost()
