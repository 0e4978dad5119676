"""A tool's ``inputSchema`` made from its method's params model, and an argument checked
against it.

Each tool calls one ``member.*`` method of the control protocol (orchestrator/protocol/); its
``inputSchema`` is that method's params model's JSON schema without what the daemon fills in
(the member's token), so a field added to a params model is in its tool with no second edit.
The schema is made plain for every runtime that reads it (Claude Code, Codex, OpenCode, the
ACP agents' Gemini and Qwen): ``$ref`` inlined, an optional field's ``anyOf`` with ``null`` its
one type (an omitted argument is the model's default), pydantic's titles and defaults left out,
only the keywords ``matches`` checks kept. The descriptions the model reads are the params
models' ``Field(description=…)``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from orchestrator.limits import TOOL_TASK_ID_PATTERN

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["FILLED", "KINDS", "coerce_ids", "described", "input_schema", "matches"]

FILLED = frozenset({"token"})  # the daemon's part of a member method's params: never the model's
KINDS = frozenset({"string", "boolean", "integer", "array"})  # what ``matches`` checks
_KEPT = ("type", "description", "enum", "pattern", "minLength", "maxLength", "minimum",
         "maximum", "items", "maxItems", "properties", "required", "additionalProperties")


def input_schema(params: type[BaseModel]) -> dict[str, Any]:
    """The tool's ``inputSchema``: ``params``' JSON schema, plain, without ``FILLED``."""
    found = params.model_json_schema()
    schema = _plain(found, found.get("$defs", {}))
    schema["properties"] = {key: value for key, value in schema.get("properties", {}).items()
                            if key not in FILLED}
    required = [key for key in schema.pop("required", ()) if key not in FILLED]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _plain(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` inlined, a lone non-null ``anyOf`` option merged in, and
    only the ``_KEPT`` keywords (its properties and items likewise)."""
    if "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[-1]],
                **{k: v for k, v in node.items() if k != "$ref"}}
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"a tool argument of several types: {node['anyOf']}")
        option = _plain(options[0], defs)
        node = {**option, **{k: v for k, v in node.items() if k != "anyOf"}}
    plain = {key: node[key] for key in _KEPT if key in node}
    if "items" in plain:
        plain["items"] = _plain(plain["items"], defs)
    if "properties" in plain:
        plain["properties"] = {key: _plain(value, defs)
                               for key, value in plain["properties"].items()}
    return plain


def matches(schema: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` fits a tool argument's schema: string (minLength, maxLength, enum,
    pattern), boolean, integer (minimum, maximum), array (items, maxItems)."""
    kind = schema["type"]
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)
                and schema.get("minimum", value) <= value <= schema.get("maximum", value))
    if kind == "array":
        return (isinstance(value, list) and len(value) <= schema.get("maxItems", len(value))
                and all(matches(schema["items"], item) for item in value))
    if kind != "string" or not isinstance(value, str):
        return False
    if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    return "pattern" not in schema or re.search(schema["pattern"], value) is not None


def described(schema: dict[str, Any]) -> str:
    """What ``matches`` wants, in words (for the tool error)."""
    kind = schema["type"]
    if kind == "boolean":
        return "true or false"
    if kind == "integer":
        return f"an integer from {schema.get('minimum', '-∞')} to {schema.get('maximum', '∞')}"
    if kind == "array":
        bound = f" (at most {schema['maxItems']})" if "maxItems" in schema else ""
        items = schema["items"]
        what = "task ids (T3 or 3)" if items.get("pattern") == TOOL_TASK_ID_PATTERN \
            else "strings" if items["type"] == "string" else f"{items['type']}s"
        return f"an array{bound} of {what}"
    if "enum" in schema:
        return "one of " + ", ".join(schema["enum"])
    if schema.get("pattern") == TOOL_TASK_ID_PATTERN:
        return "a task id (T3 or 3)"
    text = "a string"
    if "maxLength" in schema:
        text += f" of at most {schema['maxLength']} characters"
    if schema.get("minLength"):
        text += f", at least {schema['minLength']}"
    if "pattern" in schema:
        text += f" matching {schema['pattern']}"
    return text


def coerce_ids(schema: dict[str, Any], value: Any) -> Any:
    """A model that sends a task id as the integer 3 means "3"."""
    if schema["type"] == "array" and isinstance(value, list):
        return [coerce_ids(schema["items"], v) for v in value]
    if (schema.get("pattern") == TOOL_TASK_ID_PATTERN and isinstance(value, int)
            and not isinstance(value, bool)):
        return str(value)
    return value
