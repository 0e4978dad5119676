"""Teammates talk through teamctl's MCP server (`teamctl mcp`, started by the member's CLI
from its --mcp-config, as the real one does): a receipt that says "queued", the message in the
recipient's history with its sender, the reply routed back, typed tool errors for refusals, and
`teamctl thread`. Real daemon, fake claude members calling the tools."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl


def _wait_answered(teamctl: Teamctl, member: str, count: int) -> list[dict[str, object]]:
    """``member``'s messages once ``count`` are answered (each --wait is an event, bounded)."""
    messages = teamctl.json("history", member)["messages"]
    for message in messages:
        if message["state"] not in ("answered", "failed"):
            done = teamctl.run("send", "--json", member, "noop", "--wait", "--timeout", "60")
            assert done.returncode == 0, done.stderr
    return [m for m in teamctl.json("history", member)["messages"] if m["text"] != "noop"][:count]


def test_a_teammate_message_its_receipt_and_the_routed_reply(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [fake_member("lead"), fake_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0
    args = json.dumps({"to": "rev", "text": "please review the login form"})
    done = teamctl.run("send", "lead", f"MCP send_message {args}", "--wait")
    assert done.returncode == 0, done.stderr
    receipt = next(ln for ln in done.stdout.splitlines() if ln.startswith("mcp: "))
    assert "queued as " in receipt and "for rev; their reply will come to you" in receipt
    message_id = receipt.split("queued as ")[1].split()[0]
    [to_rev] = _wait_answered(teamctl, "rev", 1)
    assert (to_rev["id"], to_rev["sender"], to_rev["depth"]) == (message_id, "lead", 1)
    assert to_rev["text"] == "please review the login form"
    lead = teamctl.json("history", "lead")["messages"]
    replies = [m for m in lead if m["kind"] == "reply"]
    assert len(replies) == 1 and replies[0]["sender"] == "rev"
    assert replies[0]["text"].startswith(f"reply from rev to {message_id}: fake-claude")
    thread = teamctl.json("thread", message_id)
    assert [(m["sender"], m["to"], m["kind"]) for m in thread["messages"]][:3] == [
        ("operator", "lead", "message"), ("lead", "rev", "message"), ("rev", "lead", "reply")]
    text = teamctl.run("thread", message_id).stdout
    assert "lead -> rev" in text and "rev -> lead (reply)" in text
    assert "from lead" in teamctl.run("history", "rev").stdout


def test_refusals_are_typed_tool_errors_and_the_turn_goes_on(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [fake_member("lead"), fake_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0
    cases = {"nobody": "messaging_unknown_recipient: no teammate named 'nobody'; your "
                       "teammates: rev",
             "lead": "messaging_to_self"}
    for to, expected in cases.items():
        args = json.dumps({"to": to, "text": "hi"})
        done = teamctl.run("send", "lead", f"MCP send_message {args}", "--wait")
        assert done.returncode == 0, "the sender's turn goes on"
        assert f"mcp error: {expected}" in done.stdout, done.stdout
    binary = teamctl.workdir / "blob.png"  # neither an image, a PDF nor text
    binary.write_bytes(b"\x00\x01\x02 not an image")
    bad = json.dumps({"to": "rev", "text": "look", "attachments": [str(binary)]})
    done = teamctl.run("send", "lead", f"MCP send_message {bad}", "--wait")
    assert "mcp error: attachment_refused" in done.stdout
    listed = teamctl.run("send", "lead", "MCP list_team {}", "--wait").stdout
    assert "- lead (you): claude claude-sonnet-4-5" in listed and "- rev: claude" in listed
    codes = [e["code"] for e in teamctl.log_events() if e["event"] == "teammate_message_refused"]
    assert codes[:2] == ["messaging_unknown_recipient", "messaging_to_self"]
    assert teamctl.json("history", "rev")["messages"] == [], "nothing was sent"


def test_an_old_token_is_refused_after_a_restart(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [fake_member("lead"), fake_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0
    config = teamctl.home / "members" / "web" / "lead" / "mcp.json"
    old = json.loads(config.read_text())["mcpServers"]["teamctl"]
    assert config.stat().st_mode & 0o777 == 0o600
    assert teamctl.run("restart", "lead").returncode == 0
    from fixtures.mcp_client import call_tool

    text, is_error = call_tool([old["command"], *old["args"]], old["env"], "send_message",
                               {"to": "rev", "text": "from the past"}, base_env=teamctl.env)
    assert is_error and text.startswith("messaging_token_unknown")
    assert teamctl.json("history", "rev")["messages"] == []


def test_attachments_a_recipient_cannot_take_are_typed_tool_errors(teamctl: Teamctl) -> None:
    from tests.support import images

    team = teamctl.write_team("web", [fake_member("lead"),
                                      fake_member("blind", model="glm-5.1-text-only")])
    assert teamctl.run("launch", str(team)).returncode == 0
    shot = images.save(images.screenshot(400, 300), teamctl.workdir / "shot.png", "PNG")
    # a directory is no file its sender can read in its view (docs/attachments.md)
    for path, code in ((str(teamctl.workdir), "attachment_outside_member_view: "),
                       (str(shot), "attachment_refused: ")):
        args = json.dumps({"to": "blind", "text": "look", "attachments": [path]})
        done = teamctl.run("send", "lead", f"MCP send_message {args}", "--wait")
        assert done.returncode == 0 and f"mcp error: {code}" in done.stdout, done.stdout
    assert "attachment_model_vision_unknown" in done.stdout, done.stdout
    assert teamctl.json("history", "blind")["messages"] == []


def test_hostile_member_calls_on_the_socket_leave_the_daemon_up(teamctl: Teamctl) -> None:
    """The member.* socket methods with forged, malformed or huge input: typed errors, the
    daemon up, nothing queued."""
    import socket as sockets

    team = teamctl.write_team("web", [fake_member("lead"), fake_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0

    def call(params: object) -> dict[str, object]:
        with sockets.socket(sockets.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(str(teamctl.home / "teamctl.sock"))
            sock.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "member.send_message",
                                     "params": params}).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                data += sock.recv(65536)
        return dict(json.loads(data))

    forged = call({"token": "A" * 32, "to": "rev", "text": "as someone else"})
    assert forged["error"]["data"]["code"] == "messaging_token_unknown"  # type: ignore[index]
    for params in ({"token": "short", "to": "rev", "text": "x"},
                   {"token": "A" * 32, "to": "rev", "text": "x" * 300_000},
                   {"token": "A" * 32, "to": ["rev"], "text": "x"},
                   {"token": "A" * 32, "to": "rev", "text": "x", "as": "lead"}):
        answer = call(params)
        assert answer["error"]["data"]["code"] == "usage_error", params  # type: ignore[index]
    assert teamctl.run("status").returncode == 0
    assert teamctl.json("history", "rev")["messages"] == []


def test_a_base_that_looks_like_an_option_is_an_invalid_team_file(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [fake_member("lead", base="--upload-pack=evil")])
    done = teamctl.run("launch", str(team))
    assert done.returncode == 2 and "members[0].base" in done.stderr


def test_fake_codex_and_opencode_members_call_the_tools_as_their_clis_do(
        teamctl: Teamctl) -> None:
    """Codex starts the server with its filtered env plus the server's `env` (so the token must
    be there, not inherited); OpenCode with its `environment`: both reach the router."""
    from tests.support.members import codex_member, opencode_member

    team = teamctl.write_team("web", [codex_member("rev"), opencode_member(
        "des", model="openrouter/z-ai/glm-4.5v"), fake_member("lead")])
    assert teamctl.run("launch", str(team)).returncode == 0
    to_des = json.dumps({"to": "des", "text": "from codex"})
    done = teamctl.run("send", "rev", f"MCP send_message {to_des}", "--wait")
    assert done.returncode == 0 and "mcp: queued as " in done.stdout, done.stdout
    to_lead = json.dumps({"to": "lead", "text": "from opencode"})
    done = teamctl.run("send", "des", f"MCP send_message {to_lead}", "--wait")
    assert done.returncode == 0 and "mcp: queued as " in done.stdout, done.stdout
    [from_codex] = [m for m in _wait_answered(teamctl, "des", 2) if m["sender"] == "rev"]
    assert from_codex["text"] == "from codex"
    [from_opencode] = [m for m in _wait_answered(teamctl, "lead", 1) if m["sender"] == "des"]
    assert from_opencode["text"] == "from opencode"
