"""Issue 47, item 4: what teamctl itself starts beside each member's runtime, and what it costs
in memory — per process and per member, RSS (``VmRSS``) and PSS/USS
(``/proc/<pid>/smaps_rollup``: an interpreter's pages shared with other processes counted once
between them, which RSS counts in full for each).

Members are driven as the operator drives them (``teamctl send``); each one's message to a
teammate goes through its own MCP server, as its model calls the tool.

A team of the real CLIs against the fake provider APIs (tests/support/fake_*.py): Claude Code,
Codex (app-server), OpenCode and Qwen Code over ACP, each local and sandboxed (bubblewrap,
``network = "allowlist"``: the network relay runs too, or hands its listeners to the daemon;
Qwen with ``network = "on"``), and two more sandboxed Claude members, one with ``network =
"on"`` and one with ``"off"``. Each
member sends a teammate a message with teamctl's MCP tool (``DO_SEND``: its MCP server has
served a tool call), then the process tree under each member's pid is read and each process
classed as the runtime's own or teamctl's: its MCP relay (``teamctl mcp``), the sandbox's
network relay, bubblewrap.

Beside the team, in the same run: the command every member's runtime was given before this
change (``python -m orchestrator mcp``, the whole CLI's imports), started as a runtime starts
it, for the before → after comparison on this machine.

Needs the real CLIs (``make bench`` installs Claude, Codex, OpenCode and Qwen; or the
``TEAMCTL_E2E_*`` variables) and bubblewrap for the sandboxed half (without it: said, and only
the local half is measured)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import REPO, figure

from tests.support.driver import Teamctl, fakes_path, operator_home
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_chat import FakeChat
from tests.support.fake_responses import FakeResponses
from tests.support.real_members import (
    CACHE,
    claude_member,
    codex_member,
    opencode_member,
    qwen_member,
)

SANDBOXED = {"sandbox": "process", "permissions": "full", "network": "allowlist",
             "allow_hosts": ["pypi.org"]}
_MiB = 1024.0


@dataclass(frozen=True)
class Memory:
    """One process's memory, MiB."""

    rss: float
    pss: float
    uss: float


@dataclass(frozen=True)
class Proc:
    pid: int
    kind: str  # "mcp", "relay", "bwrap" (teamctl's) or "runtime" (the CLI's own)
    memory: Memory
    argv: str


def memory(pid: int) -> Memory:
    rss = pss = uss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / _MiB
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "Pss":
            pss = int(value.split()[0]) / _MiB
        elif key in ("Private_Clean", "Private_Dirty"):
            uss += int(value.split()[0]) / _MiB
    return Memory(rss, pss, uss)


def children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def kind(argv: list[str]) -> str:
    """Whose process this is: teamctl's (its MCP server, the sandbox's relay, bubblewrap) or
    the runtime's own."""
    joined = " ".join(argv)
    if argv and Path(argv[0]).name == "bwrap":  # its argv holds the relay's source too
        return "bwrap"
    if "sandbox_relay" in joined or "import relay" in joined:  # its source, or imported
        return "relay"
    if "orchestrator" in joined and ("mcp" in argv or "mcp_bridge" in joined):
        return "mcp"
    return "runtime"


def tree_of(pid: int, tree: dict[int, list[int]]) -> list[Proc]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        todo += tree.get(current, [])
        try:
            argv = Path(f"/proc/{current}/cmdline").read_bytes().split(b"\0")
            words = [w.decode(errors="replace") for w in argv if w]
            found.append(Proc(current, kind(words), memory(current), " ".join(words)[:90]))
        except (OSError, ValueError):
            continue
    return found


