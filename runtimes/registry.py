"""The runtime adapters by name (imported only by the composition root, orchestrator.daemon)."""

from __future__ import annotations

from runtimes.base import Runtime
from runtimes.claude import ClaudeRuntime

__all__ = ["default_runtimes"]


def default_runtimes() -> dict[str, Runtime]:
    return {"claude": ClaudeRuntime()}
