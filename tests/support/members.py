"""Member builders for the real CLIs' fakes (fixtures/bin/): a team-file row for a Claude, a
Codex, an OpenCode or an ACP member that a test's daemon launches with the fake in the CLI's
place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BIN = Path(__file__).resolve().parents[2] / "fixtures" / "bin"
FAKE_CLAUDE = BIN / "claude"
FAKE_CODEX = BIN / "codex"
FAKE_OPENCODE = BIN / "opencode"
FAKE_ACP = BIN / "fake-acp"


def _member(name: str, runtime: str, extra: dict[str, Any], **row: Any) -> dict[str, Any]:
    """The row: its name and runtime, the fake's own keys, a start bound of 20 s, then
    ``extra`` over all of them."""
    return {"name": name, "runtime": runtime, **row, "start_timeout": 20.0, **extra}


def fake_member(name: str, **extra: Any) -> dict[str, Any]:
    return _member(name, "claude", extra, model="claude-sonnet-4-5", command=str(FAKE_CLAUDE))


def codex_member(name: str, **extra: Any) -> dict[str, Any]:
    return _member(name, "codex", extra, model="gpt-5.4-mini", command=str(FAKE_CODEX))


def opencode_member(name: str, **extra: Any) -> dict[str, Any]:
    return _member(name, "opencode", extra, model="openrouter/moonshotai/kimi-k2.6",
                   command=str(FAKE_OPENCODE))


def acp_member(name: str, **extra: Any) -> dict[str, Any]:
    """An ACP member on the fake agent; as the ``qwen`` preset, the fake lists the session's
    MCP tools in the background at once, as Qwen Code does (unless the test's env says when):
    without it the preset waited out its 15 s deadline for them at each start."""
    if extra.get("acp_agent") == "qwen" and "FAKE_ACP_MCP_LATE" not in extra.get("env", {}):
        extra = {**extra, "env": {**extra.get("env", {}), "FAKE_ACP_MCP_LATE": "0"}}
    return _member(name, "acp", extra, command=[str(FAKE_ACP), "--acp"])
