"""Issue 29 (SSH hosts) figures: a member's start on an SSH host (a real sshd on 127.0.0.1,
tests/support/sshd.py, a throwaway user) with and without ``sandbox = "process"`` — the fake Claude,
``member_starting`` → ``member_ready`` in the daemon's log, median of ``RUNS`` restarts each —
and with ``network = "off"`` (its egress proxy forwarded too); a turn's round trip each way.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import sys
from pathlib import Path

from _harness import FAKE_CLAUDE, REPO, figure, home, median, teamctl, timed_sends
from bench_sandbox import _restarts, _starts

sys.path.insert(0, str(REPO))

from orchestrator.paths import Home
from tests.support.driver import team_toml
from tests.support.sshd import sshd

RUNS = 5
MEMBERS = {"plain": {}, "boxed": {"sandbox": "process"},
           "boxed-off": {"sandbox": "process", "network": "off"}}


def _member(name: str, **extra: object) -> dict[str, object]:
    return {"name": name, "runtime": "claude", "model": "claude-sonnet-4-5",
            "command": str(FAKE_CLAUDE), "login": "isolated", "host": "box",
            "env": {"ANTHROPIC_API_KEY": "sk-ant-bench-0000"},
            "sandbox_ro": [str(REPO / "fixtures")], **extra}


def main() -> None:
    with sshd() as box, home() as env:
        members = [_member(name, **extra) for name, extra in MEMBERS.items()]
        path = Path(env["TEAMCTL_BENCH_DIR"]) / "bench.toml"
        path.write_text(team_toml("bench", members, hosts={"box": box.host()}))
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        teamctl(env, "launch", str(path))
        _restarts(ctl, list(MEMBERS), RUNS)
        log = ctl.logs / "teamctl.jsonl"
        for name in MEMBERS:
            figure(f"ssh_member_start_ms_{name}", median(_starts(log, name)[1:]))
            figure(f"ssh_turn_ms_{name}", median(timed_sends(ctl, name, RUNS * 4)))
        teamctl(env, "stop", "bench")


if __name__ == "__main__":
    main()
