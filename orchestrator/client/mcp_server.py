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

Nothing a client sends ends the server: a line is at most ``_LINE_LIMIT`` bytes (a longer one
is read to its end and refused once) and nests at most ``rpc.MAX_DEPTH`` levels (``rpc.decode``);
a tool's arguments are checked against its ``inputSchema`` before anything reaches the daemon
(``mcp_arguments_invalid``, a tool error): ``text: null`` is refused, never sent as "None".
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator import rpc
from orchestrator.client.calls import call
from orchestrator.client.mcp_tasks import (
    TASK_TOOLS,
    coerce_ids,
    described,
    matches,
    task_call,
    task_text,
)
from orchestrator.errors import TeamctlError, UsageError
from orchestrator.limits import REQUEST_LIMIT_BYTES
from orchestrator.paths import Home

__all__ = ["TOOLS", "serve"]

_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
_LINE_LIMIT = REQUEST_LIMIT_BYTES
_CALL_TIMEOUT = 60.0
_TELL_TIMEOUT = 5.0

TOOLS: list[dict[str, Any]] = [
    {"name": "send_message",
     "description": "Send a message to a teammate (by name). It is queued for them; their "
                    "reply comes back to you later as a new message. Returns the message id.",
     "inputSchema": {"type": "object", "additionalProperties": False, "required": ["to", "text"],
                     "properties": {
                         "to": {"type": "string", "description": "the teammate's name"},
                         "text": {"type": "string", "description": "the message"},
                         "attachments": {"type": "array", "items": {"type": "string"},
                                         "description": "paths of files you can read "
                                                        "yourself, in your workdir (or a "
                                                        "directory your sandbox shows you or "
                                                        "the operator granted; elsewhere, "
                                                        "e.g. /tmp, is refused: copy the file "
                                                        "into your workdir) — images, PDFs, "
                                                        "UTF-8 text — sent with "
                                                        "the message; the text may name them "
                                                        "[Image #1], [Doc #2]… in this order "
                                                        "(one numbering; the word says the "
                                                        "kind)"}}}},
    {"name": "list_team",
     "description": "Your teammates: name, runtime, model, whether it sees images, its state.",
     "inputSchema": {"type": "object", "additionalProperties": False, "properties": {}}},
    {"name": "message_status",
     "description": "The state of a message you sent (queued, sent, answered, failed) and its "
                    "reply once answered.",
     "inputSchema": {"type": "object", "additionalProperties": False, "required": ["id"],
                     "properties": {"id": {"type": "string", "description": "the message id"}}}},
    *TASK_TOOLS,  # the team's board (mcp_tasks)
]
_TOOLS = {tool["name"]: tool for tool in TOOLS}


class ToolArgumentsInvalid(UsageError):
    """A tool call whose arguments do not match the tool's ``inputSchema`` (a tool error the
    model can correct; nothing reaches the daemon)."""

    code = "mcp_arguments_invalid"

    def __init__(self, tool: str, problem: str) -> None:
        super().__init__(f"{tool}: {problem}; see the tool's inputSchema (tools/list)")


