"""An ACP agent's launch (docs/runtimes.md § ACP), as plain functions of the ``LaunchSpec``: its
environment (a private HOME for an isolated login; the preset's model variable; the settings
defaults teamctl writes for it), the login preflight of a preset, teamctl's MCP server as an ACP
stdio server, and the permission profiles as answers to ``session/request_permission``."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.contracts import (
    McpServer,
    MemberStartFailed,
    Placed,
    RuntimeNotLoggedIn,
    acp_agent,
)
from runtimes.kit.base import member_environ, private_file

if TYPE_CHECKING:
    from orchestrator.contracts import LaunchSpec

__all__ = ["MCP_LIST_DEADLINE", "AcpOptions", "agent_defaults", "allowed", "build_env",
           "check_login", "choose_option", "login_fix", "mcp_servers", "tool_paths",
           "tools_listed"]

log = structlog.get_logger("teamctl.runtime.acp")


@dataclass(frozen=True)
class AcpOptions:
    """The member's keys only ACP reads (``LaunchSpec.options``, the runtime table's
    ``options``), typed: ``acp_agent``, the agent's preset (its login check, key names, model
    variable); None: the member's ``command`` names an agent without one. A key it does not
    know is a TypeError, never ignored."""

    acp_agent: str | None = None

    @classmethod
    def of(cls, spec: LaunchSpec) -> AcpOptions:
        return cls(**spec.options)

# at most this long (and half the start deadline) for an agent to list teamctl's MCP tools
MCP_LIST_DEADLINE = 15.0

# ACP's tool kinds (ToolKind) by what they do; any other kind is "other"
_READS = frozenset({"read", "search", "think", "fetch"})
_EDITS = frozenset({"edit", "delete", "move"})


def build_env(spec: LaunchSpec) -> dict[str, str]:
    """The minimal environment; an isolated member's private HOME (the agent keeps its
    settings, sessions and logins under it); the preset's own variables and its model
    variable; the member's env."""
    own: dict[str, str] = {}
    if spec.login == "isolated":
        try:
            spec.host.place([Placed(spec.runtime_home, "home")])
        except OSError as exc:  # a link where its home goes: the member's doing
            raise MemberStartFailed(spec.member, f"cannot make its private HOME in "
                                    f"{spec.runtime_home}: {exc.strerror}") from None
        own["HOME"] = str(spec.runtime_home / "home")
    preset = acp_agent(AcpOptions.of(spec).acp_agent)
    own.update(preset.env if preset is not None else ())
    if preset is not None and preset.model_env and spec.model:
        own[preset.model_env] = spec.model
    defaults = agent_defaults(spec)
    if preset is not None and preset.defaults_env and defaults:
        own[preset.defaults_env] = str(private_file(spec.state_dir / "agent-defaults.json",
                                                    json.dumps(defaults, indent=2)))
    return member_environ(own, spec.env)


def agent_defaults(spec: LaunchSpec) -> dict[str, Any]:
    """What teamctl writes in the preset's settings defaults (0600, the member's private dir,
    mirrored to a remote host like every file there; no token in it): teamctl's MCP tools
    visible from the first turn, as the agent names them (``mcp__teamctl__<tool>``); and for
    an agent that gates media by its model's name, the modalities teamctl plans for — images
    as the vision catalog (or ``vision``) says, PDFs when they go natively — so its gate
    agrees with teamctl's. Empty: nothing to say (no file)."""
    preset = acp_agent(AcpOptions.of(spec).acp_agent)
    if preset is None or not preset.defaults_env:
        return {}
    defaults: dict[str, Any] = {}
    if spec.mcp is not None:
        defaults["tools"] = {"visible": [f"mcp__teamctl__{t}" for t in McpServer.TOOLS]}
    modalities = _modalities(spec) if preset.gates_media_by_model else {}
    if modalities:
        defaults["model"] = {"generationConfig": {"modalities": modalities}}
    return defaults


def _modalities(spec: LaunchSpec) -> dict[str, bool]:
    """The member's input modalities as teamctl plans them; only where teamctl has a say: an
    unknown model's images are refused by the planner, and the agent's own table stays."""
    if spec.image_input is None and not spec.pdf_input:
        return {}
    said = {"pdf": spec.pdf_input}
    if spec.image_input is not None:
        said["image"] = spec.image_input
    return said


