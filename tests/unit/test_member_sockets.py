"""A sandboxed member's own socket is bound where a Unix socket's path fits."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from orchestrator.daemon.control import socket_dir

if TYPE_CHECKING:
    from pathlib import Path


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
