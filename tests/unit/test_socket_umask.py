"""Binding a 0600 socket never changes the mode of what the rest of the daemon makes meanwhile:
the umask is process-wide, so the window in which it is 0o177 holds no await."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.daemon.control import ControlSocket

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.daemon.control import Connection

pytestmark = pytest.mark.anyio


async def _ignore(_connection: Connection) -> None:
    return None


async def test_a_directory_made_while_a_socket_is_bound_keeps_its_mode(tmp_path: Path) -> None:
    """The daemon binds a member's socket while launching another member, whose CLI home is
    made with mode 0700: it came out 0600 (the socket's umask, held across the bind's hop to
    a worker thread), and the sandboxed Codex could not enter its own CODEX_HOME (EACCES)."""
    server = ControlSocket(tmp_path / "s.sock", _ignore)
    made: list[int] = []

    async def make_dirs() -> None:
        while server.binds == 0:
            path = tmp_path / f"d{len(made)}"
            path.mkdir(mode=0o700)
            made.append(path.stat().st_mode & 0o777)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(make_dirs)
        await tg.start(server.run)
        await server.wait_bound(1)
        tg.cancel_scope.cancel()
    assert made
    assert set(made) == {0o700}, [oct(m) for m in made]
    assert (tmp_path / "s.sock").stat().st_mode & 0o777 == 0o600
