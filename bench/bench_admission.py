"""Issue 47 item 2 figure: 50 fake members whose runtimes each hold 250 MiB, on this machine
(~24 GB): with a reserve that leaves room for only part of them, none starts past the reserve
and none is killed by the host's OOM killer; the rest wait, named in status.

First one member of the kind is launched alone and stopped: its measured peak is journaled and
is what the 50 are expected to take (``learned``). Then the reserve is set to what is available
now less room for ``FIT`` of them, and the team of 50 launched. Reported: how many started,
how many wait, the admission log's own account of each start (what was available, held for
members starting, the reserve, what it needed), this machine's ``MemAvailable`` once they
settled against the reserve, and the OOM killer's count (/proc/vmstat ``oom_kill``, before and
after; dmesg may be closed to us — the counter is the whole machine's, cgroup kills included)
with the members' own exits (``member_exited``: none may have ended).
Usage: ``bench_admission.py [MEMBERS] [FIT]`` (default 50 and 20).

Members are driven as the operator drives them (the CLI); the daemon reads this machine's own
/proc/meminfo and /proc/pressure/memory.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from _harness import FAKE_CLAUDE, figure, home, teamctl

HOLD_MIB = 250
MiB, GiB = 2**20, 2**30


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise SystemExit(f"bench_admission: no {key} in /proc/meminfo")


def _oom_kills() -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return -1  # a kernel without the counter


def _team(directory: Path, name: str, members: int, reserve: str) -> Path:
    lines = ["[team]", f'name = "{name}"', f'memory_reserve = "{reserve}"']
    for i in range(members):
        lines += ["", "[[members]]", f'name = "m{i}"', 'runtime = "claude"',
                  f'command = "{FAKE_CLAUDE}"', "start_timeout = 120.0",
                  f'env = {{ FAKE_CLAUDE_HOLD_MB = "{HOLD_MIB}" }}']
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _events(env: dict[str, str], name: str) -> list[dict[str, Any]]:
    log = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
    if not log.exists():
        return []
    return [e for line in log.read_text().splitlines() if (e := json.loads(line))["event"] == name]


def _members(env: dict[str, str]) -> list[dict[str, Any]]:
    doc = json.loads(teamctl(env, "status", "--json"))
    return [m for t in doc["teams"] for m in t["members"]]


def _settled(env: dict[str, str], deadline: float = 600.0) -> list[dict[str, Any]]:
    """The members once none is starting and who runs has not changed for 5 s (a start
    admitted in between is counted)."""
    end, last, since = time.monotonic() + deadline, None, time.monotonic()
    while time.monotonic() < end:
        members = _members(env)
        shape = sorted((m["name"], m["launch"], m["readiness"]) for m in members)
        if shape != last:
            last, since = shape, time.monotonic()
        elif not any(m["launch"] in ("pending", "starting") for m in members) \
                and time.monotonic() - since >= 5.0:
            return members
        time.sleep(0.5)
    raise SystemExit("bench_admission: the members did not settle within the deadline")


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    fit = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    oom_before = _oom_kills()
    with home() as env:
        directory = Path(env["TEAMCTL_BENCH_DIR"])
        teamctl(env, "launch", str(_team(directory, "learn", 1, "1G")))
        # the peak is journaled at once (measured when it is ready), and again at its stop
        teamctl(env, "stop", "learn")
        [learned] = [e["peak_bytes"] for e in _events(env, "member_footprint")][-1:]
        print(f"a member holding {HOLD_MIB} MiB: its process tree peaked at "
              f"{learned / MiB:.0f} MiB (journaled: what the next ones expect)", flush=True)
        available = _meminfo("MemAvailable")
        reserve_mib = int((available - fit * learned) / MiB)
        print(f"MemTotal {_meminfo('MemTotal') / GiB:.1f} GiB, MemAvailable "
              f"{available / GiB:.1f} GiB; memory_reserve = \"{reserve_mib}M\" "
              f"({reserve_mib / 1024:.1f} GiB): room for ~{fit} of {count}", flush=True)
        started_at = time.monotonic()
        # exit 0: members waiting for memory have not failed
        teamctl(env, "launch", str(_team(directory, "fifty", count, f"{reserve_mib}M")))
        launched_in = time.monotonic() - started_at
        members = _settled(env)
        available_after = _meminfo("MemAvailable")
        running = [m for m in members if m["readiness"] in ("ready", "busy")]
        waiting = [m for m in members if m["launch"] == "waiting"]
        admitted = [e for e in _events(env, "member_admitted") if e["team"] == "fifty"]
        past = [e for e in admitted if e["available_bytes"] - e["starting_bytes"]
                - e["reserve_bytes"] < e["needs_bytes"]]
        killed = _events(env, "member_exited")
        peaks = {e["member"]: e["peak_bytes"] for e in _events(env, "member_footprint")
                 if e["team"] == "fifty"}
        print(f"launch returned in {launched_in:.1f} s: {len(running)} started, "
              f"{len(waiting)} waiting for memory, {count - len(running) - len(waiting)} "
              "other", flush=True)
        if waiting:
            print(f"  e.g. {waiting[-1]['name']}: {waiting[-1]['waiting']}", flush=True)
        print(f"admitted past the reserve by the daemon's own account: {len(past)} of "
              f"{len(admitted)}", flush=True)
        print(f"the started members' process trees hold {sum(peaks.values()) / GiB:.2f} GiB "
              f"({len(peaks)} measured); the room above the reserve at launch was "
              f"{(available / MiB - reserve_mib) / 1024:.2f} GiB", flush=True)
        print(f"MemAvailable once settled: {available_after / GiB:.2f} GiB, the reserve "
              f"{reserve_mib / 1024:.2f} GiB: {(available_after / MiB - reserve_mib):+.0f} MiB "
              "(the other processes of this shared machine move it too: each start was "
              "checked against MemAvailable as it was then)", flush=True)
        oom_after = _oom_kills()
        print(f"OOM killer: oom_kill {oom_before} before, {oom_after} after; members that "
              f"exited: {len(killed)}", flush=True)
        teamctl(env, "stop", "fifty")
    figure("admission_learned_footprint_mib", learned / MiB)
    figure("admission_started", len(running))
    figure("admission_waiting", len(waiting))
    figure("admission_started_past_reserve", len(past))
    figure("admission_oom_kills", oom_after - oom_before)
    figure("admission_members_exited", len(killed))
    if past or oom_after != oom_before or killed or len(running) + len(waiting) != count:
        raise SystemExit("bench_admission: a member started past the reserve, was killed, or "
                         "neither started nor waits")


if __name__ == "__main__":
    main()
