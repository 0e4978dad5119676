"""``teamctl mcp``, the relay a member's runtime starts (orchestrator/client/mcp_bridge.py): the
real process, as the hosts start it (``python -I -S RELAY``), against the real control server on
a real socket (its router a stub). It loads only what it must — the property its few MiB beside
every member rest on (docs/dev/performance.md) — relays each line to the daemon's MCP server as
the member, tells a member's start that the tools were listed only once the runtime has the
list, and answers its runtime itself when the daemon cannot be reached."""

from __future__ import annotations

import ast
import json
import re
import select
import subprocess
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator import limits
from orchestrator.client import mcp_bridge
from orchestrator.contracts import McpServer
from orchestrator.daemon.control import ControlServer, ControlSocket
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.anyio

TOKEN = "tok_-" + "x" * 27
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.MULTILINE)


class StubRouter:
    """The member methods' router: records what reaches it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.got_send = anyio.Event()
        self.listed: list[bool] = []  # at each tools_listed: was the answer in the pipe already
        self.relay_stdout: int | None = None

    async def check_caller(self, token: str, pid: int | None, *,
                           socket_member: tuple[str, str] | None = None) -> None:
        return None

    async def send_message(self, token: str, to: str, text: str,
                           attachments: Any = ()) -> dict[str, Any]:
        self.sent.append({"token": token, "to": to, "text": text,
                          "attachments": list(attachments)})
        self.got_send.set()
        return {"id": "M1", "text": f"queued as M1 for {to}"}

    async def list_team(self, token: str) -> dict[str, Any]:
        return {"team": "web", "members": []}

    def tools_listed(self, token: str) -> dict[str, Any]:
        assert token == TOKEN
        if self.relay_stdout is not None:
            self.listed.append(bool(select.select([self.relay_stdout], [], [], 0)[0]))
        return {}

    async def message_status(self, token: str, message_id: str) -> dict[str, Any]:
        raise AssertionError("not called")


@asynccontextmanager
async def daemon(home: Path) -> AsyncIterator[StubRouter]:
    """The control server on ``home``'s socket, its router a stub."""
    router = StubRouter()
    server = ControlServer(None, on_stop_all=lambda: None, router=router)  # type: ignore[arg-type]
    control = ControlSocket(home / "teamctl.sock", server.handle_connection)
    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        yield router
        await all_blocked()
        tg.cancel_scope.cancel()


def _relay(home: Path, cwd: Path, *flags: str, token: str = TOKEN) -> subprocess.Popen[bytes]:
    """The relay as a runtime starts it (McpServer's command and env, nothing else)."""
    env = {"TEAMCTL_MEMBER_TOKEN": token, "TEAMCTL_MCP_HOME": str(home), "HOME": "/home/dev"}
    return subprocess.Popen([sys.executable, "-I", "-S", *flags, str(McpServer.RELAY)],
                            env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _exchange(process: subprocess.Popen[bytes], lines: list[bytes]) -> tuple[list[Any], str]:
    """All of ``lines`` written, stdin closed: the answers, stderr."""
    out, err = process.communicate(b"".join(lines), timeout=60)
    assert process.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()], err.decode()


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


_HANDSHAKE = [
    _line({"jsonrpc": "2.0", "id": 0, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25"}}),
    _line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    _line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
]
_SEND = _line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
    "name": "send_message", "arguments": {"to": "rev", "text": "hi",
                                          "attachments": ["shot.png", "~/notes.txt"]}}})


def _imported(stderr: str) -> set[str]:
    return set(_IMPORTED.findall(stderr))


def _startup(*code: str) -> set[str]:
    """What ``python -I -S -c CODE`` imports (``-X importtime``)."""
    done = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", "-c", "\n".join(code)],
                          capture_output=True, text=True, timeout=60, check=True)
    return _imported(done.stderr)


async def test_the_relay_loads_only_the_socket_module_and_os(tmp_path: Path) -> None:
    """Started as the hosts start it, through a handshake, a tool call and its end, the relay
    imports nothing but ``_socket``, ``os`` (with what ``os`` itself loads) and ``__future__``
    beyond the interpreter's own start — no ``json``, no teamctl module, no ``socket``,
    ``typing``, ``pathlib``, ``asyncio``: what keeps it ~8.5 MiB beside each member where the
    whole server was 16 MiB. A figure for the bench, not asserted here: bench_own_cost.py."""
    allowed = _startup("import os") | {"__future__", "_socket"}
    async with daemon(tmp_path) as router:
        relay = _relay(tmp_path, tmp_path, "-X", "importtime")
        answers, stderr = await anyio.to_thread.run_sync(
            _exchange, relay, [*_HANDSHAKE, _SEND])
    assert [a["id"] for a in answers] == [0, 1, 2] and "result" in answers[2], answers
    assert router.sent, "the tool call reached the daemon"
    assert _imported(stderr) - allowed == set()
    assert "json" not in _imported(stderr)


