"""Issue 47 figure: a member's memory-kill → its next message answered.

Five fake Claude members, each with ``memory_max = "64M"`` and told to hold 400 MiB in their
first turn (``FAKE_CLAUDE_ALLOCATE_ON_TURN``): the kernel's OOM killer ends each inside its own
cgroup (docs/operations.md, "A ceiling per teammate"). For each, one after another: the message
that kills it is sent; once the daemon has seen the process end (its ``member_exited``, logged
after ``member_memory_exceeded``), a new message is sent with ``--wait``. Two figures, medians of
the five, from that exit:

- ``ceiling_kill_to_continued_ms``: the cut turn continued and answered (``delivery_answered``
  of the message that killed it) — the restart policy's first delay (``backoff``'s first, 1 s
  by default, ±10 %) included, as a user sees it;
- ``ceiling_kill_to_next_answered_ms``: the new message answered (after the continued one: a
  member's queue is in order).

Then the same on an SSH host (three members on a real sshd at 127.0.0.1 whose user was given a
v1 memory cgroup, docs/scaling.md "A ceiling on the host"): ``ceiling_ssh_kill_to_continued_ms``,
``ceiling_ssh_kill_to_next_answered_ms``, and what a ceiling adds to each start there — the
cgroup made (``ceiling_ssh_make_ms``) and read and removed (``ceiling_ssh_close_ms``) by the
remote side through the ControlMaster, median of 20.

Needs a cgroup the daemon can make (cgroup v1's memory hierarchy, as on this project's
machines, or a delegated v2 subtree), and root for the SSH host's throwaway user. Members are
driven as the operator drives them (the CLI); nothing calls as a member.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from _harness import FAKE_CLAUDE, figure, home, median, teamctl

MEMBERS = 5
SSH_MEMBERS = 3
ROUND_TRIPS = 20


def _ts(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def _events(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _wait_for(log: Path, found: object, what: str) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for event in _events(log):
            if found(event):  # type: ignore[operator]
                return event
        time.sleep(0.02)
    raise SystemExit(f"bench_ceilings: no {what} within 60 s")


def _hogs(env: dict[str, str], team: Path, members: list[str]) -> tuple[list[float],
                                                                        list[float]]:
    """Each member killed past its ceiling in turn: from its exit to its cut turn continued,
    and to its next message answered (ms)."""
    continued, next_answered = [], []
    teamctl(env, "launch", str(team), "--timeout", "120")
    log = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
    for member in members:
        killing = teamctl(env, "send", member, "hold 400 MiB").strip()
        exited = _wait_for(log, lambda e, m=member: e.get("event") == "member_exited"
                           and e.get("member") == m, f"{member}'s exit")
        assert str(exited.get("reason", "")).startswith("memory_max 64 MiB exceeded"), exited
        teamctl(env, "send", member, "are you back?", "--wait", "--timeout", "60")
        answered_at = time.time()
        cut = _wait_for(log, lambda e, k=killing: e.get("event") == "delivery_answered"
                        and e.get("message_id") == k, f"{member}'s continued turn")
        continued.append((_ts(cut) - _ts(exited)) * 1000)
        next_answered.append((answered_at - _ts(exited)) * 1000)
        print(f"{member}: killed (peak in member_memory_exceeded), continued "
              f"{continued[-1]:.0f} ms, next message answered {next_answered[-1]:.0f} ms "
              "after the exit", flush=True)
    teamctl(env, "stop", "ceil")
    return continued, next_answered


def _member(i: int, **extra: str) -> list[str]:
    return ["", "[[members]]", f'name = "hog{i}"', 'runtime = "claude"',
            'model = "claude-sonnet-4-5"', f'command = "{FAKE_CLAUDE}"',
            *(f'{key} = "{value}"' for key, value in extra.items()),
            'env = { FAKE_CLAUDE_ALLOCATE_ON_TURN = "1", FAKE_CLAUDE_ALLOCATE_MIB = "400", '
            'ANTHROPIC_API_KEY = "sk-ant-bench-0000" }']


def here() -> None:
    with home() as env:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "ceil.toml"
        lines = ["[team]", 'name = "ceil"', 'memory_max = "64M"']
        for i in range(MEMBERS):
            lines += _member(i)
        team.write_text("\n".join(lines) + "\n")
        continued, next_answered = _hogs(env, team, [f"hog{i}" for i in range(MEMBERS)])
    figure("ceiling_kill_to_continued_ms", median(continued))
    figure("ceiling_kill_to_next_answered_ms", median(next_answered))


def over_ssh() -> None:
    """The same on an SSH host (a real sshd on 127.0.0.1 whose user was given a v1 memory
    cgroup: tests/support/sshd.py), and what a ceiling adds to each start and end there: the
    remote side's ``make`` and ``close`` through the master, median of ROUND_TRIPS."""
    from tests.support.sshd import sshd

    with home() as env, sshd(delegate=("memory",)) as box:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "ceil.toml"
        lines = ["[team]", 'name = "ceil"', 'memory_max = "64M"']
        for i in range(SSH_MEMBERS):
            lines += _member(i, host="box", login="isolated")
        options = ", ".join(f'"{o}"' for o in box.host()["ssh_options"])
        lines += ["", "[hosts.box]", 'address = "127.0.0.1"', f"port = {box.port}",
                  f'user = "{box.user}"', f'identity_file = "{box.key}"',
                  f"ssh_options = [{options}]"]
        team.write_text("\n".join(lines) + "\n")
        continued, next_answered = _hogs(env, team, [f"hog{i}" for i in range(SSH_MEMBERS)])
        make, close = anyio.run(_round_trips, box)
    print(f"on an SSH host: continued {median(continued):.0f} ms, next message answered "
          f"{median(next_answered):.0f} ms after the exit (median of {SSH_MEMBERS}); a "
          f"ceiling's cgroup made there {median(make):.0f} ms, read and removed "
          f"{median(close):.0f} ms per start (median of {ROUND_TRIPS}, through the master)")
    figure("ceiling_ssh_kill_to_continued_ms", median(continued))
    figure("ceiling_ssh_kill_to_next_answered_ms", median(next_answered))
    figure("ceiling_ssh_make_ms", median(make))
    figure("ceiling_ssh_close_ms", median(close))


async def _round_trips(box: Any) -> tuple[list[float], list[float]]:
    from orchestrator.ceilings import Ceiling
    from runtimes.hosts.ssh.host import SshHost, SshTarget

    with tempfile.TemporaryDirectory(prefix="tc-") as control:
        host = SshHost(SshTarget("box", "127.0.0.1", box.user, box.port, str(box.key),
                                 tuple(box.host()["ssh_options"])), Path(control),
                       "bench", "ceil", "rt", Path(control) / "state")
        make, close = [], []
        try:
            for i in range(ROUND_TRIPS + 1):
                start = time.perf_counter()
                await host.make_cgroup("teamctl-bench", "ceil.rt", Ceiling(memory_max=64 << 20))
                made = time.perf_counter()
                await host.close_cgroup(5.0)
                if i:  # the first makes the master
                    make.append((made - start) * 1000)
                    close.append((time.perf_counter() - made) * 1000)
        finally:
            await host.close()
    return make, close


def main() -> None:
    here()
    over_ssh()


if __name__ == "__main__":
    main()
