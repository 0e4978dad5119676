"""The app-server schema check on small documents: references, combinators, array items and
enums are followed, and each missing field or value is one line naming the method."""

from __future__ import annotations

from typing import Any

from runtimes.codex.schema import Relied, check_documents


def _requests(params: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [{"properties": {"method": {"enum": ["turn/start"]},
                                      "params": {"$ref": "#/definitions/TurnStartParams"}}}],
            "definitions": {"TurnStartParams": params, **definitions}}


_INPUT = {"oneOf": [
    {"properties": {"type": {"enum": ["text"]}, "text": {"type": "string"}}},
    {"properties": {"type": {"const": "localImage"}, "path": {"type": "string"}}},
]}
_PARAMS = {"properties": {"threadId": {"type": "string"},
                          "input": {"type": "array", "items": {"$ref": "#/definitions/In"}}}}
RELIED = (
    Relied("ClientRequest", "turn/start", ("threadId",)),
    Relied("ClientRequest", "turn/start", ("input", "[]", "type"), ("text", "localImage")),
    Relied("ClientRequest", "turn/start", ("input", "[]", "path"), why="images"),
)


def test_a_schema_with_every_field_passes() -> None:
    documents = {"ClientRequest": _requests(_PARAMS, {"In": _INPUT})}
    assert check_documents(documents, RELIED) == []


def test_each_missing_field_value_or_method_is_named() -> None:
    narrowed = {"oneOf": [_INPUT["oneOf"][0]]}  # localImage is gone
    documents = {"ClientRequest": _requests(_PARAMS, {"In": narrowed})}
    assert check_documents(documents, RELIED) == [
        "turn/start: input.[].type: no longer allows localImage",
        "turn/start: input.[].path: no 'path' there any more (images)"]
    renamed = {"properties": {"thread_id": {}, "input": _PARAMS["properties"]["input"]}}
    problems = check_documents({"ClientRequest": _requests(renamed, {"In": _INPUT})}, RELIED)
    assert problems == ["turn/start: threadId: no 'threadId' there any more"]
    gone = {"oneOf": [], "definitions": {}}
    assert check_documents({"ClientRequest": gone}, RELIED[:1]) == [
        "turn/start: threadId: the method is gone"]
    assert "no schema document" in check_documents({}, RELIED[:1])[0]


def test_a_reference_cycle_ends() -> None:
    loop = {"properties": {"threadId": {"$ref": "#/definitions/Loop"}}}
    documents = {"ClientRequest": _requests(loop, {"Loop": {"$ref": "#/definitions/Loop"}})}
    assert check_documents(documents, RELIED[:1]) == []
