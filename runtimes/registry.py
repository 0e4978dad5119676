"""The runtime adapters by name (imported only by the composition root, daemon.main).

An adapter's module is imported when a member of that runtime first needs it (its start, or
its capabilities when a message with images is planned), not when the daemon starts: a daemon
whose teams run Claude only never loads OpenCode's HTTP client (httpx, ~4 MiB of resident
memory) nor Codex's schema. The core reads what it must know of a runtime without an adapter,
from ``orchestrator.runtime_table``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.runtime_table import ACP, CLAUDE, CODEX, OPENCODE, RUNTIMES

if TYPE_CHECKING:
    from orchestrator.contracts import ImageDescriber
    from orchestrator.ports import Runtime

__all__ = ["default_describers", "default_runtimes"]

T = TypeVar("T")

# where each adapter lives: module, class (one per row of RUNTIMES, checked by a test)
_RUNTIMES: dict[str, tuple[str, str]] = {
    CLAUDE.name: ("runtimes.claude.runtime", "ClaudeRuntime"),
    CODEX.name: ("runtimes.codex", "CodexRuntime"),
    OPENCODE.name: ("runtimes.opencode.runtime", "OpenCodeRuntime"),
    ACP.name: ("runtimes.acp.runtime", "AcpRuntime")}
_DESCRIBERS: dict[str, tuple[str, str]] = {
    CLAUDE.name: ("runtimes.describers", "ClaudeDescriber"),
    CODEX.name: ("runtimes.describers", "CodexDescriber")}
assert list(_RUNTIMES) == [r.name for r in RUNTIMES]


class _Lazy(Mapping[str, T]):
    """Adapters by name, each imported and made on first use, then kept."""

    def __init__(self, where: Mapping[str, tuple[str, str]]) -> None:
        self._where = where
        self._made: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        if name not in self._made:
            module, attribute = self._where[name]  # KeyError: no such runtime
            made: Any = getattr(importlib.import_module(module), attribute)()
            self._made[name] = made
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def default_runtimes() -> Mapping[str, Runtime]:
    """One adapter per row of ``orchestrator.runtime_table.RUNTIMES``, loaded when used."""
    return _Lazy(_RUNTIMES)


def default_describers() -> Mapping[str, ImageDescriber]:
    """The runtimes that can describe an image for a text-only member (``describe_with``)."""
    return _Lazy(_DESCRIBERS)
