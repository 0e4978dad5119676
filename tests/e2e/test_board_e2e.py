"""The board with the real CLIs (issue 28): each fake API is scripted to call teamctl's task
tools (``DO_TOOL <tool> <json>``); the real CLI starts ``teamctl mcp``, which calls the daemon
as the member. A real Claude lead creates three tasks (T3 waits on T1 and T2), a real Codex
member and a real OpenCode member each claim and complete one — the team's check (``true``)
runs before each is done — and T3 is ready only then. The APIs' recorded requests hold each
tool call's result as the model read it."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.real_members import claude_member, codex_member, opencode_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


def _tool(teamctl: Teamctl, member: str, tool: str, **arguments: Any) -> str:
    """Have ``member``'s model call ``tool``; the turn's answer (``done: <the result>``)."""
    done = teamctl.run("send", member, f"DO_TOOL {tool} {json.dumps(arguments)}", "--wait",
                       "--timeout", "180", timeout=240)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _plain(content: Any) -> str:
    """A tool result's text: a string, or the text parts of a list."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _state(teamctl: Teamctl, task: str) -> str:
    return str(teamctl.json("task", "show", task)["task"]["state"])


def test_a_claude_lead_plans_and_codex_and_opencode_members_claim_and_complete(
        teamctl: Teamctl, claude_bin: Path, codex_bin: Path, opencode_bin: Path,
        anthropic: FakeAnthropic, responses: FakeResponses, chat: FakeChat) -> None:
    started = time.monotonic()
    team = teamctl.write_team("e2e", [
        claude_member("lead", claude_bin, anthropic, lead=True),
        codex_member("cdx", codex_bin, responses),
        opencode_member("oc", opencode_bin, chat, model="fake/text-model", vision=False)])
    team.write_text(team.read_text() + '\n[board]\ncheck = "true"\n')
    assert teamctl.run("launch", str(team)).returncode == 0
    for title in ("parse the config", "write the docs"):
        assert '"state": "ready"' in _tool(teamctl, "lead", "task_create", title=title)
    third = _tool(teamctl, "lead", "task_create", title="release", blocked_by=["T1", "T2"])
    assert '"id": "T3"' in third and '"state": "blocked"' in third
    assert _tool(teamctl, "cdx", "task_claim", id="T1").count('"owner": "cdx"') == 1
    assert '"owner": "oc"' in _tool(teamctl, "oc", "task_claim", id="T2")
    assert '"state": "done"' in _tool(teamctl, "cdx", "task_complete", id="T1",
                                       summary="parsed", evidence="make test")
    assert _state(teamctl, "T3") == "blocked", "T3 still waits on T2"
    assert '"state": "done"' in _tool(teamctl, "oc", "task_complete", id="T2",
                                       summary="written")
    assert _state(teamctl, "T3") == "ready"
    shown = teamctl.json("task", "show", "T1")
    kinds = [(e["actor"], e["kind"]) for e in shown["events"]]
    assert ("lead", "created") in kinds and ("cdx", "claimed") in kinds
    assert shown["task"]["created_by"] == "lead"
    assert any(e["kind"] == "completed" and "check 'true' passed" in (e["note"] or "")
               for e in shown["events"]), shown["events"]  # the gate ran before done

    # the API requests: each CLI called the tool, and its model read the tool's result
    claude_names = {t.get("name") for t in anthropic.message_requests()[0]["body"]["tools"]}
    assert {"mcp__teamctl__task_create", "mcp__teamctl__task_claim"} <= claude_names
    claude_results = json.dumps([r["body"] for r in anthropic.message_requests()])
    assert 'tool_result' in claude_results and '\\"id\\": \\"T3\\"' in claude_results
    codex_outputs = [_plain(i["output"]) for r in responses.response_requests()
                     for i in r["body"]["input"] if i.get("type") == "function_call_output"]
    assert any('"owner": "cdx"' in o for o in codex_outputs), codex_outputs
    assert any('"state": "done"' in o for o in codex_outputs)
    oc_tools = [_plain(m["content"]) for r in chat.chat_requests() for m in r["body"]["messages"]
                if m.get("role") == "tool"]
    assert any('"owner": "oc"' in m for m in oc_tools), oc_tools
    assert any('"state": "done"' in m for m in oc_tools)
    print(f"board e2e (launch, 7 tool turns, checks): {time.monotonic() - started:.1f} s")
