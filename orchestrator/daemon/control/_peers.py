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

Before any of that, every Unix socket the daemon serves refuses a peer of another uid, from its
credentials (SO_PEERCRED, given by the kernel at connect: nothing the peer says), before a byte
is read or written and before the connection takes a slot (docs/security.md, "No socket
answers another uid"). ``PeerRefusals`` logs those refusals without letting the peer fill the
log: the first of each uid at once, then at most one event an interval with the count.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.daemon.members import MemberState

__all__ = ["MAX_DEPTH", "Peer", "PeerRefusals", "belongs_to", "descends_from", "peer",
           "peer_pid"]

log = structlog.get_logger("teamctl.peers")

MAX_DEPTH = 64
REFUSAL_LOG_INTERVAL = 60.0


@dataclass(frozen=True)
class Peer:
    """Who connected a Unix socket, as the kernel saw it at ``connect``."""

    pid: int
    uid: int
    gid: int


def peer(sock: socket.socket) -> Peer:
    """The credentials of the process that connected the Unix socket (Linux SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return Peer(int(pid), int(uid), int(gid))


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process that connected the Unix socket (Linux SO_PEERCRED)."""
    return peer(sock).pid


class PeerRefusals:
    """One socket's connections refused for their uid: ``admits`` says whether a peer may be
    served (the daemon's own uid only) and logs a refusal as ``event`` with ``fields`` — the
    first of a uid at once, then at most once an ``interval``, with the count since."""

    def __init__(self, event: str, *, allowed_uid: int | None = None,
                 interval: float = REFUSAL_LOG_INTERVAL,
                 clock: Callable[[], float] = time.monotonic, **fields: Any) -> None:
        self.allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self.refused = 0
        self._event, self._fields = event, fields
        self._interval, self._clock = interval, clock
        self._by_uid: dict[int, tuple[float, int]] = {}  # uid -> (logged at, refused since)

    def admits(self, sock: socket.socket) -> bool:
        """Whether ``sock``'s peer is of the allowed uid; a refusal is counted and logged."""
        who = peer(sock)
        if who.uid == self.allowed_uid:
            return True
        self.refused += 1
        now = self._clock()
        logged_at, since = self._by_uid.get(who.uid, (None, 0))
        if logged_at is not None and now - logged_at < self._interval:
            self._by_uid[who.uid] = (logged_at, since + 1)
            return False
        self._by_uid[who.uid] = (now, 0)
        log.warning(self._event, peer_uid=who.uid, peer_pid=who.pid, refused=since + 1,
                    **self._fields)
        return False


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
