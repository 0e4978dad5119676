"""The control server refuses peers of another uid (SO_PEERCRED) before reading anything."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.api import ControlServer, peer_uid

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_peer_uid_reads_the_connecting_process_uid() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert peer_uid(left) == os.getuid()


async def _exchange(tmp_path: Path, allowed_uid: int) -> bytes:
    """One real connection, served to completion (no cancellation mid-read)."""
    server = ControlServer(teams=None, on_stop_all=lambda: None,  # type: ignore[arg-type]
                           allowed_uid=allowed_uid)
    path = tmp_path / "s.sock"
    received = bytearray()

    async def client() -> None:
        async with await anyio.connect_unix(path) as stream:
            await stream.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
            try:
                while not received.endswith(b"\n"):
                    received.extend(await stream.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass

    with anyio.fail_after(10):
        async with await anyio.create_unix_listener(path) as listener, \
                anyio.create_task_group() as tg:
            tg.start_soon(client)
            await server.handle_connection(await listener.accept())
    return bytes(received)


@pytest.mark.anyio
async def test_same_uid_is_served(tmp_path: Path) -> None:
    assert b'"pid"' in await _exchange(tmp_path, os.getuid())


@pytest.mark.anyio
async def test_another_uid_is_refused_without_an_answer(tmp_path: Path) -> None:
    with capture_logs() as logs:
        data = await _exchange(tmp_path, os.getuid() + 1)
    assert data == b""
    refused: list[dict[str, Any]] = [e for e in logs if e["event"] == "control_peer_refused"]
    assert refused and refused[0]["peer_uid"] == os.getuid()
