"""A sandboxed member's own socket is bound where a Unix socket's path fits; a dir made for it
in the temp dir goes when its serving ends."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.daemon.control import MemberSockets, socket_dir
from orchestrator.paths import remove_temp_socket_dir
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from orchestrator.daemon.control import Connection

pytestmark = pytest.mark.anyio


def test_a_long_home_puts_the_members_socket_in_a_short_private_dir(tmp_path: Path) -> None:
    """A TEAMCTL_HOME deep enough that ``members/<team>/<member>/mcp/teamctl.sock`` passed
    108 bytes made the bind fail inside the daemon's task group — the daemon died at
    ``launch`` (seen under pytest-xdist's longer temp paths). The socket now goes to a fresh
    0700 dir whose path fits; a short home keeps it in the member's dir."""
    short = tmp_path / "m"
    assert socket_dir(short) == short / "mcp"
    deep = tmp_path / ("x" * 60) / "members" / "a-team-with-a-long-name" / "a-member"
    chosen = socket_dir(deep)
    assert len(os.fsencode(chosen / "teamctl.sock")) <= 100
    assert not chosen.is_relative_to(deep) and chosen.is_dir()
    assert chosen.stat().st_mode & 0o777 == 0o700
    os.rmdir(chosen)


async def test_a_socket_dir_made_in_the_temp_dir_goes_when_its_serving_ends(
        tmp_path: Path) -> None:
    """The short dir of a long home's member socket was left in /tmp at every daemon stop
    (hundreds a test run): it goes when its serving ends, with its socket."""
    deep = tmp_path / ("x" * 60) / "members" / "a-team-with-a-long-name" / "a-member"

    async def handler(_connection: Connection, _team: str, _member: str) -> None:
        return None

    async with anyio.create_task_group() as tg:
        sockets = MemberSockets(tg, handler=handler)
        directory = sockets.directory("web", "m", deep)
        path = sockets.ensure("web", "m", directory / "teamctl.sock")
        await all_blocked()  # bound: its task waits on accept
        assert path.is_socket()
        assert sockets.directory("web", "m", deep) == directory, "one dir while it serves"
        tg.cancel_scope.cancel()
    assert not directory.exists()


def test_only_the_daemons_own_temp_socket_dir_is_removed_and_nothing_is_followed(
        tmp_path: Path) -> None:
    """Hostile: the removal takes a dir of this uid named ``tc-mcp-…`` directly in the temp
    dir and the sockets in it, nothing else — a link in its place, a file a member left in
    it, or a dir elsewhere is left as it is (and a link's target is never touched)."""
    assert not remove_temp_socket_dir(tmp_path, "tc-mcp-"), "not in the temp dir"
    kept = Path(tempfile.mkdtemp(prefix="tc-mcp-"))
    (kept / "left-by-a-member").write_text("x")
    assert not remove_temp_socket_dir(kept, "tc-mcp-") and kept.is_dir()
    assert not remove_temp_socket_dir(kept, "tc-eg-"), "another prefix"
    target = tmp_path / "target"
    target.mkdir()
    (target / "precious").write_text("x")
    link = Path(tempfile.gettempdir()) / f"tc-mcp-link-{os.getpid()}"
    link.symlink_to(target)
    try:
        assert not remove_temp_socket_dir(link, "tc-mcp-")
        assert link.is_symlink() and (target / "precious").exists()
    finally:
        link.unlink()
        (kept / "left-by-a-member").unlink()
    bound = socket.socket(socket.AF_UNIX)
    bound.bind(str(kept / "teamctl.sock"))
    bound.close()
    assert remove_temp_socket_dir(kept, "tc-mcp-") and not kept.exists()


def test_a_killed_daemons_socket_dir_is_used_again_only_while_it_is_still_its_own(
        tmp_path: Path) -> None:
    """A daemon killed with ``kill -9`` never removed its dir in the temp dir: the next one
    finds it through the record in the member's (daemon-private) dir and binds there again,
    so restarts leave none behind. Hostile: a record naming anything else — a dir of another
    mode, a link to one, a dir outside the temp dir — gets a fresh dir, never used."""
    deep = tmp_path / ("x" * 60) / "members" / "a-team-with-a-long-name" / "a-member"
    deep.mkdir(parents=True)
    first = socket_dir(deep)
    assert socket_dir(deep) == first, "the killed daemon's dir, used again"
    record = deep / "mcp-dir"
    assert record.stat().st_mode & 0o777 == 0o600
    loose = Path(tempfile.mkdtemp(prefix="tc-mcp-"))
    loose.chmod(0o755)
    link = Path(tempfile.gettempdir()) / f"tc-mcp-link-{os.getpid()}"
    link.symlink_to(first)
    elsewhere = tmp_path / "tc-mcp-elsewhere"
    elsewhere.mkdir(mode=0o700)
    try:
        for planted in (loose, link, elsewhere):
            record.write_text(str(planted))
            fresh = socket_dir(deep)
            assert fresh not in (loose, link, elsewhere, first), planted
            assert fresh.stat().st_mode & 0o777 == 0o700
            assert record.read_text() == str(fresh), "the fresh dir is recorded"
            os.rmdir(fresh)
    finally:
        link.unlink()
        os.rmdir(loose)
    record.write_text(str(first))
    assert remove_temp_socket_dir(first, "tc-mcp-")
    second = socket_dir(deep)
    assert second != first and second.is_dir(), "a dir that went is made afresh"
    os.rmdir(second)
