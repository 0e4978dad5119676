"""Sockets in a network namespace of their own, as a sandbox with its network cut has them:
``namespace_sockets`` runs bubblewrap (``--unshare-user --unshare-net``, as teamctl does) with a
python that binds listeners on that namespace's loopback and makes unconnected TCP sockets
there, and hands them all back over an inherited socket pair (the namespace lives on while they
are open). A connect from this process on one of the unconnected ones reaches the namespace's
loopback, and nothing else can — what the egress proxy's hand-over tests need."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys

__all__ = ["namespace_sockets"]

_CODE = r"""
import socket, sys
back = socket.socket(fileno=int(sys.argv[1]))
made = []
for port in sys.argv[3:]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", int(port)))
    listener.listen()
    made.append(listener)
made += [socket.socket() for _ in range(int(sys.argv[2]))]
socket.send_fds(back, [b"x"], [s.fileno() for s in made])
"""


def namespace_sockets(ports: list[int], clients: int) -> tuple[list[socket.socket],
                                                                list[socket.socket]]:
    """Listeners on ``127.0.0.1`` at ``ports`` (0: any free one) and ``clients`` unconnected
    TCP sockets, all in one fresh network namespace."""
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is needed (make system-deps)"
    ours, theirs = socket.socketpair()
    with ours, theirs:
        subprocess.run([bwrap, "--unshare-user", "--unshare-net", "--ro-bind", "/", "/",
                        "--dev", "/dev", sys.executable, "-I", "-c", _CODE,
                        str(theirs.fileno()), str(clients), *map(str, ports)],
                       pass_fds=[theirs.fileno()], timeout=60, check=True)
        ours.settimeout(30)
        _, fds, _, _ = socket.recv_fds(ours, 16, len(ports) + clients)
    made = [socket.socket(fileno=fd) for fd in fds]
    return made[:len(ports)], made[len(ports):]
