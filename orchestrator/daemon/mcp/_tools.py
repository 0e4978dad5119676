"""teamctl's MCP tools (``TOOLS``: messaging here, the board's in ``_tasks``; each one's
``inputSchema`` made from its method's params model by ``_schema``), the check of a call's
arguments against its tool's ``inputSchema``, and a call run as the member
— each tool one ``member.*`` method of the control protocol with the member's token — its
result as the text the model reads.

A tool's arguments are checked before anything is called (``mcp_arguments_invalid``, a tool
error the model can correct): ``text: null`` is refused, never sent as "None". An attachment's
path is made absolute as the member means it: against the working directory and ``HOME`` its
relay said (``Caller``), never the daemon's.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from orchestrator import protocol
from orchestrator.daemon.mcp._schema import coerce_ids, described, input_schema, matches
from orchestrator.daemon.mcp._tasks import task_call, task_text, task_tools
from orchestrator.errors import TeamctlError, UsageError

__all__ = ["Call", "Caller", "ToolArgumentsInvalid", "checked", "run", "tools"]

# a member method called as the member (through the control server's dispatch: its checks,
# its redaction); a refusal raised as TeamctlError
Call = Callable[[protocol.Method, dict[str, Any]], Awaitable[Any]]


def _tool(row: protocol.Method, description: str) -> dict[str, Any]:
    """The tool calling ``row`` (``member.x``: tool ``x``): its description, its
    ``inputSchema`` from the row's params model (``_schema``)."""
    return {"name": row.name.removeprefix("member."), "description": description,
            "inputSchema": input_schema(protocol.model(row.params))}


@functools.cache
def tools() -> tuple[dict[str, Any], ...]:
    """Every tool, as ``tools/list`` answers; built when first asked for — each schema
    builds its params model, which the protocol table defers (docs/dev/performance.md)."""
    return (
        _tool(protocol.MEMBER_SEND_MESSAGE,
              "Send a message to a teammate (by name). It is queued for them; their reply comes "
              "back to you later as a new message. Returns the message id."),
        _tool(protocol.MEMBER_LIST_TEAM,
              "Your teammates: name, runtime, model, whether it sees images, its state."),
        _tool(protocol.MEMBER_MESSAGE_STATUS,
              "The state of a message you sent (queued, sent, answered, failed), its receipt "
              "(read: the recipient's turn that carries it began) and its reply once answered."),
        *task_tools(),  # the team's board (_tasks)
    )


def _by_name() -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in tools()}


@dataclass(frozen=True)
class Caller:
    """Who calls, as the relay's opening line said: the member's token, and the relay's
    working directory and ``HOME`` (None where it gave none)."""

    token: str
    cwd: PurePosixPath | None = None
    home: PurePosixPath | None = None

    def absolute(self, path: str) -> str:
        """``path`` as the member means it (``Path(path).expanduser().absolute()`` in its own
        process): ``~`` is its HOME, a relative path is under its working directory."""
        found = PurePosixPath(path)
        if self.home is not None and (path == "~" or path.startswith("~/")):
            found = self.home / path[2:]
        if not found.is_absolute() and self.cwd is not None:
            found = self.cwd / found
        return str(found)


class ToolArgumentsInvalid(UsageError):
    """A tool call whose arguments do not match the tool's ``inputSchema`` (a tool error the
    model can correct; nothing reaches the member methods)."""

    code = "mcp_arguments_invalid"

    def __init__(self, tool: str, problem: str) -> None:
        super().__init__(f"{tool}: {problem}; see the tool's inputSchema (tools/list)")


def checked(name: Any, arguments: Any) -> tuple[str, dict[str, Any]]:
    """The tool and its arguments as its ``inputSchema`` says (ToolArgumentsInvalid if not):
    an object, its required keys, no other key, each as its schema says (``_schema.matches``)."""
    tool = _by_name().get(name) if isinstance(name, str) else None
    if tool is None:
        raise TeamctlError(f"no tool named {str(name)[:64]!r}; tools: {', '.join(_by_name())}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolArgumentsInvalid(name, "the arguments must be a JSON object")
    schema = tool["inputSchema"]
    properties: dict[str, Any] = schema["properties"]
    for key in schema.get("required", ()):
        if key not in arguments:
            raise ToolArgumentsInvalid(name, f"{key!r} is required")
    found = {}
    for key, value in arguments.items():
        wanted = properties.get(key)
        if wanted is None:
            raise ToolArgumentsInvalid(name, f"no argument named {str(key)[:64]!r}; "
                                             f"arguments: {', '.join(properties) or 'none'}")
        found[key] = coerce_ids(wanted, value)
        if not matches(wanted, found[key]):
            raise ToolArgumentsInvalid(name, f"{key!r} must be {described(wanted)}")
    return name, found


async def run(call: Call, caller: Caller, name: str, arguments: dict[str, Any]) -> str:
    """Tool ``name`` (its arguments ``checked``) run as ``caller``: the text the model reads."""
    token = caller.token
    if name == "send_message":
        receipt = await call(protocol.MEMBER_SEND_MESSAGE, {
            "token": token, "to": arguments["to"], "text": arguments["text"],
            "attachments": [caller.absolute(p) for p in arguments.get("attachments", [])]})
        return str(receipt["text"])
    if name == "list_team":
        return _team_text(await call(protocol.MEMBER_LIST_TEAM, {"token": token}))
    if name == "message_status":
        status = await call(protocol.MEMBER_MESSAGE_STATUS, {"token": token,
                                                             "id": arguments["id"]})
        return _status_text(status)
    if name.startswith("task_"):
        method, params = task_call(name, arguments)
        return task_text(name, await call(method, {"token": token, **params}))
    raise AssertionError(name)  # checked let only a listed tool through


def _team_text(card: dict[str, Any]) -> str:
    lines = [f"team {card['team']}:"]
    for m in card["members"]:
        sees = {True: "sees images", False: "text only", None: "vision unknown"}[
            m["sees_images"]]
        if m.get("images_described"):
            sees += f" (images described by {m['images_described']})"
        you = " (you)" if m["you"] else ""
        woken = " (asleep: a message to it wakes it)" if m["launch"] == "asleep" else ""
        lines.append(f"- {m['name']}{you}: {m['runtime']} {m['model'] or 'default model'}, "
                     f"{sees}, {m['launch']}/{m['readiness']}{woken}")
    return "\n".join(lines)


_RECEIPTS = {"queued": "not yet begun", "read": "its turn began",
             "answered": "its turn ended", "failed": "not delivered"}


def _status_text(status: dict[str, Any]) -> str:
    text = f"{status['id']} to {status['to']}: {status['state']}"
    if status.get("receipt") and status["receipt"] != status["state"]:
        text += f" ({status['receipt']}: " + _RECEIPTS[status["receipt"]] + ")"
    if status.get("reply"):
        text += f"; reply: {status['reply']}"
    if status.get("error"):
        text += f"; error: {status['error']}"
    return text
