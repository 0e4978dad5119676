"""The board's MCP tools in the daemon's MCP server (in process, a fake of the member methods
that records each call and answers a task): each tool calls its ``member.task_*`` method with
the member's token, ``T3``/``3``/the integer 3 mean task 3, results are small JSON texts (a body
cut past its bound), a refusal is a tool error starting with its code, and hostile arguments
are refused before any method is called."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.daemon.mcp import Caller, McpServer
from orchestrator.errors import error_from_wire

if TYPE_CHECKING:
    from orchestrator import protocol

TOKEN = "t" * 32


def _task(task_id: int, **fields: Any) -> dict[str, Any]:
    """A task as the daemon's JSON names it (T3: one form in every output)."""
    return {"id": f"T{task_id}", "team": "web", "title": f"task {task_id}", "body": "",
            "role": None, "priority": 0, "state": "ready", "owner": None, "epoch": None,
            "lease_until": None, "blocked_by": [], "blocked": None, "check": None,
            "created_by": "lead", "summary": None, "evidence": None, "created_at": 0.0,
            "updated_at": 0.0, **fields}


class _Daemon:
    """The member methods: records each call, answers ``answers[method]`` (a result, or an
    ``error`` object as the control server sends a refusal)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {}

    async def call(self, row: protocol.Method, params: dict[str, Any]) -> Any:
        self.requests.append({"method": row.name, "params": dict(params)})
        answer = self.answers.get(row.name, {"result": _task(1)})
        if "error" in answer:
            raise error_from_wire(answer["error"]["data"])
        return answer["result"]


@pytest.fixture
def daemon() -> _Daemon:
    return _Daemon()


def _call(daemon: _Daemon, tool: str, arguments: Any) -> tuple[str, bool]:
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}).encode() + b"\n"
    server = McpServer(daemon.call)
    reply = anyio.run(server.answer, Caller(TOKEN), line)
    result = json.loads(reply.line)["result"]
    return result["content"][0]["text"], result["isError"]


def test_each_task_tool_calls_its_member_method_with_the_token_and_ids_as_numbers(
        daemon: _Daemon) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("task_list", {"filter": "ready", "after": "T7"}),
        ("task_get", {"id": "T3"}),
        ("task_create", {"title": "ship", "body": "b", "blocked_by": ["T1", "2", 3],
                         "role": "dev", "assignee": "ops"}),
        ("task_claim", {}),
        ("task_claim", {"id": 4}),
        ("task_update", {"id": "t5", "note": "half"}),
        ("task_complete", {"id": "6", "summary": "s", "evidence": "e"}),
        ("task_release", {"id": "T7", "reason": "r"}),
        ("task_review", {"id": "T8", "approve": True, "note": "fine"}),
    ]
    daemon.answers["member.task_list"] = {"result": {"team": "web", "tasks": [], "total": 0,
                                                     "next_after": None}}
    daemon.answers["member.task_get"] = {"result": {"task": _task(3), "depends_on": [],
                                                    "dependents": [], "events": []}}
    for tool, arguments in calls:
        text, is_error = _call(daemon, tool, arguments)
        assert not is_error, text
    sent = [(r["method"], r["params"]) for r in daemon.requests]
    assert [m for m, _ in sent] == [f"member.{tool}" for tool, _ in calls]
    assert all(p.pop("token") == TOKEN for _, p in sent)
    assert [p for _, p in sent] == [
        {"filter": "ready", "after": 7}, {"id": 3},
        {"title": "ship", "body": "b", "blocked_by": [1, 2, 3], "role": "dev",
         "assignee": "ops"},
        {}, {"id": 4}, {"id": 5, "note": "half"}, {"id": 6, "summary": "s", "evidence": "e"},
        {"id": 7, "reason": "r"}, {"id": 8, "approve": True, "note": "fine"}]


def test_results_are_small_json_and_a_long_body_is_cut(daemon: _Daemon) -> None:
    events = [{"at": 0.0, "actor": "lead", "kind": "updated", "note": "n" * 1000}] * 30
    daemon.answers["member.task_get"] = {"result": {
        "task": _task(3, body="b" * 100_000, blocked_by=["T1"], state="blocked",
                      blocked="blocked by T1 (pending)"),
        "depends_on": ["T1"], "dependents": ["T4"], "events": events}}
    text, _ = _call(daemon, "task_get", {"id": "T3"})
    shown = json.loads(text)
    assert len(text) < 20_000  # body, summary, evidence: 4000 each; 20 notes of 300
    assert (shown["id"], shown["state"], shown["blocked_by"], shown["dependents"]) == (
        "T3", "blocked", ["T1"], ["T4"])
    assert shown["body"].endswith("… (cut)") and len(shown["body"]) < 4100
    assert len(shown["events"]) == 20 and shown["earlier_events"] == 10
    daemon.answers["member.task_list"] = {"result": {
        "team": "web", "tasks": [_task(n, body="x" * 60_000) for n in range(1, 51)],
        "total": 10_000, "next_after": "T50"}}
    listed = json.loads(_call(daemon, "task_list", {})[0])
    assert (listed["total"], listed["next_after"], len(listed["tasks"])) == (10_000, "T50", 50)
    assert "body" not in listed["tasks"][0], "a list never carries bodies"
    claimed = json.loads(_call(daemon, "task_claim", {})[0])
    assert claimed == {"id": "T1", "title": "task 1", "state": "ready", "owner": None,
                       "blocked_by": []}


def test_a_daemon_refusal_is_a_tool_error_starting_with_its_code(daemon: _Daemon) -> None:
    daemon.answers["member.task_complete"] = {"error": {
        "code": 1, "message": "T3 is held by dev",
        "data": {"code": "task_not_owner", "message": "T3 is held by dev, not ops",
                 "retryable": False, "exit_code": 1}}}
    text, is_error = _call(daemon, "task_complete", {"id": "T3", "summary": "mine"})
    assert is_error and text.startswith("task_not_owner: T3 is held by dev"), text


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("task_get", {"id": "abc"}, "'id' must be a task id (T3 or 3)"),
    ("task_get", {"id": "T3; rm -rf /"}, "'id' must be a task id"),
    ("task_get", {"id": "1" * 25}, "'id' must be a task id"),
    ("task_get", {"id": True}, "'id' must be a task id"),
    ("task_get", {"id": 3.5}, "'id' must be a task id"),
    ("task_get", {"id": None}, "'id' must be a task id"),
    ("task_get", {}, "'id' is required"),
    ("task_create", {"title": "x" * 201}, "'title' must be a string of at most 200"),
    ("task_create", {"title": "t", "body": "b" * 65_537}, "'body' must be a string of at most"),
    ("task_create", {"title": "t", "blocked_by": "T1"}, "'blocked_by' must be an array"),
    ("task_create", {"title": "t", "blocked_by": ["T1"] * 101}, "at most 100"),
    ("task_create", {"title": "t", "blocked_by": [{"id": 1}]}, "of task ids"),
    ("task_create", {"title": "t", "owner": "me"}, "no argument named 'owner'"),
    ("task_list", {"filter": "everything"}, "'filter' must be one of all, mine, ready"),
    ("task_review", {"id": "T1", "approve": "yes", "note": "n"}, "'approve' must be true or"),
    ("task_update", {"id": "T1", "note": ["n"]}, "'note' must be a string"),
    ("task_claim", [], "the arguments must be a JSON object"),
])
def test_hostile_task_tool_arguments_never_reach_the_daemon(
        daemon: _Daemon, tool: str, arguments: Any, expected: str) -> None:
    text, is_error = _call(daemon, tool, arguments)
    assert is_error and text.startswith(f"mcp_arguments_invalid: {tool}: "), text
    assert expected in text, text
    assert daemon.requests == []
