"""The one table of runtimes: name, the variable that overrides its executable, its default
executable. The team file's ``runtime`` values, ``teamctl doctor`` and the runtime adapters
all read it (standard library only: the CLI imports it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["RUNTIMES", "RuntimeInfo", "RuntimeName", "runtime_info"]

RuntimeName = Literal["claude", "codex", "opencode"]


@dataclass(frozen=True)
class RuntimeInfo:
    name: RuntimeName
    env_var: str
    default_executable: str


RUNTIMES: tuple[RuntimeInfo, ...] = (
    RuntimeInfo("claude", "TEAMCTL_CLAUDE_BIN", "claude"),
    RuntimeInfo("codex", "TEAMCTL_CODEX_BIN", "codex"),
    RuntimeInfo("opencode", "TEAMCTL_OPENCODE_BIN", "opencode"),
)
assert tuple(r.name for r in RUNTIMES) == get_args(RuntimeName)


def runtime_info(name: RuntimeName) -> RuntimeInfo:
    return next(r for r in RUNTIMES if r.name == name)