def login_fix(spec: LaunchSpec) -> str:
    """What the operator does for an agent that says it needs a login."""
    preset = acp_agent(AcpOptions.of(spec).acp_agent)
    if preset is not None:
        return preset.login
    return (f"log {os.path.basename(spec.executable)} in as its own documentation says (run "
            "it once by hand), or give the member its API key in env")


def check_login(spec: LaunchSpec) -> None:
    """The preflight of a preset: an isolated member has one of its credential variables."""
    preset = acp_agent(AcpOptions.of(spec).acp_agent)
    if preset is None or spec.login != "isolated" or any(k in spec.env for k in preset.keys):
        return
    raise RuntimeNotLoggedIn(spec.member, preset.name,
                             f"set {' or '.join(preset.keys)} in the member's env (or "
                             "pass_env): an isolated member has no login of the operator's")


def mcp_servers(spec: LaunchSpec) -> list[dict[str, Any]]:
    """teamctl's MCP server as the agent starts it (ACP ``McpServerStdio``), its token in the
    environment given to that server only."""
    if spec.mcp is None:
        return []
    command, *args = spec.mcp.command
    return [{"name": "teamctl", "command": command, "args": args,
             "env": [{"name": k, "value": v} for k, v in spec.mcp.env.items()]}]


def tool_paths(tool_call: dict[str, Any]) -> list[str]:
    """The paths a tool call names (its ``locations``)."""
    locations = tool_call.get("locations")
    if not isinstance(locations, list):
        return []
    return [str(loc["path"]) for loc in locations
            if isinstance(loc, dict) and isinstance(loc.get("path"), str)]


def allowed(spec: LaunchSpec, kind: str, paths: list[str]) -> bool | None:
    """The profile's answer to a tool of ACP ``kind`` touching ``paths``: True, False, or None
    (``ask``: the operator decides). ``read``: reading tools only; ``edit``: those, commands,
    and edits whose every path is inside the workdir; ``full``: everything."""
    if spec.permissions == "full" or kind in _READS:
        return True
    if spec.permissions == "ask":
        return None
    if spec.permissions == "edit" and kind == "execute":
        return True
    if spec.permissions == "edit" and kind in _EDITS:
        root = os.path.realpath(spec.workdir)
        return bool(paths) and all(
            os.path.commonpath([root, os.path.realpath(os.path.join(root, p))]) == root
            for p in paths)
    return False


def choose_option(options: Any, allow: bool, always: bool = False) -> str | None:
    """The ``optionId`` of the option of the kind wanted (allow/reject, once/always, the
    other if only that one is offered); None: none offered."""
    want = ["allow", "reject"][not allow]
    order = [f"{want}_always", f"{want}_once"] if always else [f"{want}_once", f"{want}_always"]
    offered = [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []
    for kind in order:
        for option in offered:
            if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                return str(option["optionId"])
    return None


async def tools_listed(spec: LaunchSpec) -> None:
    """For an agent that does not list its MCP servers before the first prompt (its preset's
    ``lists_mcp_first``): wait until its ``teamctl mcp`` was listed (the daemon is told), so
    the first turn has teamctl's tools. Bounded: past the deadline the member is ready
    anyway, and the log says its first turn may lack them."""
    preset = acp_agent(AcpOptions.of(spec).acp_agent)
    if preset is None or preset.lists_mcp_first or spec.mcp is None or spec.mcp_listed is None:
        return
    deadline = min(MCP_LIST_DEADLINE, spec.start_timeout / 2)
    started = time.monotonic()
    with anyio.move_on_after(deadline) as waited:
        await spec.mcp_listed()
    if waited.cancelled_caught:
        log.warning("acp_mcp_tools_late", team=spec.team, member=spec.member,
                    agent=AcpOptions.of(spec).acp_agent,
                    deadline=deadline, reason="the agent had not listed teamctl's MCP tools; "
                    "its first turn may go out without them")
    else:
        log.info("acp_mcp_tools_listed", team=spec.team, member=spec.member,
                 waited_ms=round((time.monotonic() - started) * 1000))
