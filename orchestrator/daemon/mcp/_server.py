"""The MCP server's protocol: one message from a member's relay answered as the member.

Newline-delimited JSON-RPC 2.0 (protocols/teammates.md): ``server/discover`` is answered
"method not found" (Claude then falls back to ``initialize``), protocol versions 2025-06-18 and
2025-11-25 are accepted, notifications (``initialized``, ``cancelled``) are never answered,
tool results are plain text ``content`` (never ``structuredContent``, which would replace the
text the model reads).

It acts as one member only: the one whose per-launch token its relay presented (``Caller``),
handed with every member method it calls; a token of an earlier launch is refused there. Every
failure — a guard of the router, an attachment the recipient cannot take — comes back as a tool
error (``isError: true``) whose text starts with its code; the member's turn goes on. Nothing a
relay sends is more than that relay's error: a message is at most ``rpc.REQUEST_LIMIT_BYTES``
(the connection's bound) and nests at most ``rpc.MAX_DEPTH`` levels (``rpc.decode``); a bug
answers that request with an internal error.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, NamedTuple

from orchestrator import protocol, rpc
from orchestrator.daemon.mcp._tools import Caller, checked, run, tools
from orchestrator.errors import TeamctlError

if TYPE_CHECKING:
    from orchestrator.daemon.mcp._tools import Call

__all__ = ["OPENING", "McpServer", "Reply", "opened"]

OPENING = b"teamctl-mcp/1 "  # orchestrator/client/mcp_bridge.py's first line on a connection
_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
_INSTRUCTIONS = (
    "teamctl's tools for talking to your teammates: send_message, list_team, message_status. "
    "A message is queued, not delivered at once; its reply comes to you as a new message. The "
    "team's board: task_list, task_get, task_create, task_claim, task_update, task_complete, "
    "task_release, task_review.")


class Reply(NamedTuple):
    """The answer line (``b"\\n"`` for a notification), and whether it listed the tools."""

    line: bytes
    listed: bool = False


def opened(line: bytes) -> Caller | None:
    """The caller a connection's first line names when it is a relay's opening (``teamctl-mcp/1
    TOKEN CWD HOME``, the paths hex-encoded or ``-``); None for any other line."""
    if not line.startswith(OPENING):
        return None
    words = line[len(OPENING):].split()
    token, cwd, home = (words + [b"-"] * 3)[:3]
    return Caller(token.decode("ascii", "replace") if token != b"-" else "",
                  _path(cwd), _path(home))


def _path(word: bytes) -> PurePosixPath | None:
    with contextlib.suppress(ValueError):
        found = PurePosixPath(bytes.fromhex(word.decode("ascii")).decode("utf-8",
                                                                          "surrogateescape"))
        if found.is_absolute():
            return found
    return None


class McpServer:
    """Answers a member's MCP messages; ``call`` reaches the member methods as the member."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def answer(self, caller: Caller, line: bytes) -> Reply:
        """One message → one reply; never raises (a bug is an internal error)."""
        try:  # bounded: not JSON, not UTF-8 or nested too deep is refused, never raised
            message = rpc.decode(line)
        except rpc.RequestRejected as exc:
            return Reply(_encode(_error(None, exc.code, exc.message)))
        try:
            answer = await self._answer(message, caller)
        except Exception as exc:  # a bug answers this request, never ends the connection
            answer = _error(message.get("id"), rpc.INTERNAL_ERROR,
                            f"internal error: {type(exc).__name__}")
        if answer is None:
            return Reply(b"\n")
        listed = message.get("method") == "tools/list" and "result" in answer
        return Reply(_encode(answer), listed)

    async def tell_listed(self, caller: Caller) -> None:
        """Tell the member's start that its runtime has listed the tools (after the answer
        reached the runtime: the relay has closed its connection). A refusal — a token of an
        earlier launch — ends nothing."""
        with contextlib.suppress(TeamctlError):
            await self._call(protocol.MEMBER_TOOLS_LISTED, {"token": caller.token})

    async def _answer(self, message: dict[str, Any], caller: Caller) -> dict[str, Any] | None:
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
                "instructions": _INSTRUCTIONS})
        if method == "ping":
            return _result(request_id, {})
        if method == "tools/list":
            return _result(request_id, {"tools": list(tools())})
        if method == "tools/call":
            return _result(request_id, await self._call_tool(caller, params))
        return _error(request_id, rpc.METHOD_NOT_FOUND, f"method not found: {str(method)[:64]}")

    async def _call_tool(self, caller: Caller, params: dict[str, Any]) -> dict[str, Any]:
        try:
            name, arguments = checked(params.get("name"), params.get("arguments"))
            text = await run(self._call, caller, name, arguments)
        except TeamctlError as exc:
            return {"content": [{"type": "text", "text": f"{exc.code}: {exc.message}"}],
                    "isError": True}
        return {"content": [{"type": "text", "text": text}], "isError": False}


def _result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"
