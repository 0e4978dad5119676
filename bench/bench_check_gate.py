"""Issue 44 figure: the board's check gate inside the owner's sandbox vs outside it.

A real daemon, three fake Claude members with ``[board] check = "make test"`` (a Makefile whose
``test`` does nothing): unsandboxed, sandboxed with the network on, sandboxed with the network
off (its egress relay in front of the check). Each is assigned ``RUNS`` tasks and completes
each through its MCP tool; the gate's own time — confining the command and running it to its
end — is the ``seconds`` of the daemon's ``task_check`` event. Median of ``RUNS`` each (the
first run of each member dropped: the daemon's first bubblewrap probe).

Each member completes its task through its own MCP server (the fake claude's ``MCP
task_complete`` line); the operator's send asks it to."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _harness import FAKE_CLAUDE, REPO, figure, home, median, teamctl

sys.path.insert(0, str(REPO))

from orchestrator import client, protocol
from orchestrator.paths import Home
from tests.support.driver import fakes_path

RUNS = 20
MEMBERS = {"plain": {"sandbox": "none"}, "boxed": {"sandbox": "process"},
           "boxed_off": {"sandbox": "process", "network": "off"}}


def _team(directory: Path) -> Path:
    lines = ["[team]", 'name = "bench"']
    for name, keys in MEMBERS.items():
        workdir = directory / name
        workdir.mkdir()
        (workdir / "Makefile").write_text("test:\n\t@true\n")
        lines += ["", "[[members]]", f'name = "{name}"', 'runtime = "claude"',
                  'model = "claude-sonnet-4-5"', f'command = "{FAKE_CLAUDE}"',
                  'permissions = "full"', f'workdir = "{workdir}"',
                  f'sandbox_ro = ["{REPO / "fixtures"}"]',
                  *(f'{key} = "{value}"' for key, value in keys.items())]
    lines += ["", "[board]", 'check = "make test"']
    path = directory / "bench.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _complete(ctl: Home, env: dict[str, str], member: str) -> None:
    """A task assigned to ``member``, completed by it through its MCP tool (the gate runs)."""
    task = teamctl(env, "task", "add", "bench", "--assign", member).strip().lstrip("T")
    result = client.call(ctl, protocol.SEND, {
        "member": member, "wait": True, "timeout": 60.0,
        "text": f'MCP task_complete {{"id": {task}, "summary": "done"}}'}, timeout=90)
    assert result["state"] == "answered", result


def _gate_seconds(log: Path, member: str) -> list[float]:
    events = (json.loads(line) for line in log.read_text().splitlines())
    return [e["seconds"] * 1000 for e in events
            if e.get("event") == "task_check" and e.get("owner") == member]


def main() -> None:
    with home() as env:
        env["PATH"] = fakes_path(env.get("PATH", ""))  # the fake's python3, not a shim
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        teamctl(env, "launch", str(_team(Path(env["TEAMCTL_BENCH_DIR"]))))
        for member in MEMBERS:
            for _ in range(RUNS + 1):
                _complete(ctl, env, member)
        log = ctl.logs / "teamctl.jsonl"
        found = {member: median(_gate_seconds(log, member)[1:]) for member in MEMBERS}
        figure("check_gate_ms_unsandboxed", found["plain"])
        figure("check_gate_ms_sandboxed", found["boxed"])
        figure("check_gate_ms_sandboxed_network_off", found["boxed_off"])
        figure("check_gate_sandbox_overhead_ms", found["boxed"] - found["plain"])


if __name__ == "__main__":
    main()
