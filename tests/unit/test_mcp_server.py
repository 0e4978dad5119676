"""``teamctl mcp`` speaks MCP over stdio and survives whatever its client sends: the
handshake as the real CLIs do it, the tool list, typed tool errors, and garbage."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

from orchestrator.client import mcp_server

if TYPE_CHECKING:
    import pytest


def _serve(lines: list[bytes], monkeypatch: pytest.MonkeyPatch,
           tmp_path: object) -> list[dict[str, object]]:
    monkeypatch.setenv("TEAMCTL_MEMBER_TOKEN", "t" * 32)
    monkeypatch.setenv("TEAMCTL_MCP_HOME", str(tmp_path))  # no daemon there
    out = io.BytesIO()
    assert mcp_server.serve(io.BytesIO(b"".join(lines)), out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_the_handshake_the_real_clis_make(monkeypatch: pytest.MonkeyPatch, tmp_path: object
                                          ) -> None:
    answers = _serve([
        _line({"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {}}),
        _line({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18"}}),
        _line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        _line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}),
        _line({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    ], monkeypatch, tmp_path)
    assert answers[0]["error"]["code"] == -32601  # Claude then falls back to initialize
    assert answers[1]["result"]["protocolVersion"] == "2025-06-18"
    names = [t["name"] for t in answers[2]["result"]["tools"]]
    assert names == ["send_message", "list_team", "message_status"]
    assert answers[3] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert len(answers) == 4, "notifications are never answered"


def test_a_tool_call_without_a_daemon_is_a_typed_tool_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    [answer] = _serve([_line({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"to": "rev", "text": "hi"}}})],
        monkeypatch, tmp_path)
    result = answer["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("daemon_unavailable: ")
    assert "structuredContent" not in result


def test_garbage_never_stops_the_server(monkeypatch: pytest.MonkeyPatch, tmp_path: object
                                        ) -> None:
    answers = _serve([b"not json\n", b"[1,2]\n", b"\xff\xfe\n", b"x" * (2 << 20) + b"\n",
                      _line({"jsonrpc": "2.0", "id": 9, "method": "nope"}),
                      _line({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                             "params": {"name": "rm_rf"}}),
                      _line({"jsonrpc": "2.0", "id": 11, "method": "ping"})],
                     monkeypatch, tmp_path)
    codes = [a.get("error", {}).get("code") for a in answers]
    assert -32700 in codes and -32601 in codes
    unknown_tool = next(a for a in answers if a.get("id") == 10)
    assert unknown_tool["result"]["isError"] and "no tool named 'rm_rf'" in \
        unknown_tool["result"]["content"][0]["text"]
    assert answers[-1] == {"jsonrpc": "2.0", "id": 11, "result": {}}
