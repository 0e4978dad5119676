"""``teamctl mcp``: the stdio MCP server a member's runtime starts (not for people).

Newline-delimited JSON-RPC 2.0 on stdin/stdout (protocols/teammates.md): ``server/discover`` is
answered "method not found" (Claude then falls back to ``initialize``), protocol versions
2025-06-18 and 2025-11-25 are accepted, notifications (``initialized``, ``cancelled``) are
ignored, tool results are plain text ``content`` (never ``structuredContent``, which would
replace the text the model reads).

It acts as one member only: the one whose per-launch token is in its environment
(``TEAMCTL_MEMBER_TOKEN``, never an argument), presented to the daemon with every call; a token
of an earlier launch is refused by the daemon. Every failure — a guard of the router, an
attachment the recipient cannot take, a daemon that is gone — comes back as a tool error
(``isError: true``) whose text starts with its code; the member's turn goes on.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator.client.calls import call
from orchestrator.errors import TeamctlError
from orchestrator.paths import Home

__all__ = ["TOOLS", "serve"]

_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
_LINE_LIMIT = 1 << 20
_CALL_TIMEOUT = 60.0

TOOLS: list[dict[str, Any]] = [
    {"name": "send_message",
     "description": "Send a message to a teammate (by name). It is queued for them; their "
                    "reply comes back to you later as a new message. Returns the message id.",
     "inputSchema": {"type": "object", "additionalProperties": False, "required": ["to", "text"],
                     "properties": {
                         "to": {"type": "string", "description": "the teammate's name"},
                         "text": {"type": "string", "description": "the message"},
                         "attachments": {"type": "array", "items": {"type": "string"},
                                         "description": "paths of image files you can read, "
                                                        "sent with the message; the text may "
                                                        "name them [Image #1], [Image #2]… "
                                                        "in this order"}}}},
    {"name": "list_team",
     "description": "Your teammates: name, runtime, model, whether it sees images, its state.",
     "inputSchema": {"type": "object", "additionalProperties": False, "properties": {}}},
    {"name": "message_status",
     "description": "The state of a message you sent (queued, sent, answered, failed) and its "
                    "reply once answered.",
     "inputSchema": {"type": "object", "additionalProperties": False, "required": ["id"],
                     "properties": {"id": {"type": "string", "description": "the message id"}}}},
]


def serve(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Answer requests until stdin closes; the process exit status."""
    token = os.environ.get("TEAMCTL_MEMBER_TOKEN", "")
    home = Home(Path(os.environ.get("TEAMCTL_MCP_HOME") or "."))
    reader = stdin or sys.stdin.buffer
    writer = stdout or sys.stdout.buffer
    while True:
        line = reader.readline(_LINE_LIMIT + 1)
        if not line:
            return 0
        if len(line) > _LINE_LIMIT:
            _write(writer, _error(None, -32600, "request too large"))
            continue
        try:
            message = json.loads(line)
        except ValueError:
            _write(writer, _error(None, -32700, "not JSON"))
            continue
        if not isinstance(message, dict):
            continue
        answer = _answer(message, home, token)
        if answer is not None:
            _write(writer, answer)


def _answer(message: dict[str, Any], home: Home, token: str) -> dict[str, Any] | None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:  # a notification: initialized, cancelled, …
        return None
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    if method == "initialize":
        asked = str((params or {}).get("protocolVersion") or "")
        return _result(request_id, {
            "protocolVersion": asked if asked in _VERSIONS else _VERSIONS[1],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "teamctl", "version": "0.1.0"},
            "instructions": "teamctl's tools for talking to your teammates: send_message, "
                            "list_team, message_status. A message is queued, not delivered at "
                            "once; its reply comes to you as a new message."})
    if method == "ping":
        return _result(request_id, {})
    if method == "tools/list":
        return _result(request_id, {"tools": TOOLS})
    if method == "tools/call":
        return _result(request_id, _call_tool(home, token, params or {}))
    return _error(request_id, -32601, f"method not found: {method}")


def _call_tool(home: Home, token: str, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
    try:
        text = _run(home, token, str(name), arguments or {})
    except TeamctlError as exc:
        return {"content": [{"type": "text", "text": f"{exc.code}: {exc.message}"}],
                "isError": True}
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _run(home: Home, token: str, name: str, arguments: dict[str, Any]) -> str:
    if name == "send_message":
        receipt = call(home, "member.send_message", {
            "token": token, "to": str(arguments.get("to", "")),
            "text": str(arguments.get("text", "")),
            "attachments": [str(Path(p).expanduser().absolute())
                            for p in arguments.get("attachments") or []]},
            timeout=_CALL_TIMEOUT)
        return str(receipt["text"])
    if name == "list_team":
        card = call(home, "member.list_team", {"token": token}, timeout=_CALL_TIMEOUT)
        lines = [f"team {card['team']}:"]
        for m in card["members"]:
            sees = {True: "sees images", False: "text only", None: "vision unknown"}[
                m["sees_images"]]
            if m.get("images_described"):
                sees += f" (images described by {m['images_described']})"
            you = " (you)" if m["you"] else ""
            lines.append(f"- {m['name']}{you}: {m['runtime']} {m['model'] or 'default model'}, "
                         f"{sees}, {m['launch']}/{m['readiness']}")
        return "\n".join(lines)
    if name == "message_status":
        status = call(home, "member.message_status",
                      {"token": token, "id": str(arguments.get("id", ""))},
                      timeout=_CALL_TIMEOUT)
        text = f"{status['id']} to {status['to']}: {status['state']}"
        if status.get("reply"):
            text += f"; reply: {status['reply']}"
        if status.get("error"):
            text += f"; error: {status['error']}"
        return text
    raise TeamctlError(f"no tool named {name!r}; tools: send_message, list_team, "
                       "message_status")


def _result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _write(writer: BinaryIO, message: dict[str, Any]) -> None:
    writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    writer.flush()
