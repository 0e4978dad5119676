"""The board's MCP tools (docs/board.md): their descriptions (each one's ``inputSchema`` is its
``member.task_*`` method's params model: ``_schema``), and their results as small JSON texts.

The MCP server lists these beside the messaging tools and calls ``member.task_*`` with the
member's token (``_tools``). A task is named ``T3`` or ``3`` (a model that
sends the integer 3 is understood) and shown ``T3``, as in every output. Results are bounded:
a task as its id, title, state, owner and what blocks it; ``task_get`` adds the body (its first
``_BODY_CHARS`` characters), the summary and the last ``_EVENTS`` events of its lifetime.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from orchestrator import protocol
from orchestrator.daemon.mcp._schema import input_schema

__all__ = ["task_call", "task_id", "task_text", "task_tools"]

_BODY_CHARS = 4000
_NOTE_CHARS = 300
_EVENTS = 20


def _tool(name: str, description: str) -> dict[str, Any]:
    """Tool ``name``: its description; its ``inputSchema`` from ``member.name``'s params."""
    row = protocol.MEMBER_TASKS[name]
    return {"name": name, "description": description,
            "inputSchema": input_schema(protocol.model(row.params))}


def task_tools() -> list[dict[str, Any]]:
    """The board's tools, their schemas generated from the protocol table when first
    listed (``tools()``: building them at import built every params model the daemon had
    deferred)."""
    return [
        _tool("task_list", "The team's board, one page (50 tasks, id order): id, title, state "
              "(ready, blocked, in_progress, review, done, failed, cancelled), owner, what blocks "
              "it. filter: all (default), mine, or a state; after: the next page's start."),
        _tool("task_get", "One task: its body, summary, dependencies and its lifetime."),
        _tool("task_create", "Add a task to the team's board. blocked_by: the tasks it waits on "
              "(it is ready once they are all done); assignee: only the lead assigns."),
        _tool("task_claim", "Take a ready task: the one named, or (no id) the next ready task for "
              "you. You then own it until you complete or release it."),
        _tool("task_update", "Add a progress note to a task you own."),
        _tool("task_complete", "Say a task you own is done: a summary, and evidence (a test run, "
              "a commit). A check may keep it in progress and send you its output."),
        _tool("task_release", "Give a task you own back to the board (pending, nobody's), with "
              "why."),
        _tool("task_review", "As a task's reviewer: approve it (done) or send it back to its owner "
              "(in progress) with a note."),
    ]


def task_id(value: str) -> int:
    """``T3``/``3`` as 3 (the schema's ``TOOL_TASK_ID_PATTERN`` has been checked)."""
    return int(value.lstrip("Tt"))


def task_call(name: str, arguments: dict[str, Any]) -> tuple[protocol.Method, dict[str, Any]]:
    """The daemon method (tool ``task_x``: ``member.task_x``) and params (without the token)
    for a task tool's call."""
    params = dict(arguments)
    for key in ("id", "after"):
        if key in params:
            params[key] = task_id(params[key])
    if "blocked_by" in params:
        params["blocked_by"] = [task_id(b) for b in params["blocked_by"]]
    return protocol.MEMBER_TASKS[name], params


def task_text(name: str, result: dict[str, Any]) -> str:
    """A task tool's result as the model reads it: one small JSON object."""
    if name == "task_list":
        doc: dict[str, Any] = {"tasks": [_brief(t) for t in result["tasks"]],
                               "total": result["total"]}
        if result.get("next_after") is not None:
            doc["next_after"] = result["next_after"]
        return json.dumps(doc, ensure_ascii=False)
    if name == "task_get":
        return json.dumps(_details(result), ensure_ascii=False)
    return json.dumps(_brief(result), ensure_ascii=False)


def _brief(task: dict[str, Any]) -> dict[str, Any]:
    doc = {"id": task["id"], "title": task["title"], "state": task["state"],
           "owner": task.get("owner"), "blocked_by": task["blocked_by"]}
    for key in ("blocked", "role"):
        if task.get(key):
            doc[key] = task[key]
    return doc


def _cut(text: str | None, limit: int) -> str | None:
    return text if text is None or len(text) <= limit else text[:limit] + "… (cut)"


def _details(shown: dict[str, Any]) -> dict[str, Any]:
    task = shown["task"]
    doc = _brief(task)
    doc.update(body=_cut(task.get("body"), _BODY_CHARS),
               summary=_cut(task.get("summary"), _BODY_CHARS),
               evidence=_cut(task.get("evidence"), _BODY_CHARS),
               dependents=shown["dependents"])
    events = shown["events"]
    doc["events"] = [{"at": datetime.fromtimestamp(e["at"], UTC).isoformat(timespec="seconds"),
                      "by": e["actor"], "kind": e["kind"],
                      "note": _cut(e.get("note"), _NOTE_CHARS)} for e in events[-_EVENTS:]]
    if len(events) > _EVENTS:
        doc["earlier_events"] = len(events) - _EVENTS
    return doc
