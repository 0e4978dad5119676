"""Issue 29a figures: a member's start with and without ``sandbox = "process"`` (the fake Claude
on a real daemon: ``member_starting`` → ``member_ready`` in the daemon's log, median of 20
restarts each), and a turn's round trip (``send --wait``) inside the sandbox and outside it.

``--real``: the same start for each real CLI (``make e2e`` installs them; Claude, Codex and
OpenCode against the e2e fake APIs, ``permissions = "full"``), median of ``REAL_RUNS``
restarts each with and without the sandbox (5: a real CLI's start is seconds, not ms);
``--only claude`` for one of them, ``--runs N`` for another count (issue 44's figure: the real
Claude's start, median of 20, before and after the private dir's split).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _harness import FAKE_CLAUDE, REPO, figure, home, median, teamctl, timed_sends

sys.path.insert(0, str(REPO))

from orchestrator import client, protocol
from orchestrator.paths import Home
from tests.support.driver import fakes_path

if TYPE_CHECKING:
    from collections.abc import Callable

RUNS = 20
REAL_RUNS = 5


def _team(directory: Path) -> Path:
    lines = ["[team]", 'name = "bench"']
    for name, sandbox in (("plain", "none"), ("boxed", "process")):
        lines += ["", "[[members]]", f'name = "{name}"', 'runtime = "claude"',
                  'model = "claude-sonnet-4-5"', f'command = "{FAKE_CLAUDE}"',
                  f'sandbox = "{sandbox}"', f'sandbox_ro = ["{REPO / "fixtures"}"]']
    path = directory / "bench.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _starts(log: Path, member: str) -> list[float]:
    """Each launch's member_starting → member_ready (ms), from the daemon's log."""
    starting: dict[int, float] = {}
    found = []
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event.get("member") != member:
            continue
        at = datetime.fromisoformat(event["ts"]).timestamp()
        if event["event"] == "member_starting":
            starting[event["epoch"]] = at
        elif event["event"] == "member_ready" and event["epoch"] in starting:
            found.append((at - starting[event["epoch"]]) * 1000)
    return found


def _wait_ready(ctl: Home, member: str, epoch: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        doc = client.call(ctl, protocol.STATUS, {"team": "bench"})
        state = next(m for m in doc["teams"][0]["members"] if m["name"] == member)
        if state["epoch"] >= epoch and state["readiness"] == "ready":
            return
        time.sleep(0.02)
    raise SystemExit(f"{member} not ready again within 60 s")


def main() -> None:
    with home() as env:
        env["PATH"] = fakes_path(env.get("PATH", ""))  # the fake's python3, not a shim
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        teamctl(env, "launch", str(_team(Path(env["TEAMCTL_BENCH_DIR"]))))
        _restarts(ctl, ["plain", "boxed"], RUNS)
        log = ctl.logs / "teamctl.jsonl"
        plain, boxed = median(_starts(log, "plain")[1:]), median(_starts(log, "boxed")[1:])
        figure("member_start_ms_fake_claude", plain)
        figure("member_start_ms_fake_claude_sandboxed", boxed)
        figure("sandbox_start_overhead_ms", boxed - plain)
        turn_plain = median(timed_sends(ctl, "plain", RUNS))
        turn_boxed = median(timed_sends(ctl, "boxed", RUNS))
        figure("turn_ms_fake_claude", turn_plain)
        figure("turn_ms_fake_claude_sandboxed", turn_boxed)
        figure("sandbox_turn_overhead_ms", turn_boxed - turn_plain)


def _restarts(ctl: Home, members: list[str], runs: int) -> None:
    for member in members:
        for run in range(runs):
            client.call(ctl, protocol.RESTART, {"team": "bench", "member": member})
            _wait_ready(ctl, member, run + 2)


def real() -> None:
    """Each real CLI's start (member_starting → member_ready), plain and sandboxed."""
    from contextlib import ExitStack

    from tests.support import real_members as e2e
    from tests.support.driver import team_toml
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

    cache = REPO / ".cache" / "e2e"
    with home() as env, ExitStack() as stack:
        claude, codex, chat = (stack.enter_context(api()) for api in
                               (FakeAnthropic, FakeResponses, FakeChat))
        members = []
        only = _option("--only")
        runtimes = [only] if only else ["claude", "codex", "opencode"]
        made: dict[str, tuple[Callable[..., dict[str, Any]], object, dict[str, Any]]] = {
            "claude": (e2e.claude_member, claude, {}),
                "codex": (e2e.codex_member, codex, {}),
                "opencode": (e2e.opencode_member, chat,
                             {"model": "fake/text-model", "vision": False})}
        for sandbox in ("none", "process"):
            for runtime in runtimes:
                make, api, own = made[runtime]
                members.append(make(f"{runtime}-{sandbox}",
                                    cache / f"{runtime}/node_modules/.bin/{runtime}", api,
                                    sandbox=sandbox, permissions="full", **own))
        path = Path(env["TEAMCTL_BENCH_DIR"]) / "bench.toml"
        path.write_text(team_toml("bench", members))
        env["TEAMCTL_OPENCODE_STOP_GRACE"] = "0"
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        teamctl(env, "launch", str(path))
        _restarts(ctl, [str(m["name"]) for m in members], int(_option("--runs") or REAL_RUNS))
        log = ctl.logs / "teamctl.jsonl"
        for runtime in runtimes:
            plain = median(_starts(log, f"{runtime}-none")[1:])
            boxed = median(_starts(log, f"{runtime}-process")[1:])
            figure(f"member_start_ms_real_{runtime}", plain)
            figure(f"member_start_ms_real_{runtime}_sandboxed", boxed)


def _option(name: str) -> str | None:
    args = sys.argv[1:]
    return args[args.index(name) + 1] if name in args[:-1] else None


if __name__ == "__main__":
    if "--real" in sys.argv[1:]:
        real()
    else:
        main()
