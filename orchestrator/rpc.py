"""The control protocol: JSON-RPC 2.0, one request per line, over the Unix socket.

Shared by the client (CLI) and the server (daemon). Standard library only: the CLI imports it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "APP_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_LIMIT_BYTES",
    "encode",
    "error_response",
    "request",
    "result_response",
]

REQUEST_LIMIT_BYTES = 1024 * 1024
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
APP_ERROR = -32000


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
