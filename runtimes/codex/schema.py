"""What ``runtimes.codex.app_server`` relies on in the ``codex app-server`` protocol, checked
against the JSON schema a codex build prints (``codex app-server generate-json-schema --out DIR``).

The app-server is marked experimental and its protocol moves between releases; a field teamctl
reads or sends that disappears would make turns hang or fail in ways no fake can show. So the
fields are listed here, as data, and ``check`` walks the generated schema for each — through
``$ref``, ``oneOf``/``anyOf``/``allOf`` and array items — and names the method and the path of
every one that is gone, or every enum value that is no longer allowed. A test runs it on the
pinned CLI in CI; ``teamctl doctor`` could run it on another build.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["RELIED_ON", "Relied", "check", "check_documents"]


@dataclass(frozen=True)
class Relied:
    """One field: in ``document`` (a schema file's name, without ``.json``), for ``method``
    (its ``params``; or the document's root when ``method`` is None), at ``path`` ("[]" steps
    into array items), allowing every one of ``values`` when given."""

    document: str
    method: str | None
    path: tuple[str, ...]
    values: tuple[str, ...] = ()
    why: str = ""

    @property
    def label(self) -> str:
        where = ".".join(self.path)
        return f"{self.method or self.document}: {where}" if where else (
            self.method or self.document)


_C, _N, _R = "ClientRequest", "ServerNotification", "ServerRequest"

RELIED_ON: tuple[Relied, ...] = (
    Relied(_C, "initialize", ("clientInfo", "name")),
    Relied(_C, "initialize", ("clientInfo", "version")),
    Relied(_C, "initialize", ("capabilities", "experimentalApi")),
    Relied(_C, "thread/start", ("cwd",)),
    Relied(_C, "thread/start", ("model",)),
    Relied(_C, "thread/start", ("sandbox",),
           ("read-only", "workspace-write", "danger-full-access"), "the permission profiles"),
    Relied(_C, "thread/start", ("approvalPolicy",), ("never",)),
    Relied(_C, "thread/start", ("developerInstructions",), why="the member's role"),
    Relied(_C, "thread/resume", ("threadId",)),
    Relied(_C, "thread/resume", ("excludeTurns",), why="no full history on every resume"),
    Relied(_C, "thread/resume", ("sandbox",), ("read-only", "workspace-write",
                                                "danger-full-access")),
    Relied(_C, "thread/resume", ("developerInstructions",)),
    Relied(_C, "thread/read", ("threadId",), why="the idle liveness probe"),
    Relied(_C, "turn/start", ("threadId",)),
    Relied(_C, "turn/start", ("input", "[]", "type"), ("text", "localImage")),
    Relied(_C, "turn/start", ("input", "[]", "text")),
    Relied(_C, "turn/start", ("input", "[]", "text_elements")),
    Relied(_C, "turn/start", ("input", "[]", "path"), why="localImage files, byte for byte"),
    Relied(_C, "turn/interrupt", ("threadId",)),
    Relied(_C, "turn/interrupt", ("turnId",)),
    Relied("v2/ThreadStartResponse", None, ("thread", "id")),
    Relied("v2/TurnStartResponse", None, ("turn", "id")),
    Relied(_N, "turn/completed", ("turn", "status"), ("completed", "failed", "interrupted")),
    Relied(_N, "turn/completed", ("turn", "error", "message")),
    Relied(_N, "turn/completed", ("turn", "error", "codexErrorInfo")),
    Relied(_N, "item/completed", ("item", "type"), ("agentMessage", "commandExecution")),
    Relied(_N, "item/completed", ("item", "text")),
    Relied(_N, "item/completed", ("item", "exitCode")),
    Relied(_N, "item/completed", ("item", "aggregatedOutput")),
    Relied(_N, "item/started", ("item", "command")),
    Relied(_N, "item/started", ("item", "id"), why="a tool call's span (docs/telemetry.md)"),
    Relied(_N, "item/started", ("item", "type"),
           ("commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch")),
    Relied(_N, "item/completed", ("item", "status"), ("completed", "failed", "declined")),
    Relied(_N, "item/completed", ("item", "tool")),
    Relied(_N, "item/completed", ("item", "server")),
    Relied(_N, "error", ("willRetry",), why="a fatal error must end the turn"),
    Relied(_N, "error", ("error", "message")),
    Relied(_N, "thread/tokenUsage/updated", ("tokenUsage", "last", "inputTokens")),
    Relied(_N, "thread/tokenUsage/updated", ("tokenUsage", "last", "cachedInputTokens")),
    Relied(_N, "thread/tokenUsage/updated", ("tokenUsage", "last", "outputTokens")),
    Relied(_N, "thread/tokenUsage/updated", ("tokenUsage", "last", "reasoningOutputTokens")),
    Relied(_N, "thread/tokenUsage/updated", ("tokenUsage", "total", "totalTokens")),
    Relied(_N, "account/rateLimits/updated", ("rateLimits", "primary", "usedPercent")),
    Relied(_N, "item/agentMessage/delta", ("delta",)),
    Relied(_R, "item/commandExecution/requestApproval", ("command",)),
    Relied("CommandExecutionRequestApprovalResponse", None, ("decision",), ("decline",)),
    Relied("FileChangeRequestApprovalResponse", None, ("decision",), ("decline",)),
    Relied("McpServerElicitationRequestResponse", None, ("action",), ("decline",)),
)


def check(schema_dir: Path, relied: tuple[Relied, ...] = RELIED_ON) -> list[str]:
    """Every relied-on field the schema in ``schema_dir`` no longer has, one line each."""
    documents: dict[str, Any] = {}
    for name in {r.document for r in relied}:
        path = schema_dir / f"{name}.json"
        try:
            documents[name] = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            documents[name] = exc
    return check_documents(documents, relied)


def check_documents(documents: dict[str, Any], relied: tuple[Relied, ...] = RELIED_ON
                    ) -> list[str]:
    problems = []
    for item in relied:
        document = documents.get(item.document)
        if not isinstance(document, dict):
            problems.append(f"{item.label}: no schema document {item.document}.json "
                            f"({document})")
            continue
        problem = _check_one(document, item)
        if problem:
            problems.append(f"{item.label}: {problem}" + (f" ({item.why})" if item.why else ""))
    return problems


def _check_one(document: dict[str, Any], item: Relied) -> str | None:
    walker = _Walker(document)
    if item.method is None:
        nodes = [document]
    else:
        nodes = walker.method_params(item.method)
        if not nodes:
            return "the method is gone"
    for step in item.path:
        nodes = walker.step(nodes, step)
        if not nodes:
            return f"no {step!r} there any more"
    if item.values:
        allowed = walker.values(nodes)
        missing = [v for v in item.values if v not in allowed]
        if missing:
            return f"no longer allows {', '.join(missing)}"
    return None


class _Walker:
    """Follows a schema document's references and combinators (bounded: no cycle loops)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self._definitions = document.get("definitions") or {}
        self._document = document

    def resolve(self, node: Any, depth: int = 0) -> list[dict[str, Any]]:
        """``node`` and its combinator branches, references followed, as plain objects."""
        if not isinstance(node, dict) or depth > 32:
            return []
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            return self.resolve(self._definitions.get(ref.rsplit("/", 1)[1]), depth + 1)
        found = [node]
        for key in ("oneOf", "anyOf", "allOf"):
            for branch in node.get(key) or []:
                found += self.resolve(branch, depth + 1)
        return found

    def method_params(self, method: str) -> list[dict[str, Any]]:
        for variant in self.resolve(self._document):
            wanted = ((variant.get("properties") or {}).get("method") or {})
            if method in (wanted.get("enum") or []) or wanted.get("const") == method:
                return self.resolve((variant.get("properties") or {}).get("params"))
        return []

    def step(self, nodes: list[dict[str, Any]], step: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for node in nodes:
            for resolved in self.resolve(node):
                child = resolved.get("items") if step == "[]" else \
                    (resolved.get("properties") or {}).get(step)
                if isinstance(child, dict):  # present, even if its type cannot be followed
                    out += self.resolve(child) or [{}]
        return out

    def values(self, nodes: list[dict[str, Any]]) -> set[str]:
        allowed: set[str] = set()
        for node in nodes:
            for resolved in self.resolve(node):
                allowed.update(v for v in resolved.get("enum") or [] if isinstance(v, str))
                if isinstance(resolved.get("const"), str):
                    allowed.add(resolved["const"])
        return allowed
