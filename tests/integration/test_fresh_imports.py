"""What a fresh interpreter loads, and what that costs: the daemon's start loads no runtime
adapter, no OpenTelemetry SDK and no gRPC until a member or a team needs them, and builds no
model at import; the team file's models cost it a few MiB. Each check runs a new Python
process — the process's own imports are the subject — so they live here, not in the unit
layer (docs/dev/testing.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from orchestrator.runtime_table import RUNTIMES
from tests.support.import_graph import loaded_by


def test_the_daemon_loads_no_runtime_adapter_until_a_member_needs_it() -> None:
    """An adapter is imported when a member of its runtime first starts: a daemon that runs
    no OpenCode member never loads httpx (~4 MiB of its resident memory), nor any adapter;
    uvicorn, Starlette and the page's routes wait for the first ``teamctl ui`` (LazyLiveView);
    Pillow's decoder (~3 MiB) waits for the first image planned."""
    assert loaded_by("orchestrator.daemon.main", (
        "httpx", "runtimes.opencode", "runtimes.claude", "runtimes.acp", "runtimes.codex",
        "runtimes.describers", "uvicorn", "starlette", "h11", "multipart", "python_multipart",
        "PIL.Image",
        # the daemon runs as ``python -m orchestrator.daemon``: the CLI is not its to carry
        "click", "orchestrator.client.cli",
        # hosts other than this machine, and the egress proxies: for the members that use them
        "runtimes.hosts.ssh", "runtimes.hosts.kubernetes", "runtimes.hosts.sandbox.host",
        "runtimes.hosts.sandbox.network",
        "orchestrator.daemon.egress")) == []
    from runtimes.registry import default_runtimes

    adapters = default_runtimes()
    assert list(adapters) == [r.name for r in RUNTIMES]  # the names, nothing imported yet
    assert adapters[RUNTIMES[-1].name].name == RUNTIMES[-1].name  # loaded when asked for


def test_the_daemon_does_not_import_the_sdk_until_a_team_exports() -> None:
    """The OpenTelemetry SDK (and protobuf, requests) load only with [telemetry]."""
    code = ("import sys, orchestrator.daemon.main, orchestrator.daemon.core; "
            "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', "
            "'google.protobuf'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_an_http_exporter_never_imports_grpcio() -> None:
    """Over OTLP/HTTP the pipeline loads the SDK and its HTTP exporter alone: grpcio and the
    gRPC exporter (the extra) only for a team whose protocol is grpc."""
    code = ("import sys\n"
            "from orchestrator.daemon.telemetry._export import Pipeline\n"
            "from orchestrator.telemetry_config import TelemetrySection, export_settings\n"
            "section = TelemetrySection.model_validate({'otlp': {'endpoint': "
            "'http://127.0.0.1:9'}})\n"
            "Pipeline(export_settings(section, {}), gauges=dict).close(0.1)\n"
            "print(sorted(m for m in sys.modules if m == 'grpc' or '.grpc' in m))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"


_BUILT = """
import json, pydantic
import orchestrator.daemon.main
def subs(c):
    for s in c.__subclasses__():
        yield s
        yield from subs(s)
print(json.dumps(sorted(f"{m.__module__}.{m.__qualname__}" for m in set(subs(pydantic.BaseModel))
                        if m.__module__.startswith(("orchestrator.", "runtimes."))
                        and m.__pydantic_complete__)))
"""


def test_importing_the_daemon_builds_no_protocol_model_and_few_team_file_models() -> None:
    """``defer_build``: a model's validator and serializer are built when it is first used —
    a protocol family's or a config module's base without it (a new module's ``_Strict``)
    would build every one of its models at the daemon's start (3 MiB of 49.7 at import)."""
    done = subprocess.run([sys.executable, "-c", _BUILT], capture_output=True, text=True,
                          timeout=120, check=True)
    built = json.loads(done.stdout)
    assert not [name for name in built if name.startswith("orchestrator.protocol.")], built
    # a section's default is a factory (``Field(default_factory=…)``), never an instance made
    # at import: that built its model, and its first build loaded pydantic's plugin loader
    # and importlib.metadata (~30 ms of every daemon start)
    assert built == [], built


def test_the_team_file_models_cost_the_daemon_little_memory() -> None:
    """Importing the team file's models (all their validators built) grew the process by
    14 MiB, 12 of them two regex automata; now a few MiB (measured in a fresh process)."""
    script = ("import pydantic, anyio, structlog\n"
              "class A(pydantic.BaseModel):\n    x: int\n"
              "rss = lambda: int(open('/proc/self/statm').read().split()[1]) * 4096\n"
              "before = rss()\nimport orchestrator.config\nprint(rss() - before)\n")
    grown = int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               check=True).stdout)
    assert grown < 6 * 2**20, f"{grown / 2**20:.1f} MiB"
