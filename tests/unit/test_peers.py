"""The peer check every Unix socket of the daemon makes first (daemon/control/_peers.py,
docs/security.md "No socket answers another uid"), in-process: a refusal is logged without
letting the peer flood the log, and a refused peer takes no connection slot and evicts no one.
The real second uid against each socket is tests/integration/test_sockets_other_uid.py."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.daemon.control._connections import ControlSocket
from orchestrator.daemon.control._peers import PeerRefusals, peer
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.daemon.control._connections import Connection


def test_the_peer_is_the_connecting_process_as_the_kernel_saw_it() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert (peer(left).pid, peer(left).uid, peer(left).gid) == (
            os.getpid(), os.getuid(), os.getgid())


def test_a_refused_uid_is_logged_at_once_then_once_an_interval_with_the_count() -> None:
    """Another uid that connects in a loop would write one log line a connection: the first
    refusal is logged at once, the next 999 within the interval are counted, and the first
    after it carries the count (1,000: the 999 held and itself)."""
    now = [0.0]
    refusals = PeerRefusals("socket_peer_refused", allowed_uid=os.getuid() + 1,
                            clock=lambda: now[0], socket="s.sock")
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right, capture_logs() as logs:
        assert not any(refusals.admits(left) for _ in range(1000))
        assert [e["refused"] for e in logs] == [1]
        now[0] = 60.0
        assert not refusals.admits(left)
    assert [(e["event"], e["refused"], e["peer_uid"], e["socket"]) for e in logs] == [
        ("socket_peer_refused", 1, os.getuid(), "s.sock"),
        ("socket_peer_refused", 1000, os.getuid(), "s.sock")]
    assert refusals.refused == 1001


@pytest.mark.anyio
async def test_another_uid_takes_no_slot_and_evicts_no_idle_connection(tmp_path: Path) -> None:
    """The control socket closes the longest-idle connection to make room at its cap: a
    peer of another uid came before the peer check and so could push the operator's idle
    connections out. Now the check comes first: at the cap of 2, with 2 idle connections
    open, another uid's connection is closed unread, and both stay."""
    async def idle(connection: Connection) -> None:
        await connection.receive_line()

    control = ControlSocket(tmp_path / "s.sock", idle, max_connections=2)
    async with anyio.create_task_group() as tg:
        await tg.start(control.run)
        with anyio.fail_after(10):
            own = [await anyio.connect_unix(control.path) for _ in range(2)]
            await all_blocked()
            assert control.open_connections == 2
            control.peers.allowed_uid = os.getuid() + 1  # from now on we are "another uid"
            async with await anyio.connect_unix(control.path) as other:
                await other.send(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    await other.receive()
        assert (control.open_connections, control.evicted, control.peers.refused) == (2, 0, 1)
        for stream in own:
            await stream.aclose()
        await all_blocked()
        tg.cancel_scope.cancel()
