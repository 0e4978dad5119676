"""The presets of ACP agents (``acp_agent = "qwen"`` in a team file, docs/runtimes.md § ACP):
how each is started, what its login takes, and how it is told its model — so a team file names
the agent and nothing else. Each row was checked against the pinned release's ``--help`` and
its first contact over ACP (shared/protocols/acp.md). Standard library only: the team file's
checks and the ACP adapter both read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["ACP_AGENTS", "AcpAgent", "AcpAgentName", "acp_agent", "acp_agent_reporting"]

AcpAgentName = Literal["qwen", "gemini"]


@dataclass(frozen=True)
class AcpAgent:
    """One agent: ``argv`` starts it speaking ACP on stdio; ``keys``: the variables that
    carry its credential (one is enough, checked before an isolated member starts);
    ``env_names``: every variable it reads for its provider (for the docs and ``doctor``);
    ``model_env``: the variable that names its model when it advertises none over ACP;
    ``login``: what the operator does when it answers "authentication required"; ``env``:
    variables the preset always sets (the member's ``env`` overrides them)."""

    name: AcpAgentName
    argv: tuple[str, ...]
    keys: tuple[str, ...]
    env_names: tuple[str, ...]
    login: str
    model_env: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    # whether it lists its MCP servers' tools before it runs the first prompt; False: teamctl
    # waits until its ``teamctl mcp`` was listed before the member is ready
    # (runtimes/acp/runtime.py)
    lists_mcp_first: bool = True
    # the variable that names a settings file of the agent's lowest precedence (its system
    # defaults), where teamctl lists its MCP tools as visible from the first turn (an agent
    # that hides MCP tools behind its own tool-search bridge otherwise: Qwen Code's
    # ``tools.visible``, merged as a union with the operator's own) and, for an agent that
    # gates media by its model's name (``gates_media_by_model``), the member's modalities
    defaults_env: str | None = None
    # it replaces an image or a PDF by a text placeholder for a model whose *name* its own
    # table calls text-only (Qwen Code: ``[image: image/png]``) unless its settings give the
    # model's modalities (``model.generationConfig.modalities``): teamctl writes them from the
    # vision catalog (or ``vision``) and the member's PDF route, so its gate agrees with
    # teamctl's
    gates_media_by_model: bool = False
    # whether its image blocks survive beside an embedded resource in one prompt. Gemini CLI
    # 0.61.0 rebuilds a prompt that carries a resource from its text and its resources only:
    # every image block is dropped, silently; its resources' bytes reach the API. teamctl then
    # sends that prompt's images as resources too (runtimes/acp/prompt.py)
    images_beside_resources: bool = True
    # the name it gives in ``initialize`` (``agentInfo.name``): a member started by its
    # ``command`` alone is still known for the rules the adapter applies at each turn
    reports_as: str = ""
    # the resident memory one member of it is expected to hold (its process tree) until teamctl
    # has measured it on this machine: memory admission's default (docs/scaling.md, "Starts
    # that fit"); None: the runtime's (``RuntimeInfo.footprint_mib``)
    footprint_mib: int | None = None


ACP_AGENTS: dict[str, AcpAgent] = {
    "qwen": AcpAgent(
        "qwen", ("qwen", "--acp", "--auth-type", "openai"), keys=("OPENAI_API_KEY",),
        env_names=("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"),
        login="set OPENAI_API_KEY (and OPENAI_BASE_URL for another provider) in the member's "
              "env, or run 'qwen' once and log in with /auth",
        model_env="OPENAI_MODEL",
        # its cli.js would start itself again as a child (a bigger heap): ~170 MiB more;
        # QWEN_CODE_LEGACY_MCP_BLOCKING: 0.24.4 discovers a session's MCP servers in the
        # background and its ACP prompt does not wait for them (``waitForMcpReady`` is only
        # awaited to warn), so a first prompt could go out without teamctl's tools even after
        # they were listed (its tool declarations are set later still); with it, session/new
        # returns once they are registered
        # QWEN_CODE_MAX_INLINE_MEDIA_BYTES: it replaces an inline image or PDF over 10 MiB by a
        # text; teamctl's own limit is what one turn carries (the ACP adapter's 32 MiB)
        env=(("QWEN_CODE_NO_RELAUNCH", "true"), ("QWEN_CODE_LEGACY_MCP_BLOCKING", "1"),
             ("QWEN_CODE_MAX_INLINE_MEDIA_BYTES", str(32 * 1024 * 1024))),
        lists_mcp_first=False,
        # 0.24.4 defers every MCP tool behind tool_search/tool_call and reveals them at session
        # start only within a token budget it did not reach here: teamctl's tools were never
        # declared to the model (it could still call one by name, but would not know to)
        defaults_env="QWEN_CODE_SYSTEM_DEFAULTS_PATH", gates_media_by_model=True,
        reports_as="qwen-code", footprint_mib=300),  # ~300 MiB a member, measured (issue 47)
    # --skip-trust: in a folder it does not trust, Gemini CLI 0.61.0 starts no stdio MCP
    # server (not even teamctl's, given over ACP) and refuses the yolo mode; the member's
    # workdir is the one the operator put it to work in
    "gemini": AcpAgent(
        "gemini", ("gemini", "--acp", "--skip-trust"), keys=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        env_names=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"),
        login="set GEMINI_API_KEY in the member's env, or run 'gemini' once and log in with "
              "/auth",
        model_env="GEMINI_MODEL",
        # else it starts itself again as a child (a bigger heap) on the same stdio, behind a
        # parent that ignores SIGTERM and holds ~145 MiB for nothing
        env=(("GEMINI_CLI_NO_RELAUNCH", "true"),),
        images_beside_resources=False, reports_as="gemini-cli",
        footprint_mib=255),  # ~255 MiB a member, measured (issue 47)
}
assert tuple(ACP_AGENTS) == get_args(AcpAgentName)


def acp_agent(name: str | None) -> AcpAgent | None:
    """The preset named ``name`` (a validated team file's ``acp_agent``); None: no preset."""
    return None if name is None else ACP_AGENTS[name]


def acp_agent_reporting(name: str) -> AcpAgent | None:
    """The preset of the agent that calls itself ``name`` in ``initialize`` (None: unknown)."""
    return next((a for a in ACP_AGENTS.values() if name and a.reports_as == name), None)
