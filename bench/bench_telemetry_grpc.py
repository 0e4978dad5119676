"""What OTLP over gRPC costs beside OTLP/HTTP (docs/telemetry.md, "gRPC"): the exporters'
import time and resident memory in a fresh interpreter, the size grpcio takes installed, and two
daemons side by side — one exporting over OTLP/HTTP, one over gRPC, each to its own local
receiver in this process (tests/support/otlp_receiver.py, otlp_grpc_receiver.py) — their RSS
and round trips over the same interleaved turns, then the 100-member fan-out over gRPC.

Members are driven as the operator drives them (requests on the daemon's socket)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path
from typing import TYPE_CHECKING

from _harness import figure, home, median, percentile, rss_mib, team_file
from bench_scale import daemon_pid
from bench_telemetry import _fan_exported, _round_trip

from orchestrator import client, protocol
from orchestrator.paths import Home
from tests.support.otlp_grpc_receiver import otlp_grpc_receiver
from tests.support.otlp_receiver import otlp_receiver

if TYPE_CHECKING:
    from tests.support.otlp_receiver import OtlpReceiver

_SDK = ("opentelemetry.sdk.metrics, opentelemetry.sdk.trace, opentelemetry.sdk.resources, "
        "opentelemetry.sdk.metrics.export")
_EXPORTERS = {"http": "opentelemetry.exporter.otlp.proto.http",
              "grpc": "opentelemetry.exporter.otlp.proto.grpc"}
# in a fresh interpreter with the SDK imported: the exporters' import (ms), then VmRSS (KiB)
# before and after it
_IMPORT = ("import time, re\n"
           "def rss():\n"
           "    return int(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read())[1])\n"
           "import {sdk}\n"
           "before = rss(); start = time.perf_counter()\n"
           "import {package}.trace_exporter, {package}.metric_exporter\n"
           "print((time.perf_counter() - start) * 1000, before, rss())\n")


def import_cost(runs: int = 9) -> None:
    for name, package in _EXPORTERS.items():
        code = _IMPORT.format(sdk=_SDK, package=package)
        ms, grown = [], []
        for _ in range(runs):
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, timeout=60).stdout.split()
            ms.append(float(out[0]))
            grown.append((int(out[2]) - int(out[1])) / 1024)
        print(f"the OTLP {name} exporters' import, the SDK already imported: median "
              f"{median(ms):.1f} ms (min {min(ms):.1f}, max {max(ms):.1f}), RSS +"
              f"{median(grown):.1f} MiB ({runs} fresh interpreters)")
        figure(f"telemetry_{name}_exporter_import_ms", median(ms))
        figure(f"telemetry_{name}_exporter_import_rss_mib", median(grown))
    files = distribution("grpcio").files or []
    size = sum(Path(f.locate()).stat().st_size for f in files if Path(f.locate()).is_file())
    print(f"grpcio {distribution('grpcio').version} installed: {size / 2**20:.1f} MiB")
    figure("telemetry_grpcio_installed_mib", size / 2**20)


def _launch(env: dict[str, str], members: int, receiver: OtlpReceiver, protocol_name: str
            ) -> Home:
    from orchestrator.config import load_team_file

    ctl = Home(Path(env["TEAMCTL_HOME"]))
    client.ensure_daemon(ctl)
    path = team_file(Path(env["TEAMCTL_BENCH_DIR"]), "t", members)
    path.write_text(path.read_text() + f'\n[telemetry]\notlp = {{ endpoint = "{receiver.url}", '
                    f'protocol = "{protocol_name}" }}\nmetric_interval = 5.0\n')
    config = load_team_file(path).model_dump(mode="json")
    client.call(ctl, protocol.LAUNCH, {"config": config, "file": str(path)}, timeout=600)
    return ctl


def daemons_side_by_side(runs: int = 200) -> None:
    """Two daemons at once, their round trips interleaved (the machine's noise falls on both
    alike): their RSS once every span of ``runs`` turns has arrived."""
    with otlp_receiver() as over_http, otlp_grpc_receiver() as over_grpc, \
            home() as env_http, home() as env_grpc:
        http = _launch(env_http, 1, over_http, "http/protobuf")
        grpc = _launch(env_grpc, 1, over_grpc, "grpc")
        _round_trip(http, "warm")
        _round_trip(grpc, "warm")
        took: dict[str, list[float]] = {"http": [], "grpc": []}
        for i in range(runs):
            took["http"].append(_round_trip(http, f"ping {i}"))
            took["grpc"].append(_round_trip(grpc, f"ping {i}"))
        for receiver in (over_http, over_grpc):
            receiver.wait_for(lambda r: len(r.spans) >= 2 * (runs + 1), 60)
        rss = {"http": rss_mib(daemon_pid(http)), "grpc": rss_mib(daemon_pid(grpc))}
        received = {"http": len(over_http.spans), "grpc": len(over_grpc.spans)}
    for name in ("http", "grpc"):
        print(f"over {name}: send --wait p50 {median(took[name]):.2f} ms, p99 "
              f"{percentile(took[name], 99):.2f} ms; daemon RSS {rss[name]:.1f} MiB after "
              f"{runs + 1} turns of 1 fake member; {received[name]} spans received")
        figure(f"telemetry_{name}_turn_p50_ms", median(took[name]))
        figure(f"telemetry_{name}_daemon_rss_1_member_mib", rss[name])


def grpc_fan_out(messages: int = 1000, members: int = 100) -> None:
    with otlp_grpc_receiver() as receiver, home() as env:
        ctl = _launch(env, members, receiver, "grpc")
        answered_s, exported_s, rss = _fan_exported(ctl, receiver, messages, members)
    rate = len(receiver.spans) / exported_s
    print(f"{messages} messages across {members} fake members over gRPC: answered in "
          f"{answered_s:.2f} s, {len(receiver.spans)} spans received in {exported_s:.2f} s "
          f"({rate:.0f} spans/s); daemon RSS {rss:.1f} MiB")
    figure("telemetry_grpc_spans_per_s_100_members", rate)
    figure("telemetry_grpc_daemon_rss_100_members_mib", rss)


if __name__ == "__main__":
    import_cost()
    daemons_side_by_side()
    grpc_fan_out()
