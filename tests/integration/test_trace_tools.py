"""The tool calls a runtime reports inside a turn are child spans of that turn's attempt in
``teamctl trace`` (docs/telemetry.md, "The trace") — on each of the four runtimes, through a
real daemon, the real adapter and the runtime's fake CLI (fixtures/bin/): Claude's
``tool_use``/``tool_result`` blocks, Codex's ``item/started``/``item/completed``, OpenCode's
tool parts, ACP's ``tool_call``/``tool_call_update``; on Codex's ``exec`` transport its
``item.started``/``item.completed`` lines. A call that failed is ``failed``; one
still open when the turn ended is ``unfinished`` and ends with it; a hostile name is data."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.members import acp_member, codex_member, fake_member, opencode_member

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.driver import Teamctl

MEMBERS: dict[str, Callable[..., dict[str, Any]]] = {
    "claude": fake_member, "codex": codex_member, "opencode": opencode_member,
    "acp": acp_member, "codex-exec": functools.partial(codex_member, transport="exec")}
# how each runtime names the fake's "TOOL <name>" calls (Codex: "shell" is a command, any
# other name an MCP tool of the fake's server "fake"; on exec "edit" is a file change)
NAMES = {"claude": ("shell", "edit", "read"), "codex": ("shell", "fake.edit", "fake.read"),
         "opencode": ("shell", "edit", "read"), "acp": ("shell", "edit", "read"),
         "codex-exec": ("shell", "apply_patch", "fake.read")}


def _trace(teamctl: Teamctl, runtime: str, text: str) -> tuple[str, dict[str, Any]]:
    member = MEMBERS[runtime]("m")
    launched = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    sent = teamctl.json("send", "m", text, "--wait", "--timeout", "60")
    assert sent["state"] == "answered", sent
    return sent["id"], teamctl.json("trace", sent["id"], "--json")


@pytest.mark.parametrize("runtime", list(MEMBERS))
def test_each_tool_call_is_a_child_span_of_its_turn(teamctl: Teamctl, runtime: str) -> None:
    message_id, doc = _trace(teamctl, runtime,
                             "TOOL shell ok ls -la\nTOOL edit fail notes.md\nTOOL read open x")
    [turn] = [s for s in doc["spans"] if s["kind"] == "attempt"]
    tools = {s["name"]: s for s in doc["spans"] if s["kind"] == "tool"}
    shell, edit, read = (tools.pop(f"tool {name}") for name in NAMES[runtime])
    if runtime == "acp":  # the fake (as the real agents) reports its thinking as a tool call
        assert tools.pop("tool think")["outcome"] == "completed"
    assert not tools, f"no other tool span: {tools}"
    assert [(shell["outcome"], edit["outcome"], read["outcome"])] == [
        ("completed", "failed", "unfinished")]
    for span in (shell, edit, read):
        assert span["parent_id"] == turn["span_id"], "a tool call is a child of its attempt"
        assert (span["member"], span["message_id"], span["attempt"], span["runtime"]) == (
            "m", message_id, 1, runtime.removesuffix("-exec"))
        assert turn["start"] <= span["start"] <= span["end"] <= turn["end"]
    assert read["end"] == turn["end"], "an open call ends with its turn"
    assert len({s["span_id"] for s in doc["spans"]}) == len(doc["spans"])
    shown = teamctl.run("trace", message_id)
    assert shown.returncode == 0
    lines = shown.stdout.splitlines()
    [attempt_line] = [line for line in lines if line.lstrip().startswith("turn m #1")]
    [failed_line] = [line for line in lines if f"tool {NAMES[runtime][1]}" in line]
    indent = len(attempt_line) - len(attempt_line.lstrip())
    assert failed_line.startswith(" " * (indent + 2) + f"tool {NAMES[runtime][1]}  failed")


def test_a_hostile_tool_name_is_printed_as_data(teamctl: Teamctl) -> None:
    """A name the runtime (a model) chose reaches the terminal with its control characters
    shown as marks, never as escapes the terminal would run."""
    message_id, doc = _trace(teamctl, "claude", "TOOL \x1b]0;pwned\x07\x1b[2J ok x")
    [tool] = [s for s in doc["spans"] if s["kind"] == "tool"]
    assert tool["name"] == "tool \x1b]0;pwned\x07\x1b[2J", "the JSON keeps it as it came"
    shown = teamctl.run("trace", message_id)
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "pwned" in shown.stdout
