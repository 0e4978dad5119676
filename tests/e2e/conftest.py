"""E2E fixtures: the real CLIs (installed by 'make e2e') and the fake provider APIs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests import images
from tests.e2e.fake_anthropic import FakeAnthropic
from tests.e2e.fake_chat import FakeChat
from tests.e2e.fake_gemini import FakeGemini
from tests.e2e.fake_responses import FakeResponses
from tests.integration.test_acp_member import acp_member

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.conftest import Teamctl

CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
OPENCODE_VERSION = "1.18.33"
QWEN_VERSION = "0.24.4"
GEMINI_VERSION = "0.61.0"
_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "e2e"


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The pinned real CLI. Missing is a failure (run 'make e2e'), never a skip."""
    return _installed("TEAMCTL_E2E_CLAUDE", _CACHE / "claude/node_modules/.bin/claude")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return _installed("TEAMCTL_E2E_CODEX", _CACHE / "codex/node_modules/.bin/codex")


def _installed(env_var: str, default: Path) -> Path:
    path = Path(os.environ.get(env_var) or default)
    assert path.exists(), f"the real CLI is not installed at {path}: run 'make e2e'"
    return path


@pytest.fixture
def responses() -> Iterator[FakeResponses]:
    with FakeResponses() as api:
        yield api


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


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as api:
        yield api


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


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    return _installed("TEAMCTL_E2E_OPENCODE", _CACHE / "opencode/node_modules/.bin/opencode")


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with FakeChat() as api:
        yield api


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


@pytest.fixture(scope="session")
def qwen_bin() -> Path:
    return _installed("TEAMCTL_E2E_QWEN", _CACHE / "qwen/node_modules/.bin/qwen")


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
    the API on the very request of that turn: an agent that hides MCP tools until later
    turns fails); the peer gets the message and the member's turn the tool's answer."""
    team = teamctl.write_team("web", [member, acp_member("peer")])
    assert teamctl.run("launch", str(team)).returncode == 0
    call = json.dumps({"to": "peer", "text": "please review the form"})
    prompt = f"DO_CALL {tool} {call}"
    done = teamctl.run("send", member["name"], prompt, "--wait", "--timeout", "120")
    quoted = json.dumps(prompt)[1:-1]
    first = next(r for r in requests() if quoted in json.dumps(r["body"]))
    assert tool in tools_of(first["body"]), " ".join(sorted(tools_of(first["body"])))
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


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    return _installed("TEAMCTL_E2E_GEMINI", _CACHE / "gemini/node_modules/.bin/gemini")


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as api:
        yield api


def gemini_member(name: str, gemini_bin: Path, api: FakeGemini, **extra: object) -> dict:
    """A member on the real Gemini CLI over ACP (``acp_agent = "gemini"``), its API the fake
    Gemini API, its login isolated (a private HOME, the key in its env). The model is named:
    the default ("auto") would first ask the API which model to route each prompt to."""
    return _acp_member(name, "gemini", gemini_bin, "gemini-2.5-flash", {
        "GEMINI_API_KEY": "e2e-dummy-gemini-key", "GOOGLE_GEMINI_BASE_URL": api.base_url}, extra)
