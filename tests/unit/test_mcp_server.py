"""The daemon's MCP server (orchestrator/daemon/mcp) speaks MCP as the member and survives
whatever a relay hands it: the handshake as the real CLIs do it, the tool list, typed tool
errors, garbage, hostile arguments (nothing of a bad call reaches the member methods), an
attachment's path made absolute as the member means it, and the relay's opening line read.
In process, the member methods a fake that records each call; the relay and the control
socket around it: tests/unit/test_mcp_bridge.py."""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.daemon.mcp import Caller, McpServer, opened
from orchestrator.errors import TeamctlError, error_from_wire

if TYPE_CHECKING:
    from orchestrator import protocol

TOKEN = "t" * 32


class _Members:
    """The member methods: each call recorded, answered a receipt (or refused)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.refusal: TeamctlError | None = None

    async def call(self, row: protocol.Method, params: dict[str, Any]) -> Any:
        self.calls.append((row.name, dict(params)))
        if self.refusal is not None:
            raise self.refusal
        return {"text": "queued as M1 for rev"}


def _answers(lines: list[bytes], members: _Members | None = None,
             caller: Caller | None = None) -> list[dict[str, Any]]:
    """Each line answered by one server; the answers that are not blank (notifications)."""
    server = McpServer((members or _Members()).call)

    async def run() -> list[bytes]:
        return [(await server.answer(caller or Caller(TOKEN), line)).line for line in lines]

    return [json.loads(line) for line in anyio.run(run) if line.strip()]


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_the_handshake_the_real_clis_make() -> None:
    answers = _answers([
        _line({"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {}}),
        _line({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18"}}),
        _line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        _line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}),
        _line({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    ])
    assert answers[0]["error"]["code"] == -32601  # Claude then falls back to initialize
    assert answers[1]["result"]["protocolVersion"] == "2025-06-18"
    names = [t["name"] for t in answers[2]["result"]["tools"]]
    assert names == ["send_message", "list_team", "message_status", "task_list", "task_get",
                     "task_create", "task_claim", "task_update", "task_complete",
                     "task_release", "task_review"]
    assert answers[3] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert len(answers) == 4, "notifications are never answered"


def test_only_an_answered_tools_list_says_the_tools_were_listed() -> None:
    server = McpServer(_Members().call)

    async def listed(message: dict[str, object]) -> bool:
        return (await server.answer(Caller(TOKEN), _line(message))).listed

    async def run() -> list[bool]:
        return [await listed({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                await listed({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": [1]}),
                await listed({"jsonrpc": "2.0", "method": "tools/list"}),
                await listed({"jsonrpc": "2.0", "id": 3, "method": "ping"})]

    assert anyio.run(run) == [True, False, False, False]


def test_a_refused_tool_call_is_a_tool_error_starting_with_its_code() -> None:
    members = _Members()
    members.refusal = error_from_wire({"code": "messaging_token_unknown",  # as dispatch sends it
                                       "message": "this token is not current"})
    [answer] = _answers([_line({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"to": "rev", "text": "hi"}}})], members)
    result = answer["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "messaging_token_unknown: this token is not current"
    assert "structuredContent" not in result


def test_garbage_never_stops_the_server() -> None:
    answers = _answers([b"not json\n", b"[1,2]\n", b"\xff\xfe\n", b"\n",
                        _line({"jsonrpc": "2.0", "id": 9, "method": "nope"}),
                        _line({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                               "params": {"name": "rm_rf"}}),
                        _line({"jsonrpc": "2.0", "id": 11, "method": "ping"})])
    codes = [a.get("error", {}).get("code") for a in answers]
    assert codes[:4] == [-32700, -32600, -32700, -32700] and -32601 in codes
    unknown_tool = next(a for a in answers if a.get("id") == 10)
    assert unknown_tool["result"]["isError"] and "no tool named 'rm_rf'" in \
        unknown_tool["result"]["content"][0]["text"]
    assert answers[-1] == {"jsonrpc": "2.0", "id": 11, "result": {}}


_HOSTILE_CALLS: dict[str, tuple[bytes, str]] = {
    # name: (the line, what its answer is: an error code, or a tool error's text prefix)
    "attachments_a_number": (_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"to": "rev", "text": "hi", "attachments": 5}}}),
        "mcp_arguments_invalid: send_message: 'attachments' must be an array (at most 32) of "
        "strings"),
    "attachments_an_object_in_the_list": (_line({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "send_message", "arguments": {"to": "rev", "text": "hi",
                                                  "attachments": [{}]}}}),
        "mcp_arguments_invalid: send_message: 'attachments' must be an array (at most 32) of "
        "strings"),
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
}


@pytest.mark.parametrize("case", list(_HOSTILE_CALLS))
def test_a_hostile_tool_call_is_a_typed_error_and_the_server_keeps_serving(case: str) -> None:
    """A bad argument or an over-deep message is answered with a typed error — a tool error
    (``isError``) the model can correct, or a JSON-RPC error — and the next request is
    served; nothing of the bad call reaches the member methods (a ``text: null`` is never
    queued as "None"). An over-long line is the connection's bound (test_mcp_bridge.py)."""
    members = _Members()
    line, expected = _HOSTILE_CALLS[case]
    answer, good = _answers([line, _line({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "send_message", "arguments": {"to": "rev", "text": "hi"}}})],
        members)
    if expected.startswith("-"):
        assert answer["error"]["code"] == int(expected), answer
    else:
        assert answer["id"] == 1 and answer["result"]["isError"] is True
        assert answer["result"]["content"][0]["text"].startswith(expected), answer
    assert good["result"] == {"content": [{"type": "text", "text": "queued as M1 for rev"}],
                              "isError": False}
    assert members.calls == [("member.send_message", {"token": TOKEN, "to": "rev",
                                                      "text": "hi", "attachments": []})]


