"""``teamctl mcp`` speaks MCP over stdio and survives whatever its client sends: the
handshake as the real CLIs do it, the tool list, typed tool errors, and garbage."""

from __future__ import annotations

import io
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.client import mcp_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


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
    assert names == ["send_message", "list_team", "message_status", "task_list", "task_get",
                     "task_create", "task_claim", "task_update", "task_complete",
                     "task_release", "task_review"]
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


# -- the real `teamctl mcp` process against hostile lines ---------------------------------------

_DEADLINE = 20.0
_HOSTILE_CALLS: dict[str, tuple[bytes, str]] = {
    # name: (the line, what its answer is: an error code, or a tool error's text prefix)
    "attachments_a_number": (_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"to": "rev", "text": "hi", "attachments": 5}}}),
        "mcp_arguments_invalid: send_message: 'attachments' must be an array of strings"),
    "attachments_an_object_in_the_list": (_line({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "send_message", "arguments": {"to": "rev", "text": "hi",
                                                  "attachments": [{}]}}}),
        "mcp_arguments_invalid: send_message: 'attachments' must be an array of strings"),
    "text_null": (_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"to": "rev", "text": None}}}),
        "mcp_arguments_invalid: send_message: 'text' must be a string"),
    "text_a_list": (_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"to": "rev", "text": ["hi"]}}}),
        "mcp_arguments_invalid: send_message: 'text' must be a string"),
    "text_nan": (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
                 b'"send_message", "arguments": {"to": "rev", "text": NaN}}}\n',
                 "mcp_arguments_invalid: send_message: 'text' must be a string"),
    "to_missing": (_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"text": "hi"}}}),
        "mcp_arguments_invalid: send_message: 'to' is required"),
    "an_unknown_argument": (_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"to": "rev", "text": "hi", "as": "lead"}}}),
        "mcp_arguments_invalid: send_message: no argument named 'as'"),
    "arguments_a_number": (_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "message_status", "arguments": 5}}),
        "mcp_arguments_invalid: message_status: the arguments must be a JSON object"),
    "params_a_list": (_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": [1]}), "-32602"),
    "nested_10000_deep": (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {'
                          b'"name": "send_message", "arguments": {"to": "rev", "text": '
                          + b"[" * 10_000 + b"]" * 10_000 + b"}}}\n", "-32700"),
    "nested_100_deep": (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": '
                        + b"[" * 100 + b"]" * 100 + b"}}\n", "-32700"),
    "a_3_mib_line": (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "'
                     + b"x" * (3 << 20) + b'"}}\n', "-32600"),
}


class _FakeDaemon:
    """The daemon's socket: records each request and answers a receipt."""

    def __init__(self, home: Path) -> None:
        self.requests: list[dict[str, Any]] = []
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(str(home / "teamctl.sock"))
        self._server.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with client:
                data = b""
                while not data.endswith(b"\n"):
                    data += client.recv(65536)
                request = json.loads(data)
                self.requests.append(request)
                client.sendall(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
                    "text": "queued as M1 for rev"}}).encode() + b"\n")

    def close(self) -> None:
        self._server.close()


def _answer(process: subprocess.Popen[bytes], line: bytes) -> dict[str, Any]:
    """Send one line, read one answer line (a deadline: a dead or silent server fails)."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line)
    process.stdin.flush()
    fd, seen = process.stdout.fileno(), b""
    deadline = time.monotonic() + _DEADLINE
    while not seen.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0, f"no answer within {_DEADLINE}s: {seen[-300:]!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"the server ended: exit {process.wait()}"
            seen += chunk
    [answer] = [json.loads(part) for part in seen.splitlines()]
    return dict(answer)


@pytest.fixture(scope="module")
def mcp_process(tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[subprocess.Popen[bytes], _FakeDaemon]]:
    """One real ``teamctl mcp`` process for every hostile call (each is followed by a good
    one, so a call that broke it fails there); it must still end cleanly after all of them."""
    home = tmp_path_factory.mktemp("mcp")
    daemon = _FakeDaemon(home)
    env = {**os.environ, "TEAMCTL_MEMBER_TOKEN": "t" * 32, "TEAMCTL_MCP_HOME": str(home)}
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "mcp"], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        yield process, daemon
    finally:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        assert process.wait(timeout=_DEADLINE) == 0
        process.stdout.close()
        daemon.close()


@pytest.mark.parametrize("case", list(_HOSTILE_CALLS))
def test_a_hostile_tool_call_is_a_typed_error_and_the_server_keeps_serving(
        case: str, mcp_process: tuple[subprocess.Popen[bytes], _FakeDaemon]) -> None:
    """``teamctl mcp`` (the real process) answers a bad argument, an over-deep or over-long
    line with a typed error — a tool error (``isError``) the model can correct, or a JSON-RPC
    error — and answers the next request; nothing of the bad call reaches the daemon (a
    ``text: null`` is never queued as "None")."""
    process, daemon = mcp_process
    daemon.requests.clear()
    line, expected = _HOSTILE_CALLS[case]
    answer = _answer(process, line)
    if expected.startswith("-"):
        assert answer["error"]["code"] == int(expected), answer
    else:
        assert answer["id"] == 1 and answer["result"]["isError"] is True
        assert answer["result"]["content"][0]["text"].startswith(expected), answer
    assert daemon.requests == [], "nothing of a bad call reaches the daemon"
    good = _answer(process, _line({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                   "params": {"name": "send_message",
                                              "arguments": {"to": "rev", "text": "hi"}}}))
    assert good["result"] == {"content": [{"type": "text", "text": "queued as M1 for rev"}],
                              "isError": False}
    [sent] = daemon.requests
    assert sent["params"] == {"token": "t" * 32, "to": "rev", "text": "hi", "attachments": []}


def test_the_daemon_is_told_once_after_the_first_tools_list_and_not_before(
        monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    """``member.tools_listed`` goes once, after the first tools/list was answered (an agent
    that lists late is ready only then); a daemon that refuses it ends nothing."""
    told: list[tuple[str, dict[str, Any], int]] = []
    out = io.BytesIO()

    def fake_call(home: object, method: str, params: dict[str, Any], **_: Any) -> None:
        told.append((method, params, len(out.getvalue().splitlines())))
        raise OSError("no daemon")  # the first refusal: told again at the next listing

    monkeypatch.setattr(mcp_server, "call", fake_call)
    monkeypatch.setenv("TEAMCTL_MEMBER_TOKEN", "t" * 32)
    monkeypatch.setenv("TEAMCTL_MCP_HOME", str(tmp_path))
    lines = [_line({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18"}}),
             _line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
             _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})]
    assert mcp_server.serve(io.BytesIO(b"".join(lines)), out) == 0
    assert [(m, p) for m, p, _ in told] == [("member.tools_listed", {"token": "t" * 32})] * 2
    assert told[0][2] == 2, "after the answer to tools/list was written"
    told.clear()
    monkeypatch.setattr(mcp_server, "call", lambda *a, **k: told.append(("ok", {}, 0)))
    assert mcp_server.serve(io.BytesIO(b"".join(lines)), io.BytesIO()) == 0
    assert len(told) == 1, "once a daemon took it, never again"