def members(bins: dict[str, Path], apis: dict[str, Any], sandbox: bool) -> list[dict[str, Any]]:
    extra: dict[str, Any] = dict(SANDBOXED) if sandbox else {}
    suffix = "-sb" if sandbox else ""
    built = [claude_member(f"claude{suffix}", bins["claude"], apis["anthropic"], **extra),
             codex_member(f"codex{suffix}", bins["codex"], apis["responses"], **extra),
             opencode_member(f"opencode{suffix}", bins["opencode"], apis["chat"],
                             model="fake/text-model", vision=False, **extra)]
    if "qwen" in bins:  # Qwen Code behind the relay answers no turn (its model requests
        # never reach the proxy): sandboxed, it keeps the host's network
        built.append(qwen_member(f"acp{suffix}", bins["qwen"], apis["chat"],
                                 **(extra and {**extra, "network": "on"})))
    if sandbox:  # the network's other two settings, on the same runtime
        for network in ("on", "off"):
            settings = {k: v for k, v in extra.items() if k != "allow_hosts"}
            built.append(claude_member(f"claude-{network}-sb", bins["claude"],
                                       apis["anthropic"], **{**settings, "network": network}))
    return built


def installed() -> dict[str, Path]:
    found = {}
    for name, var in (("claude", "TEAMCTL_E2E_CLAUDE"), ("codex", "TEAMCTL_E2E_CODEX"),
                      ("opencode", "TEAMCTL_E2E_OPENCODE"), ("qwen", "TEAMCTL_E2E_QWEN")):
        path = Path(os.environ.get(var) or CACHE / name / "node_modules" / ".bin" / name)
        if path.exists():
            found[name] = path
        elif name != "qwen":
            raise SystemExit(f"the real {name} CLI is not installed at {path}: make bench")
    return found


def sandbox_works() -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-net", "true"],
                          capture_output=True, check=False)
    return done.returncode == 0


def team_processes(ctl: Teamctl) -> dict[str, list[Proc]]:
    doc = ctl.rpc("status", {"team": None})["result"]
    tree = children()
    return {m["name"]: tree_of(m["pid"], tree) for t in doc["teams"] for m in t["members"]
            if m["pid"]}


def exercise(ctl: Teamctl, names: list[str]) -> None:
    """Each member messages the next with teamctl's MCP tool; every message delivered."""
    for i, name in enumerate(names):
        peer = names[(i + 1) % len(names)]
        done = ctl.run("send", name, f"DO_SEND {peer} hello from {name}", "--wait",
                       "--timeout", "180", timeout=240)
        if done.returncode != 0:
            raise SystemExit(f"{name}: {done.stderr}")
    for name in names:  # the routed messages and replies delivered too
        ctl.run("send", name, "settle", "--wait", "--timeout", "180", timeout=240)


def legacy_server(ctl: Teamctl) -> Memory:
    """``python -m orchestrator mcp`` — the command every member's runtime was given before
    item 4 — started as a runtime starts it (no member's token: it acts as nobody), after
    initialize and tools/list."""
    env = dict(ctl.env, TEAMCTL_MCP_HOME=str(ctl.home))
    server = subprocess.Popen([sys.executable, "-m", "orchestrator", "mcp"], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    try:
        for request in ({"method": "initialize", "params": {"protocolVersion": "2025-11-25"}},
                        {"method": "tools/list"}):
            server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, **request}).encode()
                               + b"\n")
            server.stdin.flush()
            server.stdout.readline()
        return memory(server.pid)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()


def report(processes: dict[str, list[Proc]]) -> dict[str, Memory]:
    """Print every teamctl process beside its member; teamctl's own total per member."""
    own: dict[str, Memory] = {}
    for name, procs in sorted(processes.items()):
        runtime = sum(p.memory.rss for p in procs if p.kind == "runtime")
        mine = [p for p in procs if p.kind != "runtime"]
        own[name] = total(mine)
        print(f"{name}: runtime's own processes {runtime:.1f} MiB RSS; teamctl's "
              f"{own[name].rss:.1f} MiB RSS, {own[name].pss:.1f} MiB PSS, "
              f"{own[name].uss:.1f} MiB USS")
        for p in mine:
            print(f"    {p.kind:6} pid {p.pid}: RSS {p.memory.rss:.1f}  PSS {p.memory.pss:.1f}"
                  f"  USS {p.memory.uss:.1f}  {p.argv}")
    return own


