"""The control server survives anything a local client sends or does (real Unix sockets).

Each test is named after the failure it proves impossible; after each, the server still
answers a ``ping`` on a new connection.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator import rpc
from orchestrator.daemon.control import ControlServer, ControlSocket, peer_uid
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.anyio


class StubTeams:
    """The one Teams operation these tests call: ``status``, which can block or raise."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.block = False
        self.raise_bug = False

    async def status(self, team: str | None) -> dict[str, Any]:
        if self.raise_bug:
            raise RuntimeError("a bug in a handler")
        if self.block:
            await self.release.wait()
        return {"teams": [], "secret": "sk-ant-api03-abcdefghijklmnop"}

    async def stop(self, team: str | None) -> list[str]:
        return []


@asynccontextmanager
async def serving(tmp_path: Path, *, allowed_uid: int | None = None, **limits: Any
                  ) -> AsyncIterator[tuple[ControlSocket, StubTeams]]:
    teams = StubTeams()
    server = ControlServer(teams, on_stop_all=lambda: None,  # type: ignore[arg-type]
                           allowed_uid=allowed_uid)
    control = ControlSocket(tmp_path / "s.sock", server.handle_connection, **limits)
    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        yield control, teams
        # let the server see the clients' closes first: cancelling a socket read whose
        # wake-up is already queued trips an asyncio InvalidStateError inside anyio
        await all_blocked()
        tg.cancel_scope.cancel()


async def _call(path: Path, payload: bytes, *, timeout: float = 10.0) -> dict[str, Any]:
    """Send ``payload`` on a new connection; the JSON answer line."""
    with anyio.fail_after(timeout):
        async with await anyio.connect_unix(path) as stream:
            await stream.send(payload)
            received = bytearray()
            while not received.endswith(b"\n"):
                received.extend(await stream.receive())
    answer: dict[str, Any] = json.loads(received)
    return answer


async def _ping(path: Path) -> dict[str, Any]:
    return await _call(path, rpc.request(1, "ping", {}))


def test_peer_uid_reads_the_connecting_process_uid() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert peer_uid(left) == os.getuid()


async def test_same_uid_is_served(tmp_path: Path) -> None:
    async with serving(tmp_path) as (control, _):
        assert "pid" in (await _ping(control.path))["result"]


async def test_another_uid_is_refused_without_an_answer(tmp_path: Path) -> None:
    with capture_logs() as logs:
        async with serving(tmp_path, allowed_uid=os.getuid() + 1) as (control, _):
            with anyio.fail_after(10):
                async with await anyio.connect_unix(control.path) as stream:
                    await stream.send(rpc.request(1, "ping", {}))
                    with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                        await stream.receive()
    refused = [e for e in logs if e["event"] == "control_peer_refused"]
    assert refused and refused[0]["peer_uid"] == os.getuid()


@pytest.mark.parametrize("payload", [
    b"[" * 2048 + b"\n",
    b"[" * 200_000 + b"\n",
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b'{"a":' * 100 + b"1"
    + b"}" * 100 + b"}\n",
])
async def test_deeply_nested_request_does_not_stop_the_daemon(tmp_path: Path,
                                                              payload: bytes) -> None:
    """2 KB of brackets raised RecursionError and the daemon exited: now a parse error."""
    async with serving(tmp_path) as (control, _):
        answer = await _call(control.path, payload)
        assert answer["error"]["code"] == rpc.PARSE_ERROR
        assert "nested deeper" in answer["error"]["message"]
        assert answer["error"]["data"]["code"] == "usage_error"
        assert "pid" in (await _ping(control.path))["result"]


@pytest.mark.parametrize(("payload", "code"), [
    (b"\xff\xfe not utf-8\n", rpc.PARSE_ERROR),
    (b"not json at all\n", rpc.PARSE_ERROR),
    (b"[1, 2]\n", rpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":["status"]}\n', rpc.INVALID_REQUEST),
    (b'{"jsonrpc":"1.0","id":1,"method":"ping"}\n', rpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":"' + b"x" * 100_000 + b'"}\n', rpc.METHOD_NOT_FOUND),
    (b'{"jsonrpc":"2.0","id":1,"method":"status","params":[1]}\n', rpc.INVALID_PARAMS),
    (b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"team":"a b"}}\n',
     rpc.INVALID_PARAMS),
])
async def test_malformed_requests_get_typed_errors(tmp_path: Path, payload: bytes,
                                                   code: int) -> None:
    async with serving(tmp_path) as (control, _):
        answer = await _call(control.path, payload)
        assert answer["error"]["code"] == code
        assert len(json.dumps(answer)) < 4096, "an error never echoes a huge input back"
        assert "pid" in (await _ping(control.path))["result"]


async def test_invalid_params_are_a_usage_error_the_cli_prints_as_such(tmp_path: Path) -> None:
    async with serving(tmp_path) as (control, _):
        answer = await _call(control.path, rpc.request(1, "status", {"team": "a b"}))
        data = answer["error"]["data"]
        assert data["code"] == "usage_error" and data["exit_code"] == 2
        assert data["message"].startswith("invalid request: team:")


