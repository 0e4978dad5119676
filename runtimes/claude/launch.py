"""Claude's launch configuration (protocols/claude.md): the command line, the environment, the
member's private dirs and 0600 files, and each permission profile's flags. The role prompt, the
settings and the MCP config (its token) go in files, never on the command line."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from orchestrator.contracts import LaunchSpec, McpServer, Placed
from runtimes.kit.base import member_environ, private_file
from runtimes.kit.logins import claude_config_dir

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["EDIT_TOOLS", "PERMISSION_FLAGS", "READ_TOOLS", "build_argv", "build_env",
           "home_dirs", "private_dirs", "session_counter", "write_files"]


def write_files(spec: LaunchSpec) -> dict[str, Path]:
    """The role prompt and the member's settings as 0600 files in its private dir (the
    daemon's: a sandboxed member reads them, bound read-only, and cannot change them): never
    on the command line (visible to every local user in ``ps``; a long prompt fails E2BIG)."""
    files: dict[str, Path] = {}
    if spec.prompt:
        files["prompt"] = private_file(spec.state_dir / "system-prompt.md", spec.prompt)
    if spec.config:
        files["settings"] = private_file(spec.state_dir / "settings.json",
                                         json.dumps(dict(spec.config), indent=2))
    if spec.mcp is not None:  # the token is in it: 0600, never on argv
        files["mcp"] = private_file(spec.state_dir / "mcp.json", json.dumps({"mcpServers": {
            "teamctl": {"type": "stdio", "command": spec.mcp.command[0],
                        "args": list(spec.mcp.command[1:]), "env": dict(spec.mcp.env)}}},
            indent=2))
    return files


def build_argv(spec: LaunchSpec, session_id: str, *, resume: bool,
               files: Mapping[str, Path]) -> list[str]:
    """The command line: member args first, then the stream-json protocol flags; the prompt
    and settings by file path only."""
    argv = [spec.executable, *spec.args, "-p", "--input-format", "stream-json",
            "--output-format", "stream-json", "--verbose"]
    argv += ["--resume", session_id] if resume else ["--session-id", session_id]
    if spec.model:
        argv += ["--model", spec.model]
    if spec.max_budget_usd is not None:  # the CLI's own backstop behind the ledger's gate,
        # against its session's total, which a resume carries on
        spent = spec.meter.counted(session_counter(session_id)) if spec.meter and resume else 0
        argv += ["--max-budget-usd", f"{max(spec.max_budget_usd + spent, 0.0001):.4f}"]
    if "prompt" in files:
        argv += ["--append-system-prompt-file", str(files["prompt"])]
    if "settings" in files:
        argv += ["--settings", str(files["settings"])]
    if "mcp" in files:
        # only teamctl's server (a .mcp.json in the workdir would load silently in -p mode),
        # and no built-in SendMessage beside it: teammates talk through the router alone
        argv += ["--mcp-config", str(files["mcp"]), "--strict-mcp-config",
                 "--disallowedTools", "SendMessage"]
    flags = list(PERMISSION_FLAGS[spec.permissions])
    if "mcp" in files and "--allowedTools" in flags:
        index = flags.index("--allowedTools") + 1
        flags[index] += "," + ",".join(f"mcp__teamctl__{t}" for t in McpServer.TOOLS)
    return argv + flags


# What each permission profile passes (protocols/teammates.md §1.6; docs/permissions.md).
# Headless Claude never prompts: ``dontAsk`` refuses whatever the allowlist does not name, and
# every refusal shows as a ``permission_denied`` event.
# "./**" rules confine file edits to the member's workdir (the e2e test writes outside it and
# is refused); Claude has no such rule for Bash, which runs any command in the edit profile.
READ_TOOLS = "Read,Glob,Grep,LS,NotebookRead,TodoWrite"
EDIT_TOOLS = f"{READ_TOOLS},Write(./**),Edit(./**),MultiEdit(./**),NotebookEdit(./**),Bash"
PERMISSION_FLAGS: dict[str, list[str]] = {
    "read": ["--permission-mode", "dontAsk", "--allowedTools", READ_TOOLS],
    "edit": ["--permission-mode", "dontAsk", "--allowedTools", EDIT_TOOLS],
    "full": ["--permission-mode", "bypassPermissions"],
    # reads run; everything else is a can_use_tool prompt for the operator (runtimes/claude/asks.py)
    "ask": ["--permission-mode", "default", "--permission-prompt-tool", "stdio",
            "--allowedTools", READ_TOOLS],
}


def build_env(spec: LaunchSpec, dirs: Mapping[str, Path]) -> dict[str, str]:
    """The minimal environment, the member's private dirs (its config dir only when its login
    is isolated: an operator login uses the operator's own), then the member's own env."""
    own = {"TMPDIR": str(dirs["tmp"]), "CLAUDE_CODE_TMPDIR": str(dirs["tmp"]),
           "XDG_RUNTIME_DIR": str(dirs["xdg"])}
    # the operator's own dir is given only as the operator gives it: CLAUDE_CONFIG_DIR=~/.claude
    # would move .claude.json (user-scope MCP servers) from ~ into that dir
    if spec.login == "isolated" or os.environ.get("CLAUDE_CONFIG_DIR"):
        own["CLAUDE_CONFIG_DIR"] = str(dirs["config"])
    if spec.permissions == "full" and os.geteuid() == 0:
        own["IS_SANDBOX"] = "1"  # bypass mode refuses root without it (docs/permissions.md)
    if spec.mcp is not None:
        own["ENABLE_TOOL_SEARCH"] = "false"  # teamctl's tools offered at once, not deferred
    return member_environ(own, spec.env)


_HOME_DIRS = ("config", "tmp", "xdg")


def private_dirs(spec: LaunchSpec) -> dict[str, Path]:
    """Claude's dirs in the member's runtime home (``home_dirs`` makes them, through its
    host); with ``login = "operator"`` its config dir is the operator's own."""
    dirs = {name: spec.runtime_home / name for name in _HOME_DIRS}
    if spec.login == "operator":
        dirs["config"] = claude_config_dir()
    return dirs


def home_dirs(spec: LaunchSpec) -> list[Placed]:
    """What ``Host.place`` makes in the runtime home before Claude starts."""
    return [Placed(spec.runtime_home, name) for name in _HOME_DIRS]


def session_counter(session_id: str) -> str:
    """The ledger's name for a session's running total_cost_usd."""
    return f"claude-session:{session_id}"
