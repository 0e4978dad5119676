"""The runtime adapters by name (imported only by the composition root, daemon.main)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtimes.claude import ClaudeRuntime
from runtimes.codex import CodexRuntime
from runtimes.describers import ClaudeDescriber, CodexDescriber
from runtimes.opencode import OpenCodeRuntime

if TYPE_CHECKING:
    from orchestrator.contracts import ImageDescriber
    from runtimes.base import Runtime

__all__ = ["default_describers", "default_runtimes"]


def default_runtimes() -> dict[str, Runtime]:
    """One adapter per row of ``orchestrator.runtime_table.RUNTIMES`` (checked by a test)."""
    return {"claude": ClaudeRuntime(), "codex": CodexRuntime(), "opencode": OpenCodeRuntime()}


def default_describers() -> dict[str, ImageDescriber]:
    """The runtimes that can describe an image for a text-only member (``describe_with``)."""
    return {"claude": ClaudeDescriber(), "codex": CodexDescriber()}