async def test_oversized_request_is_answered_request_too_large(tmp_path: Path) -> None:
    """A >1 MiB request used to look like "no daemon reachable": now a typed answer, read
    by the client after it finished writing."""
    async with serving(tmp_path) as (control, _):
        payload = rpc.request(1, "status", {"team": "x" * (2 * rpc.REQUEST_LIMIT_BYTES)})
        answer = await _call(control.path, payload)
        data = answer["error"]["data"]
        assert data["code"] == "request_too_large" and data["exit_code"] == 2
        assert "pid" in (await _ping(control.path))["result"]


async def test_half_written_request_is_closed_at_its_deadline(tmp_path: Path) -> None:
    async with serving(tmp_path, idle_timeout=0.05) as (control, _):
        with anyio.fail_after(10):
            async with await anyio.connect_unix(control.path) as stream:
                await stream.send(b'{"jsonrpc":"2.0","id":1,"meth')
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    await stream.receive()
        assert "pid" in (await _ping(control.path))["result"]


async def test_thousands_of_idle_connections_do_not_lock_out_the_operator(
        tmp_path: Path) -> None:
    """At the cap, the longest-idle connection makes room: a ping still gets through."""
    async with serving(tmp_path, max_connections=50) as (control, _):
        idle = [await anyio.connect_unix(control.path) for _ in range(1000)]
        try:
            answer = await _ping(control.path)
            assert "pid" in answer["result"]
            assert control.open_connections <= 50
            assert control.evicted >= 1000 - 50
        finally:
            for stream in idle:
                await stream.aclose()


async def test_every_slot_busy_refuses_with_daemon_busy(tmp_path: Path) -> None:
    async with serving(tmp_path, max_connections=3) as (control, teams):
        teams.block = True
        busy = [await anyio.connect_unix(control.path) for _ in range(3)]
        try:
            for stream in busy:
                await stream.send(rpc.request(1, "status", {}))
            with anyio.fail_after(10):
                await all_blocked()  # each request is being served
            assert control.open_connections == 3
            answer = await _ping(control.path)
            assert answer["error"]["data"]["code"] == "daemon_busy"
            assert answer["error"]["data"]["retryable"] is True
            teams.release.set()
            teams.block = False
            assert "pid" in (await _ping(control.path))["result"]
        finally:
            for stream in busy:
                await stream.aclose()


async def test_a_handler_bug_ends_that_request_not_the_daemon(tmp_path: Path) -> None:
    async with serving(tmp_path) as (control, teams):
        teams.raise_bug = True
        answer = await _call(control.path, rpc.request(1, "status", {}))
        assert answer["error"]["data"]["code"] == "internal_error"
        assert "RuntimeError" in answer["error"]["data"]["message"]
        assert "pid" in (await _ping(control.path))["result"]


async def test_every_answer_is_redacted(tmp_path: Path) -> None:
    async with serving(tmp_path) as (control, _):
        answer = await _call(control.path, rpc.request(1, "status", {}))
        assert "abcdefghijklmnop" not in json.dumps(answer)


async def test_a_deleted_socket_is_bound_again(tmp_path: Path) -> None:
    async with serving(tmp_path, watch_interval=0.05, rebind_delay=0.01) as (control, _):
        control.path.unlink()
        with anyio.fail_after(10):
            await control.wait_bound(2)
        assert oct(control.path.stat().st_mode & 0o777) == "0o600"
        assert "pid" in (await _ping(control.path))["result"]


async def test_a_deleted_or_replaced_socket_is_bound_again_without_polling(
        tmp_path: Path) -> None:
    """The kernel tells the daemon (inotify): with a poll of an hour, the socket is still bound
    again at once when deleted, and when another file is renamed over it. (Replaced within a
    second of its bind, it is bound again after a pause, here 10 ms.)"""
    async with serving(tmp_path, watch_interval=3600, rebind_delay=0.01) as (control, _):
        control.path.unlink()
        with anyio.fail_after(10):
            await control.wait_bound(2)
        impostor = tmp_path / "impostor"
        impostor.write_text("not a socket")
        impostor.replace(control.path)
        with anyio.fail_after(10):
            await control.wait_bound(3)
        assert "pid" in (await _ping(control.path))["result"]


async def test_a_launch_after_stop_all_is_refused_retryable_instead_of_dying_with_the_daemon(
        tmp_path: Path) -> None:
    """The daemon answers ``stop`` (everything) and exits after: a team launched in between
    would stop with it. (A bad team file is refused as such before the stop: the refusal
    after it is the stop's, not the file's.)"""
    launch = rpc.request(2, "launch", {"config": {}, "file": "web.toml"})
    async with serving(tmp_path) as (control, _):
        before = await _call(control.path, launch)
        assert before["error"]["data"]["code"] == "team_file_invalid"
        stopped = await _call(control.path, rpc.request(1, "stop", {"team": None}))
        assert stopped["result"]["daemon_stopping"] is True
        after = await _call(control.path, launch)
    error = after["error"]["data"]
    assert error["code"] == "daemon_stopping" and error["retryable"] is True
    assert "run the command again once it has exited" in error["message"]