def test_an_attachment_is_made_absolute_as_the_member_means_it() -> None:
    """``Path(p).expanduser().absolute()`` in the member's own process, as the server did
    when it ran there: under the relay's working directory, ``~`` its HOME — never the
    daemon's."""
    members = _Members()
    caller = Caller(TOKEN, PurePosixPath("/work/dev"), PurePosixPath("/home/dev"))
    _answers([_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "send_message", "arguments": {"to": "rev", "text": "hi", "attachments": [
            "shot.png", "./docs/../a.pdf", "~/notes.txt", "~", "/abs/b.txt", "~rev/x"]}}})],
        members, caller)
    [(_, params)] = members.calls
    assert params["attachments"] == ["/work/dev/shot.png", "/work/dev/docs/../a.pdf",
                                     "/home/dev/notes.txt", "/home/dev", "/abs/b.txt",
                                     "/work/dev/~rev/x"]


@pytest.mark.parametrize(("line", "expected"), [
    (b"teamctl-mcp/1 abc_-9 " + b"/w d".hex().encode() + b" " + b"/h".hex().encode() + b"\n",
     Caller("abc_-9", PurePosixPath("/w d"), PurePosixPath("/h"))),
    (b"teamctl-mcp/1 abc - -\n", Caller("abc")),
    (b"teamctl-mcp/1 - - -\n", Caller("")),
    (b"teamctl-mcp/1 abc\n", Caller("abc")),
    (b"teamctl-mcp/1 abc zz " + b"rel".hex().encode() + b"\n", Caller("abc")),
    (b"teamctl-mcp/1 abc " + b"/\xff".hex().encode() + b"\n",
     Caller("abc", PurePosixPath("/\udcff"))),
])
def test_a_relays_opening_line_names_its_caller(line: bytes, expected: Caller) -> None:
    """The token as sent, the paths only when they are hex of an absolute path (else the
    member's relative attachment stays relative: refused as outside its view)."""
    assert opened(line) == expected


@pytest.mark.parametrize("line", [
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n', b"teamctl-mcp/2 abc\n", b"teamctl-mcp/1\n",
    b"TEAMCTL-MCP/1 abc\n"])
def test_any_other_first_line_is_not_a_relays(line: bytes) -> None:
    assert opened(line) is None


@pytest.mark.parametrize(("receipt", "shown"), [
    ("read", "M1 to rev: sent (read: its turn began)"),
    ("queued", "M1 to rev: queued"),
    ("answered", "M1 to rev: answered; reply: done"),
])
def test_message_status_says_the_receipt_the_sender_is_given(receipt: str, shown: str) -> None:
    """``message_status`` as the member reads it: a sent message whose recipient's turn began
    is ``read``, said beside the delivery state only where the two differ."""
    state = {"read": "sent", "queued": "queued", "answered": "answered"}[receipt]

    class _Status(_Members):
        async def call(self, row: protocol.Method, params: dict[str, Any]) -> Any:
            await super().call(row, params)
            return {"id": "M1", "to": "rev", "state": state, "receipt": receipt,
                    "reply": "done" if state == "answered" else None}

    [answer] = _answers([_line({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "message_status", "arguments": {"id": "01J0000000000000000000000A"}}})],
        _Status())
    assert answer["result"]["content"][0]["text"] == shown
