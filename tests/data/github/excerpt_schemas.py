"""How the pull-request schemas of openapi_excerpt.json were cut from GitHub's description
(run by hand, never by the tests): ``python excerpt_schemas.py api.github.com.json`` with the
description as the npm package @octokit/openapi 23.0.2 ships it (generated/api.github.com.json,
OpenAPI 3.0.3, copied from github/rest-api-description). Each schema keeps its ``required``
list and its properties' types whole; OpenAPI 3.0's ``nullable`` becomes a JSON Schema type
list; a ``$ref`` to ``simple-user`` (kept in the excerpt) stays, any other becomes a plain
value of the referenced schema's own type (null allowed where that schema is nullable);
examples and descriptions are dropped."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

NAMES = ("pull-request", "review-comment", "pull-request-review-comment",
         "combined-commit-status", "simple-commit-status", "pull-request-merge-result")
_KEPT_REFS = {"#/components/schemas/simple-user"}
_SCHEMAS: dict[str, Any] = {}  # the whole description's, while main runs


def cut(node: Any, *, names: bool = False) -> Any:
    """``node`` cut as the module says (``names``: a ``properties`` map, whose keys are
    property names, never keywords)."""
    if isinstance(node, list):
        return [cut(item) for item in node]
    if names:
        return {k: cut(v) for k, v in node.items()}
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if ref is not None:
        if ref in _KEPT_REFS or ref.endswith(tuple(f"/{n}" for n in NAMES)):
            return {"$ref": ref}
        if ref == "#/components/schemas/nullable-simple-user":
            return {"anyOf": [{"type": "null"}, {"$ref": "#/components/schemas/simple-user"}]}
        target = _SCHEMAS.get(ref.rpartition("/")[2], {})
        kind = target.get("type", "object")
        return {"type": [kind, "null"] if target.get("nullable") else kind}
    out = {k: cut(v, names=k == "properties") for k, v in node.items()
           if k not in ("example", "examples", "description", "nullable", "format")}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def main(path: str, excerpt: str) -> None:
    schemas = json.loads(Path(path).read_text())["components"]["schemas"]
    _SCHEMAS.update(schemas)
    doc = json.loads(Path(excerpt).read_text())
    for name in NAMES:
        doc["components"]["schemas"][name] = cut(schemas[name])
    Path(excerpt).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else
         str(Path(__file__).with_name("openapi_excerpt.json")))
