"""Member builders for the real CLIs in e2e (installed by ``make e2e``): the pinned versions,
where each CLI is installed, a team-file row for a member on the real Claude Code, Codex,
OpenCode, Qwen Code or Gemini CLI reaching a fake provider API (tests/support/fake_*.py), and
the steps several e2e modules share (an ACP member's first turn, a message to a peer, an image
sent as planned). The fixtures that start the CLIs' fakes are tests/e2e/conftest.py's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.daemon.mcp import tools
from tests.support import images
from tests.support.members import acp_member

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_gemini import FakeGemini
    from tests.support.fake_responses import FakeResponses

CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
OPENCODE_VERSION = "1.18.33"
QWEN_VERSION = "0.24.4"
GEMINI_VERSION = "0.61.0"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "e2e"


def installed(env_var: str, default: Path) -> Path:
    path = Path(os.environ.get(env_var) or default)
    assert path.exists(), f"the real CLI is not installed at {path}: run 'make e2e'"
    return path


def codex_member(name: str, codex_bin: Path, api: FakeResponses, **extra: object) -> dict:
    """A member on the real codex, reaching the fake API through a custom provider given as
    `-c` flags (never the built-in provider, which loops forever offline), retries off."""
    member: dict[str, object] = {
        "name": name, "runtime": "codex", "model": "gpt-5.4-mini", "command": str(codex_bin),
        "start_timeout": 60.0, "turn_idle_timeout": 120.0,
        "env": {"FAKE_OPENAI_API_KEY": "sk-e2e-dummy-key-000000"},
        "config": {
            "model_provider": "fake",
            "model_providers": {"fake": {
                "name": "fake", "base_url": api.base_url, "wire_api": "responses",
                "env_key": "FAKE_OPENAI_API_KEY", "request_max_retries": 0,
                "stream_max_retries": 0}},
            "features": {"plugins": False},
            "analytics": {"enabled": False},
            "check_for_update_on_startup": False,
        },
    }
    member.update(extra)
    return member


def claude_member(name: str, claude_bin: Path, api: FakeAnthropic, **extra: object) -> dict:
    member: dict[str, object] = {
        "name": name, "runtime": "claude", "model": "claude-sonnet-4-5",
        "command": str(claude_bin), "start_timeout": 60.0,
        "prompt": "You are the team's reviewer.",
        "env": {
            "ANTHROPIC_BASE_URL": api.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy-key-0000",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "DISABLE_TELEMETRY": "1",
        },
    }
    member.update(extra)
    return member


def opencode_member(name: str, opencode_bin: Path, api: FakeChat, *, model: str,
                    **extra: object) -> dict:
    """A member on the real opencode, its provider `fake` pointing at the fake chat API, the
    plugin install aimed at a dead local registry. The models' modalities are NOT declared here:
    teamctl must write them from the vision catalog / `vision`."""
    member: dict[str, object] = {
        "name": name, "runtime": "opencode", "model": model, "command": str(opencode_bin),
        "start_timeout": 90.0, "turn_idle_timeout": 120.0,
        "env": {"npm_config_registry": api.dead_registry},
        "config": {"provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible", "name": "Fake local",
            "options": {"baseURL": api.base_url, "apiKey": "sk-e2e-dummy-opencode-key"},
            "models": {m: {"name": m, "limit": {"context": 32000, "output": 1000}}
                       for m in ("vision-model", "text-model")}}}},
    }
    member.update(extra)
    return member


def qwen_member(name: str, qwen_bin: Path, api: FakeChat, **extra: object) -> dict:
    """A member on the real Qwen Code over ACP (``acp_agent = "qwen"``), its OpenAI-compatible
    provider the fake chat API, its login isolated (a private HOME, the key in its env)."""
    return _acp_member(name, "qwen", qwen_bin, "text-model", {
        "OPENAI_API_KEY": "sk-e2e-dummy-qwen-key", "OPENAI_BASE_URL": api.base_url}, extra)


def _acp_member(name: str, agent: str, binary: Path, model: str, env: dict[str, str],
                extra: dict[str, object]) -> dict:
    member: dict[str, object] = {
        "name": name, "runtime": "acp", "acp_agent": agent, "command": str(binary),
        "model": model, "login": "isolated", "start_timeout": 90.0, "turn_idle_timeout": 120.0,
        "env": env}
    member.update(extra)
    return member


def first_acp_turn(teamctl: Teamctl, member: dict[str, Any], text: str) -> dict[str, Any]:
    """Launch the one ACP member and answer ``text`` (``pong: <text>``): its runtime_ready."""
    launched = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [ready] = [e for e in teamctl.log_events() if e["event"] == "runtime_ready"]
    done = teamctl.run("send", member["name"], text, "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"pong: {text}"
    return ready


def message_the_peer(teamctl: Teamctl, member: dict[str, Any], tool: str,
                     requests: Callable[[], list[dict[str, Any]]],
                     tools_of: Callable[[dict[str, Any]], set[str]]) -> None:
    """The member (``permissions = "full"``) and a fake peer launched; the model scripted to
    call teamctl's send_message as the agent names it (``tool``, which the agent declared to
    the API on the very request of that turn, with every other teamctl tool: an agent that hides
    MCP tools until later turns, or drops one whose schema it refuses, fails); the peer gets
    the message and the member's turn the tool's answer."""
    team = teamctl.write_team("web", [member, acp_member("peer")])
    assert teamctl.run("launch", str(team)).returncode == 0
    call = json.dumps({"to": "peer", "text": "please review the form"})
    prompt = f"DO_CALL {tool} {call}"
    done = teamctl.run("send", member["name"], prompt, "--wait", "--timeout", "120")
    quoted = json.dumps(prompt)[1:-1]
    first = next(r for r in requests() if quoted in json.dumps(r["body"]))
    declared = tools_of(first["body"])
    # every teamctl tool, as the agent names them: one whose inputSchema it refused is missing
    named = tool.removesuffix("send_message")
    assert {named + t["name"] for t in tools()} <= declared, " ".join(sorted(declared))
    assert done.returncode == 0, done.stderr
    assert "done: " in done.stdout and "queued as " in done.stdout
    peer = teamctl.json("history", "peer")["messages"]
    assert peer and "please review the form" in peer[0]["text"]


def send_planned_image(teamctl: Teamctl, member: dict[str, Any]) -> dict[str, Any]:
    """Launch the one member, send it a screenshot; the planned variant (``--dry-run``)."""
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), member["name"], "look")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    done = teamctl.run("send", "--attach", str(shot), member["name"], "look", "--wait",
                       "--timeout", "120")
    assert done.returncode == 0, done.stderr
    return planned  # type: ignore[no-any-return]


def gemini_member(name: str, gemini_bin: Path, api: FakeGemini, **extra: object) -> dict:
    """A member on the real Gemini CLI over ACP (``acp_agent = "gemini"``), its API the fake
    Gemini API, its login isolated (a private HOME, the key in its env). The model is named:
    the default ("auto") would first ask the API which model to route each prompt to."""
    return _acp_member(name, "gemini", gemini_bin, "gemini-2.5-flash", {
        "GEMINI_API_KEY": "e2e-dummy-gemini-key", "GOOGLE_GEMINI_BASE_URL": api.base_url}, extra)
