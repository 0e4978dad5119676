"""Issue 2 figures: send --wait round trip (median of 50), daemon RSS with 10 fake members,
``teamctl --help`` wall time (beside ``python -c 'import click'`` in the same venv).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from _harness import figure, home, median, percentile, rss_mib, team_file, teamctl

from orchestrator import client, protocol
from orchestrator.paths import Home


def send_round_trip(runs: int = 50) -> None:
    with home() as env:
        teamctl(env, "launch", str(team_file(Path(env["TEAMCTL_BENCH_DIR"]), "rt", 1)))
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        internal, cli = [], []
        for i in range(runs):
            start = time.perf_counter()
            client.call(ctl, protocol.SEND, {"member": "m0", "text": f"ping {i}", "wait": True,
                                      "timeout": 30.0}, timeout=60)
            internal.append((time.perf_counter() - start) * 1000)
        for i in range(runs):
            start = time.perf_counter()
            teamctl(env, "send", "m0", f"cli ping {i}", "--wait")
            cli.append((time.perf_counter() - start) * 1000)
    print(f"send --wait over the socket: p50 {median(internal):.2f} ms, "
          f"p99 {percentile(internal, 99):.2f} ms ({runs} runs, fake claude)")
    print(f"teamctl send --wait (new CLI process): p50 {median(cli):.1f} ms, "
          f"p99 {percentile(cli, 99):.1f} ms")
    figure("send_wait_socket_p50_ms", median(internal))
    figure("send_wait_cli_p50_ms", median(cli))


def daemon_rss(members: int = 10) -> None:
    with home() as env:
        teamctl(env, "launch", str(team_file(Path(env["TEAMCTL_BENCH_DIR"]), "rss", members)))
        for i in range(members):
            teamctl(env, "send", f"m{i}", "warm up", "--wait")
        pid = int((Path(env["TEAMCTL_HOME"]) / "daemon.pid").read_text())
        value = rss_mib(pid)
    print(f"daemon RSS with {members} fake members (after one turn each): {value:.1f} MiB")
    figure(f"daemon_rss_{members}_members_mib", value)


def cli_help(runs: int = 20) -> None:
    def timed(argv: list[str]) -> float:
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            samples.append((time.perf_counter() - start) * 1000)
        return median(samples)

    help_ms = timed([str(Path(sys.executable).parent / "teamctl"), "--help"])
    click_ms = timed([sys.executable, "-c", "import click"])
    print(f"teamctl --help: median {help_ms:.1f} ms; python -c 'import click': "
          f"{click_ms:.1f} ms (ratio {help_ms / click_ms:.2f})")
    figure("cli_help_ms", help_ms)
    figure("cli_help_vs_import_click_ratio", help_ms / click_ms)


if __name__ == "__main__":
    send_round_trip()
    daemon_rss()
    cli_help()
