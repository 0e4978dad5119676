"""The MCP tools' schemas come from the control protocol's table (daemon/mcp/_schema.py): each
tool's ``inputSchema`` is its ``member.*`` method's params model's JSON schema without the
token, plain enough for every runtime (no ``$ref``, no ``anyOf``, no title), so a field added
to a params model is in its tool with no second edit — and checked by the tool."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import Field

from orchestrator import protocol
from orchestrator.daemon.mcp import ToolArgumentsInvalid, tools
from orchestrator.daemon.mcp._schema import KINDS, input_schema
from orchestrator.daemon.mcp._tools import checked
from orchestrator.limits import TOOL_TASK_ID_PATTERN
from orchestrator.protocol.member_tasks import CreateParams, ToolTaskRef
from orchestrator.protocol.members import MemberSendParams

_NAMES = ["send_message", "list_team", "message_status", "task_list", "task_get",
          "task_create", "task_claim", "task_update", "task_complete", "task_release",
          "task_review"]


def _row(tool: dict[str, Any]) -> protocol.Method:
    row = protocol.by_name(f"member.{tool['name']}")
    assert row is not None and row.caller == "member", tool["name"]
    return row


def _keywords(schema: dict[str, Any]) -> set[str]:
    """Every keyword a schema uses, at any depth (property names are not keywords)."""
    found = set(schema)
    for key, value in schema.items():
        if key == "properties":
            for argument in value.values():
                found |= _keywords(argument)
        elif isinstance(value, dict):
            found |= _keywords(value)
    return found


def test_the_tools_are_listed_in_their_order() -> None:
    assert [tool["name"] for tool in tools()] == _NAMES


@pytest.mark.parametrize("tool", tools(), ids=[tool["name"] for tool in tools()])
def test_each_tool_s_schema_is_its_method_s_params_model_without_the_token(
        tool: dict[str, Any]) -> None:
    """The schema listed is the params model's, field for field: the same arguments (the
    token comes from the relay), the same required ones, each described, with the model's
    bounds; the rest of the model's schema (titles, ``$ref``, ``anyOf`` with null) left out."""
    params = protocol.model(_row(tool).params)
    schema = tool["inputSchema"]
    assert schema == input_schema(params)
    wanted = params.model_json_schema()
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert list(schema["properties"]) == [k for k in wanted["properties"] if k != "token"]
    assert schema.get("required", []) == [k for k in wanted.get("required", ())
                                          if k != "token"]
    for key, argument in schema["properties"].items():
        field = params.model_fields[key]
        assert argument["description"] == field.description, key
        assert argument["type"] in KINDS, key
    assert not {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "default"} & _keywords(schema)
    assert "null" not in json.dumps(schema)


def test_a_field_added_to_a_params_model_is_in_its_tool_and_checked() -> None:
    """A subclass with one more field stands for a params model given a field: its schema
    names it, described and bounded as the Field says, required when it has no default."""

    class WithPriority(CreateParams):
        priority: int = Field(ge=1, le=5, description="1 (first) to 5")
        due: ToolTaskRef | None = Field(default=None, description="before this task")

    schema = input_schema(WithPriority)
    assert schema["properties"]["priority"] == {"type": "integer", "description": "1 (first) to 5",
                                                "minimum": 1, "maximum": 5}
    assert schema["properties"]["due"] == {"type": "string", "description": "before this task",
                                           "pattern": TOOL_TASK_ID_PATTERN, "maxLength": 20}
    assert schema["required"] == ["title", "priority"]
    assert {k: v for k, v in schema["properties"].items() if k not in ("priority", "due")} \
        == input_schema(CreateParams)["properties"]


def test_a_description_written_on_the_model_is_the_tool_s() -> None:
    """The tool-facing words live on the model: changing one there changes the tool."""

    class Renamed(MemberSendParams):
        to: str = Field(max_length=200, description="who reads it")

    assert input_schema(Renamed)["properties"]["to"]["description"] == "who reads it"
    send = next(tool for tool in tools() if tool["name"] == "send_message")
    assert send["inputSchema"]["properties"]["to"]["description"] == "the teammate's name"


@pytest.mark.parametrize(("name", "arguments", "sent"), [
    ("task_get", {"id": 3}, {"id": "3"}),
    ("task_get", {"id": "T3"}, {"id": "T3"}),
    ("task_get", {"id": "t3"}, {"id": "t3"}),
    ("task_create", {"title": "t", "blocked_by": [1, "T2"]}, {"title": "t",
                                                              "blocked_by": ["1", "T2"]}),
    ("message_status", {"id": "01J0000000000000000000000A"},
     {"id": "01J0000000000000000000000A"}),
])
def test_what_the_models_send_is_still_taken(name: str, arguments: dict[str, Any],
                                             sent: dict[str, Any]) -> None:
    assert checked(name, arguments) == (name, sent)


@pytest.mark.parametrize(("name", "arguments", "problem"), [
    ("message_status", {"id": "not-a-ulid"}, "'id' must be a string matching"),
    ("task_create", {"title": ""}, "'title' must be a string of at most 200 characters, "
     "at least 1"),
    ("task_create", {"title": "t", "role": "a b"}, "'role' must be a string"),
    ("send_message", {"to": "rev", "text": "hi", "token": "x" * 32}, "no argument named 'token'"),
    ("list_team", {"team": "other"}, "no argument named 'team'; arguments: none"),
])
def test_the_model_s_bounds_are_the_tool_s_checks(name: str, arguments: dict[str, Any],
                                                  problem: str) -> None:
    """What the params model bounds the tool refuses before the daemon is called — the
    token above all: a member never names one (its relay's is used)."""
    with pytest.raises(ToolArgumentsInvalid) as refused:
        checked(name, arguments)
    assert problem in refused.value.message
