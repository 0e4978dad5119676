"""`teamctl trace` through a real daemon: a lead (Claude's fake) asks a reviewer (Codex's fake)
who asks a designer (OpenCode's fake), each through teamctl's MCP tool as its CLI calls it —
one trace, each recipient's delivery a child of its sender's turn, each turn on its own
runtime; the text tree prints who asked whom."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.support.members import codex_member, fake_member, opencode_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl


def _settled(teamctl: Teamctl, member: str) -> None:
    """Every message queued for ``member`` so far is done (its queue is FIFO: a message sent
    now and waited for comes after them)."""
    done = teamctl.run("send", "--json", member, "noop", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr


def test_a_chain_over_claude_codex_and_opencode_is_one_trace(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [fake_member("lead"), codex_member("reviewer"),
                                      opencode_member("designer")])
    assert teamctl.run("launch", str(team)).returncode == 0
    inner = json.dumps({"to": "designer", "text": "check the colours"})
    outer = json.dumps({"to": "reviewer", "text": f"MCP send_message {inner}"})
    sent = teamctl.json("send", "lead", f"MCP send_message {outer}", "--wait")
    _settled(teamctl, "reviewer")
    _settled(teamctl, "designer")

    doc = teamctl.json("trace", sent["id"])
    spans = {s["span_id"]: s for s in doc["spans"]}
    [root] = [s for s in doc["spans"] if s["parent_id"] is None]
    assert (root["member"], root["sender"], root["message_id"]) == ("lead", "operator",
                                                                    sent["id"])

    def turn_of(delivery: dict[str, object]) -> dict[str, object]:
        return spans[str(delivery["parent_id"])]

    [to_reviewer] = [s for s in doc["spans"] if s["kind"] == "delivery"
                     and s["member"] == "reviewer" and s["sender"] == "lead"]
    [to_designer] = [s for s in doc["spans"] if s["kind"] == "delivery"
                     and s["member"] == "designer"]
    assert turn_of(to_reviewer)["member"] == "lead"
    assert turn_of(to_reviewer)["runtime"] == "claude"
    assert turn_of(to_designer)["member"] == "reviewer"
    assert turn_of(to_designer)["runtime"] == "codex"
    [designer_turn] = [s for s in doc["spans"] if s["parent_id"] == to_designer["span_id"]]
    assert (designer_turn["runtime"], designer_turn["outcome"]) == ("opencode", "answered")
    assert designer_turn["model"] == "openrouter/moonshotai/kimi-k2.6"
    assert teamctl.json("trace", to_designer["message_id"]) == doc

    text = teamctl.run("trace", to_designer["message_id"]).stdout
    assert f"trace {doc['trace_id']}" in text
    assert "    lead -> reviewer" in text and "        reviewer -> designer" in text
    assert "turn designer #1  opencode/openrouter/moonshotai/kimi-k2.6" in text
    bad = teamctl.run("trace", "not-an-id")
    assert bad.returncode == 2 and "not a message id" in bad.stderr
