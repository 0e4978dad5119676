"""The four runtime adapters opened in process on their fake CLIs (fixtures/bin/): each
adapter, its fake's name, a model and the environment it needs, and ``launch_spec`` to build a
member's launch on it in a test's directory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.contracts import LaunchSpec
from runtimes.acp.runtime import AcpRuntime
from runtimes.claude.runtime import ClaudeRuntime
from runtimes.codex.runtime import CodexRuntime
from runtimes.hosts.local.host import LocalHost
from runtimes.opencode.runtime import OpenCodeRuntime

if TYPE_CHECKING:
    from orchestrator.ports import Runtime

BIN = Path(__file__).resolve().parents[2] / "fixtures" / "bin"


RUNTIMES: dict[str, tuple[Runtime, str, str | None, dict[str, str]]] = {
    "acp": (AcpRuntime(), "fake-acp", None, {}),
    "claude": (ClaudeRuntime(), "claude", None, {"ANTHROPIC_API_KEY": "sk-ant-test"}),
    "codex": (CodexRuntime(), "codex", "gpt-5.4", {"CODEX_API_KEY": "sk-test"}),
    "opencode": (OpenCodeRuntime(stop_grace=0.0), "opencode", "fake/text", {}),  # no EOF wait:
    # opencode serve does not read its stdin (the grace itself: test_opencode_close.py)
}


def launch_spec(name: str, tmp_path: Path, *, idle: float,
                extra_env: dict[str, str] | None = None) -> LaunchSpec:
    """The member ``m`` on runtime ``name``'s fake CLI, in ``tmp_path``."""
    _runtime, executable, model, env = RUNTIMES[name]
    (tmp_path / "state").mkdir()
    argv: dict[str, Any] = {"args": ("--acp",)} if name == "acp" else {}
    return LaunchSpec(team="t", member="m", executable=str(BIN / executable), model=model,
                      prompt=None, workdir=tmp_path, state_dir=tmp_path / "state",
                      start_timeout=20.0, turn_idle_timeout=idle, interrupt_grace=5.0,
                      env={**env, **(extra_env or {})}, host=LocalHost(), **argv)
