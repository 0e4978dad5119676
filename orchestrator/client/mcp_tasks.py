"""The board's MCP tools (docs/board.md): their schemas, and their results as small JSON texts.

``teamctl mcp`` lists these beside the messaging tools and calls ``member.task_*`` on the
daemon with the member's token (``mcp_server``). A task is named ``T3`` or ``3`` (a model that
sends the integer 3 is understood) and shown ``T3``, as in every output. Results are bounded:
a task as its id, title, state, owner and what blocks it; ``task_get`` adds the body (its first
``_BODY_CHARS`` characters), the summary and the last ``_EVENTS`` events of its lifetime.
Standard library only (the MCP server starts once per member).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

__all__ = ["ID_PATTERN", "TASK_TOOLS", "coerce_ids", "described", "matches", "task_call",
           "task_id", "task_text"]

ID_PATTERN = "^[Tt]?[0-9]{1,19}$"
_ID_RE = re.compile(ID_PATTERN)
_BODY_CHARS = 4000
_NOTE_CHARS = 300
_EVENTS = 20
_TEXT_CHARS = 65536
_FILTERS = ["all", "mine", "ready", "blocked", "in_progress", "review", "done", "failed",
            "cancelled"]


def _id(what: str) -> dict[str, Any]:
    return {"type": "string", "pattern": ID_PATTERN, "maxLength": 20,
            "description": f"{what}: T3 or 3"}


def _text(what: str, limit: int = _TEXT_CHARS) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit, "description": what}


def _tool(name: str, description: str, required: list[str],
          properties: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "additionalProperties": False,
                            "required": required, "properties": properties}}


_NAME = {"type": "string", "maxLength": 64}
TASK_TOOLS: list[dict[str, Any]] = [
    _tool("task_list", "The team's board, one page (50 tasks, id order): id, title, state "
          "(ready, blocked, in_progress, review, done, failed, cancelled), owner, what blocks "
          "it. filter: all (default), mine, or a state; after: the next page's start.", [],
          {"filter": {"type": "string", "enum": _FILTERS, "description": "which tasks"},
           "after": _id("list the tasks after this one")}),
    _tool("task_get", "One task: its body, summary, dependencies and its lifetime.", ["id"],
          {"id": _id("the task")}),
    _tool("task_create", "Add a task to the team's board. blocked_by: the tasks it waits on "
          "(it is ready once they are all done); assignee: only the lead assigns.",
          ["title"],
          {"title": _text("one line", 200), "body": _text("what to do, how to tell it is done"),
           "blocked_by": {"type": "array", "items": _id("a task"), "maxItems": 100,
                          "description": "the tasks it waits on"},
           "role": {**_NAME, "description": "only a member of this role may claim it"},
           "assignee": {**_NAME, "description": "the teammate it is handed to (lead only)"}}),
    _tool("task_claim", "Take a ready task: the one named, or (no id) the next ready task for "
          "you. You then own it until you complete or release it.", [],
          {"id": _id("the task (omit: the next ready task for you)")}),
    _tool("task_update", "Add a progress note to a task you own.", ["id", "note"],
          {"id": _id("the task"), "note": _text("what changed")}),
    _tool("task_complete", "Say a task you own is done: a summary, and evidence (a test run, "
          "a commit). A check may keep it in progress and send you its output.",
          ["id", "summary"],
          {"id": _id("the task"), "summary": _text("what was done"),
           "evidence": _text("how it was checked")}),
    _tool("task_release", "Give a task you own back to the board (pending, nobody's), with why.",
          ["id", "reason"], {"id": _id("the task"), "reason": _text("why")}),
    _tool("task_review", "As a task's reviewer: approve it (done) or send it back to its owner "
          "(in progress) with a note.", ["id", "approve", "note"],
          {"id": _id("the task"), "approve": {"type": "boolean"},
           "note": _text("what you found")}),
]


def task_id(value: str) -> int:
    """``T3``/``3`` as 3 (the schema's pattern has been checked)."""
    return int(value.lstrip("Tt"))


def task_call(name: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The daemon method and params (without the token) for a task tool's call."""
    params = dict(arguments)
    for key in ("id", "after"):
        if key in params:
            params[key] = task_id(params[key])
    if "blocked_by" in params:
        params["blocked_by"] = [task_id(b) for b in params["blocked_by"]]
    return f"member.{name}", params


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


def matches(schema: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` fits the (small) schema the tools use: string (maxLength, enum,
    pattern), boolean, array (items, maxItems)."""
    kind = schema["type"]
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return (isinstance(value, list) and len(value) <= schema.get("maxItems", len(value))
                and all(matches(schema["items"], item) for item in value))
    if not isinstance(value, str) or len(value) > schema.get("maxLength", len(value)):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    return "pattern" not in schema or _ID_RE.match(value) is not None


def described(schema: dict[str, Any]) -> str:
    """What ``matches`` wants, in words (for the tool error)."""
    kind = schema["type"]
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        bound = f" (at most {schema['maxItems']})" if "maxItems" in schema else ""
        items = "task ids (T3 or 3)" if "pattern" in schema["items"] else "strings"
        return f"an array{bound} of {items}"
    if "enum" in schema:
        return "one of " + ", ".join(schema["enum"])
    if "pattern" in schema:
        return "a task id (T3 or 3)"
    return f"a string of at most {schema['maxLength']} characters" if "maxLength" in schema \
        else "a string"


def coerce_ids(schema: dict[str, Any], value: Any) -> Any:
    """A model that sends a task id as the integer 3 means "3"."""
    if schema["type"] == "array" and isinstance(value, list):
        return [coerce_ids(schema["items"], v) for v in value]
    if "pattern" in schema and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value
