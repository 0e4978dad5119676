"""The control wing: who may talk to the daemon and how a request becomes an answer.

The face of ``daemon/control/``: the control server (``_api``: a JSON-RPC line → its handler,
dispatch built from ``orchestrator.protocol``'s table), the socket it listens on with its
limits and deadlines (``_connections``), a sandboxed member's own socket (``_member_sockets``),
who is at the other end of a connection (``_peers``: SO_PEERCRED, a member's process tree) and
the watch on the socket's name (``_name_watch``). Everything outside imports from here.
"""

from __future__ import annotations

from orchestrator.daemon.control._api import ControlServer, dispatch, peer_uid
from orchestrator.daemon.control._connections import Connection, ControlSocket
from orchestrator.daemon.control._member_sockets import MemberSockets, socket_dir
from orchestrator.daemon.control._peers import PeerRefusals, belongs_to, peer_pid

__all__ = ["Connection", "ControlServer", "ControlSocket", "MemberSockets", "PeerRefusals",
           "belongs_to", "dispatch", "peer_pid", "peer_uid", "socket_dir"]