def serve(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Answer requests until stdin closes; the process exit status."""
    token = os.environ.get("TEAMCTL_MEMBER_TOKEN", "")
    home = Home(Path(os.environ.get("TEAMCTL_MCP_HOME") or "."))
    reader = stdin or sys.stdin.buffer
    writer = stdout or sys.stdout.buffer
    listed = False
    while True:
        line = reader.readline(_LINE_LIMIT + 1)
        if not line:
            return 0
        if len(line) > _LINE_LIMIT:
            _discard_line(reader, line)
            _write(writer, _error(None, rpc.INVALID_REQUEST,
                                  f"request larger than {_LINE_LIMIT} bytes"))
            continue
        try:  # bounded: not JSON, not UTF-8 or nested too deep is refused, never raised
            message = rpc.decode(line)
        except rpc.RequestRejected as exc:
            _write(writer, _error(None, exc.code, exc.message))
            continue
        try:
            answer = _answer(message, home, token)
        except Exception as exc:  # a bug answers this request, never ends the server
            answer = _error(message.get("id"), rpc.INTERNAL_ERROR,
                            f"internal error: {type(exc).__name__}")
        if answer is not None:
            _write(writer, answer)
        if not listed and message.get("method") == "tools/list" and "result" in (answer or {}):
            listed = _tell_listed(home, token)


def _tell_listed(home: Home, token: str) -> bool:
    """Tell the daemon, once, that the runtime has listed the tools (after the answer is
    written): a start that waits for it goes on. Best effort, bounded: a daemon that does not
    answer costs the start a wait of its own deadline, never this server's end."""
    try:
        call(home, "member.tools_listed", {"token": token}, timeout=_TELL_TIMEOUT)
    except (TeamctlError, OSError):
        return False
    return True


def _discard_line(reader: BinaryIO, start: bytes) -> None:
    """Read and drop the rest of an over-long line (to its newline or EOF), so it is answered
    once and its tail is not taken for the next request."""
    chunk = start
    while chunk and not chunk.endswith(b"\n"):
        chunk = reader.readline(_LINE_LIMIT)


def _answer(message: dict[str, Any], home: Home, token: str) -> dict[str, Any] | None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:  # a notification: initialized, cancelled, …
        return None
    params = message.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return _error(request_id, rpc.INVALID_PARAMS, "params must be a JSON object")
    if method == "initialize":
        asked = params.get("protocolVersion")
        return _result(request_id, {
            "protocolVersion": asked if asked in _VERSIONS else _VERSIONS[1],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "teamctl", "version": "0.1.0"},
            "instructions": "teamctl's tools for talking to your teammates: send_message, "
                            "list_team, message_status. A message is queued, not delivered at "
                            "once; its reply comes to you as a new message. The team's board: "
                            "task_list, task_get, task_create, task_claim, task_update, "
                            "task_complete, task_release, task_review."})
    if method == "ping":
        return _result(request_id, {})
    if method == "tools/list":
        return _result(request_id, {"tools": TOOLS})
    if method == "tools/call":
        return _result(request_id, _call_tool(home, token, params))
    return _error(request_id, rpc.METHOD_NOT_FOUND, f"method not found: {str(method)[:64]}")


def _call_tool(home: Home, token: str, params: dict[str, Any]) -> dict[str, Any]:
    try:
        name, arguments = _checked(params.get("name"), params.get("arguments"))
        text = _run(home, token, name, arguments)
    except TeamctlError as exc:
        return {"content": [{"type": "text", "text": f"{exc.code}: {exc.message}"}],
                "isError": True}
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _checked(name: Any, arguments: Any) -> tuple[str, dict[str, Any]]:
    """The tool and its arguments as its ``inputSchema`` says (ToolArgumentsInvalid if not):
    an object, its required keys, no other key, each a string or an array of strings."""
    tool = _TOOLS.get(name) if isinstance(name, str) else None
    if tool is None:
        raise TeamctlError(f"no tool named {str(name)[:64]!r}; tools: {', '.join(_TOOLS)}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolArgumentsInvalid(name, "the arguments must be a JSON object")
    schema = tool["inputSchema"]
    properties: dict[str, Any] = schema["properties"]
    for key in schema.get("required", ()):
        if key not in arguments:
            raise ToolArgumentsInvalid(name, f"{key!r} is required")
    checked = {}
    for key, value in arguments.items():
        wanted = properties.get(key)
        if wanted is None:
            raise ToolArgumentsInvalid(name, f"no argument named {str(key)[:64]!r}; "
                                             f"arguments: {', '.join(properties) or 'none'}")
        checked[key] = coerce_ids(wanted, value)
        if not matches(wanted, checked[key]):
            raise ToolArgumentsInvalid(name, f"{key!r} must be {described(wanted)}")
    return name, checked


def _run(home: Home, token: str, name: str, arguments: dict[str, Any]) -> str:
    if name == "send_message":
        receipt = call(home, "member.send_message", {
            "token": token, "to": arguments["to"], "text": arguments["text"],
            "attachments": [str(Path(p).expanduser().absolute())
                            for p in arguments.get("attachments", [])]},
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
                      {"token": token, "id": arguments["id"]},
                      timeout=_CALL_TIMEOUT)
        text = f"{status['id']} to {status['to']}: {status['state']}"
        if status.get("reply"):
            text += f"; reply: {status['reply']}"
        if status.get("error"):
            text += f"; error: {status['error']}"
        return text
    if name.startswith("task_"):
        method, params = task_call(name, arguments)
        return task_text(name, call(home, method, {"token": token, **params},
                                    timeout=_CALL_TIMEOUT))
    raise AssertionError(name)  # _checked let only a listed tool through


def _result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _write(writer: BinaryIO, message: dict[str, Any]) -> None:
    writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    writer.flush()
