"""Whether a server could listen on a TCP port of this machine now: the port is bound on
127.0.0.1, on 0.0.0.0 and (where this machine has IPv6) on ::, with ``SO_REUSEADDR`` as servers
bind (a connection of an earlier server in TIME_WAIT does not count), and let go at once.

The daemon binds with its own rights, names no path and keeps nothing: nothing a member can
change is opened. A listener on another address of this machine only, or one started between
this check and the member's own bind, is not seen: the check makes a collision unlikely, the
member's server still reports its own.
"""

from __future__ import annotations

import errno
import socket

__all__ = ["port_free"]

_ADDRESSES = ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"),
              (socket.AF_INET6, "::"))
_NO_IPV6 = {errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL, errno.EPROTONOSUPPORT}


def port_free(port: int) -> bool:
    """Whether ``port`` can be bound on every address above (IPv6 skipped where absent)."""
    for family, address in _ADDRESSES:
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:
            if family == socket.AF_INET6 and exc.errno in _NO_IPV6:
                continue
            return False
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, port))
            except OSError as exc:
                if family == socket.AF_INET6 and exc.errno in _NO_IPV6:
                    continue
                return False
    return True