def total(procs: list[Proc]) -> Memory:
    return Memory(sum(p.memory.rss for p in procs), sum(p.memory.pss for p in procs),
                  sum(p.memory.uss for p in procs))


def summary(label: str, group: list[Memory], name: str | None) -> None:
    """At most this RSS, this PSS on average, per member of ``group`` (a figure if named)."""
    if not group:
        return
    rss, pss = max(m.rss for m in group), sum(m.pss for m in group) / len(group)
    print(f"{label}: at most {rss:.1f} MiB RSS, mean {pss:.1f} MiB PSS")
    if name is not None:
        figure(f"own_cost_{name}_rss_max_mib", rss)
        figure(f"own_cost_{name}_pss_mean_mib", pss)


def main() -> None:
    bins = installed()
    sandboxed = sandbox_works()
    if not sandboxed:
        print("bubblewrap cannot run here: the sandboxed members are not measured")
    with ExitStack() as stack:
        apis = {"anthropic": stack.enter_context(FakeAnthropic()),
                "responses": stack.enter_context(FakeResponses()),
                "chat": stack.enter_context(FakeChat())}
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tc-own-")))
        (tmp / "work").mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TEAMCTL_")}
        env.update(TEAMCTL_HOME=str(tmp / "home"), PYTHONPATH=str(REPO),
                   HOME=str(operator_home(tmp / "operator")), PATH=fakes_path(env["PATH"]),
                   TEAMCTL_OPENCODE_STOP_GRACE="0")
        ctl = Teamctl(tmp / "home", tmp / "work", env)
        stack.callback(ctl.shutdown)
        team = members(bins, apis, False) + (members(bins, apis, True) if sandboxed else [])
        start = time.monotonic()
        done = ctl.run("launch", str(ctl.write_team("own", team)), timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"launch: {done.stdout}{done.stderr}")
        print(f"{len(team)} members launched in {time.monotonic() - start:.1f} s")
        exercise(ctl, [m["name"] for m in team])
        processes = team_processes(ctl)
        own = report(processes)
        legacy = legacy_server(ctl)
    cut = {m["name"] for m in team if m.get("network") in ("allowlist", "off")}
    boxed = {m["name"] for m in team if m.get("sandbox")}
    print(f"before (python -m orchestrator mcp, as every runtime started it): RSS "
          f"{legacy.rss:.1f} MiB, PSS {legacy.pss:.1f} MiB, USS {legacy.uss:.1f} MiB")
    mcp = [total([p for p in procs if p.kind == "mcp"]) for procs in processes.values()]
    summary("teamctl mcp, every member (target: at most 10 MiB RSS)", mcp, "mcp")
    summary("teamctl's own per local member", [m for name, m in own.items()
                                               if name not in boxed], "local")
    summary("teamctl's own per sandboxed member, network on (bubblewrap counted)",
            [m for name, m in own.items() if name in boxed and name not in cut],
            "sandboxed_net_on")
    summary("teamctl's own per sandboxed member, network cut (its relay and bubblewrap "
            "counted)", [m for name, m in own.items() if name in cut], "sandboxed_net_cut")
    summary("the same, bubblewrap apart (the MCP relay and the network relay: what teamctl "
            "runs beside the runtime inside the sandbox)",
            [total([p for p in processes[name] if p.kind in ("mcp", "relay")]) for name in cut],
            "sandboxed_net_cut_relays")
    for name in sorted(cut):
        relays = [p for p in processes[name] if p.kind == "relay"]
        print(f"{name}: {len(relays)} network relay process(es) beside the runtime"
              + ("" if relays else " (its listeners handed to the daemon)"))
    figure("own_cost_legacy_mcp_rss_mib", legacy.rss)
    figure("own_cost_legacy_mcp_pss_mib", legacy.pss)


if __name__ == "__main__":
    main()