async def test_each_line_is_answered_as_the_member_by_the_daemons_server(tmp_path: Path) -> None:
    """The handshake and a tool call through the relay: the daemon's answers, the call made
    with the member's token, the attachments made absolute under the relay's working
    directory and HOME (as ``Path.expanduser().absolute()`` made them in the member's own
    process), notifications unanswered; and the member's start is told the tools were listed
    only once the answer was in the runtime's pipe."""
    async with daemon(tmp_path) as router:
        relay = _relay(tmp_path, tmp_path)
        assert relay.stdin is not None and relay.stdout is not None
        router.relay_stdout = relay.stdout.fileno()  # unread until the call went through
        relay.stdin.write(b"".join([*_HANDSHAKE, _SEND]))
        relay.stdin.flush()
        with anyio.fail_after(30):
            await router.got_send.wait()
        answers, _ = await anyio.to_thread.run_sync(_exchange, relay, [])
    assert answers[0]["result"]["serverInfo"]["name"] == "teamctl"
    assert [t["name"] for t in answers[1]["result"]["tools"]][:3] == [
        "send_message", "list_team", "message_status"]
    assert answers[2]["result"] == {
        "content": [{"type": "text", "text": "queued as M1 for rev"}], "isError": False}
    assert len(answers) == 3, "the notification is not answered"
    assert router.sent == [{"token": TOKEN, "to": "rev", "text": "hi", "attachments": [
        str(tmp_path / "shot.png"), "/home/dev/notes.txt"]}]
    assert router.listed == [True], "told after the runtime had the tool list"


async def test_an_over_long_line_is_refused_once_and_the_next_is_served(tmp_path: Path) -> None:
    assert mcp_bridge.LINE_LIMIT == limits.REQUEST_LIMIT_BYTES
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' \
        + b"x" * (3 << 20) + b'"}}\n'
    exact = b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"'
    exact += b"y" * (limits.REQUEST_LIMIT_BYTES - len(exact) - 3) + b'"}}\n'
    assert len(exact) == limits.REQUEST_LIMIT_BYTES + 1  # its newline past the bound
    async with daemon(tmp_path):
        relay = _relay(tmp_path, tmp_path)
        answers, _ = await anyio.to_thread.run_sync(_exchange, relay, [
            huge, _line({"jsonrpc": "2.0", "id": 2, "method": "ping"}), exact])
    assert answers[0]["error"]["code"] == -32600 and answers[0]["id"] is None
    assert answers[1:] == [{"jsonrpc": "2.0", "id": 2, "result": {}},
                           {"jsonrpc": "2.0", "id": 3, "result": {}}]


def test_without_a_daemon_a_tool_call_is_a_typed_tool_error_and_the_relay_goes_on(
        tmp_path: Path) -> None:
    """No socket: a tool call is a tool error (``daemon_unavailable: …``, the model reads it
    and the turn goes on), another request a JSON-RPC error, a notification nothing — and
    only then is ``json`` loaded."""
    relay = _relay(tmp_path, tmp_path, "-X", "importtime")
    answers, stderr = _exchange(relay, [*_HANDSHAKE, _SEND])
    assert [a["id"] for a in answers] == [0, 1, 2]
    assert answers[0]["error"]["code"] == -32603
    assert "daemon_unavailable: teamctl's daemon did not answer" in \
        answers[0]["error"]["message"]
    result = answers[2]["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("daemon_unavailable: ")
    assert "json" in _imported(stderr)


async def test_a_token_of_other_characters_is_never_sent_garbled(tmp_path: Path) -> None:
    """A token of characters the daemon never makes (a space, a newline) is sent as none:
    the daemon refuses the call (a tool error), nothing of it splits the opening line."""
    async with daemon(tmp_path) as router:
        relay = _relay(tmp_path, tmp_path, token="a b\nteamctl-mcp/1 x")
        [answer], _ = await anyio.to_thread.run_sync(_exchange, relay, [_SEND])
    assert answer["result"]["isError"] is True, answer
    assert answer["result"]["content"][0]["text"].startswith("usage_error: invalid request: "
                                                            "token"), answer
    assert router.sent == []


def test_the_relay_is_written_for_the_oldest_python_a_host_may_have() -> None:
    """It is shipped as it is to an SSH host or a pod, whose python3 may be 3.8: its grammar
    is 3.8's."""
    ast.parse(McpServer.RELAY.read_text(), feature_version=(3, 8))
