"""Whether the process at the other end of the control socket belongs to a member.

A member's per-launch MCP token sits in its ``mcp.json``, which every member can read (they run
as one uid until sandboxing makes those files private). So a token alone does not prove who
calls: the daemon also takes the caller's pid from the socket (SO_PEERCRED) and accepts the
token only from that member's own processes —

- a member on this machine: its runtime process or a descendant of it (the ``teamctl mcp`` its
  CLI started), found by walking ``/proc/<pid>/stat`` parent pids, at most ``MAX_DEPTH`` steps;
- a member on another host: its local ssh client's tree, or the host's ssh ControlMaster (the
  process that carries the forwarded socket's connections). That master is shared by the
  members on that host, so there the binding is per host: a process on the host can use the
  token of another member on the same host, never of a member elsewhere.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.daemon.supervisor import MemberState

__all__ = ["MAX_DEPTH", "belongs_to", "descends_from", "peer_pid"]

MAX_DEPTH = 64


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process that connected the Unix socket (Linux SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, _uid, _gid = struct.unpack("3i", creds)
    return int(pid)


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None  # gone
    return int(stat.rpartition(") ")[2].split()[1])  # after the (command), which may hold ") "


def descends_from(pid: int, roots: set[int], *, max_depth: int = MAX_DEPTH) -> bool:
    """Whether ``pid`` is one of ``roots`` or below one, within ``max_depth`` parent steps."""
    current: int | None = pid
    for _ in range(max_depth + 1):
        if current is None or current <= 1:
            return False
        if current in roots:
            return True
        current = _parent(current)
    return False


async def belongs_to(state: MemberState, pid: int) -> bool:
    """Whether the process ``pid`` is ``state``'s member's own (see the module's doc)."""
    process = state.process
    if process is not None and process.pid is not None and descends_from(pid, {process.pid}):
        return True
    master = await state.host.forwarder()  # None: no process forwards for it (this machine)
    return master is not None and pid == master
