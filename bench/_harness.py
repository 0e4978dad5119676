"""Shared bench plumbing: a private home, a team of fake members, the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

REPO = Path(__file__).resolve().parents[1]
FAKE_CLAUDE = REPO / "fixtures" / "bin" / "claude"
sys.path.insert(0, str(REPO))


def team_file(directory: Path, name: str, members: int) -> Path:
    lines = ["[team]", f'name = "{name}"']
    for i in range(members):
        lines += ["", "[[members]]", f'name = "m{i}"', 'runtime = "claude"',
                  'model = "claude-sonnet-4-5"', f'command = "{FAKE_CLAUDE}"']
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def home() -> Iterator[dict[str, str]]:
    from tests.support.driver import operator_home

    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        # a throwaway operator HOME (with a fake Claude login) for the daemon and for daemons
        # this process starts itself: fake members never touch the real ~/.claude
        fake_home = str(operator_home(Path(tmp) / "operator"))
        real_home = os.environ.get("HOME")
        os.environ["HOME"] = fake_home
        env = dict(os.environ, TEAMCTL_HOME=str(Path(tmp) / "home"), PYTHONPATH=str(REPO))
        env["TEAMCTL_BENCH_DIR"] = tmp
        try:
            yield env
        finally:
            teamctl(env, "stop", check=False)
            if real_home is not None:
                os.environ["HOME"] = real_home


def teamctl(env: dict[str, str], *args: str, check: bool = True) -> str:
    done = subprocess.run([sys.executable, "-m", "orchestrator", *args], env=env, text=True,
                          capture_output=True, timeout=300, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"teamctl {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values)


def figure(name: str, value: float) -> None:
    print(f"bench: {name} = {value:.3f}", flush=True)


def inline_toml(value: object) -> str:
    """A TOML inline value (tables, strings, numbers, booleans) for generated team files."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f'"{k}" = {inline_toml(v)}' for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def timed_sends(ctl: Any, member: str, runs: int) -> list[float]:
    """One warm-up turn, then ``runs`` ``send --wait`` round trips over the socket (ms)."""
    from orchestrator import client, protocol

    def send(text: str) -> None:
        result = client.call(ctl, protocol.SEND, {"member": member, "text": text, "wait": True,
                                           "timeout": 60.0}, timeout=90)
        assert result["state"] == "answered", result

    send("warm up")
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        send(f"turn {i}")
        samples.append((time.perf_counter() - start) * 1000)
    return samples
