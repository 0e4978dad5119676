"""The control protocol: JSON-RPC 2.0, one request per line, over the Unix socket.

Shared by the client (CLI) and the server (daemon). Standard library only: the CLI imports it.
A request is at most REQUEST_LIMIT_BYTES and nests at most MAX_DEPTH arrays/objects deep:
``decode`` enforces both, so no input can exhaust the parser's stack or the daemon's memory.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.limits import MAX_DEPTH, REQUEST_LIMIT_BYTES

__all__ = [
    "APP_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_DEPTH",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_LIMIT_BYTES",
    "RequestRejected",
    "decode",
    "encode",
    "error_response",
    "request",
    "result_response",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
APP_ERROR = -32000


class RequestRejected(ValueError):
    """A request line that is not a JSON object within the bounds (``code``: a JSON-RPC code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def decode(line: bytes, *, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """One request line as a JSON object; RequestRejected if it is not JSON, not UTF-8, not an
    object, or nested deeper than ``max_depth``."""
    try:
        value = json.loads(line)
    except RecursionError:
        raise RequestRejected(PARSE_ERROR, f"nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError:
        raise RequestRejected(PARSE_ERROR, "not UTF-8") from None
    except ValueError:
        raise RequestRejected(PARSE_ERROR, "not JSON") from None
    if not isinstance(value, dict):
        raise RequestRejected(INVALID_REQUEST, "not a JSON-RPC 2.0 request")
    if _depth(value, max_depth) > max_depth:
        raise RequestRejected(PARSE_ERROR, f"nested deeper than {max_depth} levels")
    return value


def _depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests (iteratively, stopping once past ``limit``)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return deepest


def encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def result_response(request_id: Any, result: Any) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_response(request_id: Any, code: int, message: str,
                   data: dict[str, Any] | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return encode({"jsonrpc": "2.0", "id": request_id, "error": error})
