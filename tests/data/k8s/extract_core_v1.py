"""How core_v1_pod_pvc.json was made (run once; kept as the provenance of the file).

Input: kubernetes-client/python's ``kubernetes/swagger.json.unprocessed`` (README.md: the
Kubernetes OpenAPI v2 document of release-1.36, as the client generator took it from
kubernetes/kubernetes ``api/openapi-spec/swagger.json``). Output: the definitions a Pod and a
PersistentVolumeClaim reach through ``$ref`` — copied as they are, nothing edited by hand.
"""

from __future__ import annotations

import json
import sys
from typing import Any

ROOTS = ("io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PersistentVolumeClaim")


def refs(node: Any) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                found.add(ref.rsplit("/", 1)[-1])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def main(source: str, target: str) -> None:
    with open(source, encoding="utf-8") as handle:
        spec = json.load(handle)
    definitions = spec["definitions"]
    keep: dict[str, Any] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = definitions[name]
        todo.extend(refs(definitions[name]) - set(keep))
    with open(target, "w", encoding="utf-8") as handle:
        json.dump({"swagger": spec["swagger"], "info": spec["info"],
                   "definitions": dict(sorted(keep.items()))}, handle, indent=1, sort_keys=True)
        handle.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
