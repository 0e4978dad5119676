"""The runtime adapters by name (imported only by the composition root, daemon.main)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtimes.claude import ClaudeRuntime
from runtimes.codex import CodexRuntime
from runtimes.opencode import OpenCodeRuntime

if TYPE_CHECKING:
    from runtimes.base import Runtime

__all__ = ["default_runtimes"]


def default_runtimes() -> dict[str, Runtime]:
    """One adapter per row of ``orchestrator.runtime_table.RUNTIMES`` (checked by a test)."""
    return {"claude": ClaudeRuntime(), "codex": CodexRuntime(), "opencode": OpenCodeRuntime()}
