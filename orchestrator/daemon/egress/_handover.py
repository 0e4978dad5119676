"""The listeners a sandbox's relay hands its member's egress proxy (docs/security.md, "The
network boundary"), so that no relay process stays beside the runtime.

The relay (runtimes/hosts/sandbox/relay.py, ``--hand-over``) binds its listeners on the
sandbox's own loopback before anything of the member runs there, sends them on the proxy's
Unix socket as the head ``TEAMCTL-LISTENERS/1 PROXY_PORT [MAPPED_PORT...]`` with one
descriptor per port (SCM_RIGHTS, in that order), and once the proxy answers 200 it becomes the
runtime (``exec``). ``take`` checks what came; each descriptor must be

- a TCP/IPv4 socket, listening, bound to ``127.0.0.1`` at the port the head names for it;
- in a network namespace that is not the daemon's own, as the kernel says (``SIOCGSKNS``,
  which also needs the daemon's CAP_NET_ADMIN over that namespace: one its user made, a
  sandbox's) — never this machine's loopback, which any local user reaches.

Anything else is refused (``EgressRefused``, 400) and every descriptor closed; the relay then
relays itself, as on an SSH host. At most ``MAX_LISTENERS``.
"""

from __future__ import annotations

import fcntl
import os
import socket
from contextlib import suppress
from dataclasses import dataclass

from orchestrator.errors import EgressRefused

__all__ = ["HANDOVER", "MAX_LISTENERS", "Handed", "take"]

HANDOVER = b"TEAMCTL-LISTENERS/1 "
MAX_LISTENERS = 64
_SIOCGSKNS = 0x894C  # linux/sockios.h: the network namespace of a socket, as a new descriptor


@dataclass(frozen=True)
class Handed:
    """The listeners taken: the proxy port's, and each mapped port's with its port."""

    proxy: socket.socket
    mapped: tuple[tuple[int, socket.socket], ...]

    def ports(self) -> list[int]:
        return [int(self.proxy.getsockname()[1]), *(port for port, _ in self.mapped)]

    def close(self) -> None:
        for sock in (self.proxy, *(listener for _, listener in self.mapped)):
            sock.close()


def _refused(message: str) -> EgressRefused:
    return EgressRefused("egress_handover_refused", 400, message)


def _ports(head: bytes) -> list[int]:
    words = head[len(HANDOVER):].split()
    if not 0 < len(words) <= MAX_LISTENERS or not all(w.isdigit() and len(w) <= 5
                                                       for w in words):
        raise _refused(f"the head names 1 to {MAX_LISTENERS} ports")
    ports = [int(w) for w in words]
    if not all(0 < p < 65536 for p in ports) or len(set(ports)) != len(ports):
        raise _refused("a port outside 1..65535, or named twice")
    return ports


def _namespace(sock: socket.socket) -> int:
    """The inode of ``sock``'s network namespace (the kernel's answer)."""
    try:
        found = fcntl.ioctl(sock.fileno(), _SIOCGSKNS)
    except OSError as exc:
        raise _refused(f"its network namespace cannot be asked ({exc.strerror}): not a "
                       "sandbox's") from None
    try:
        return os.fstat(found).st_ino
    finally:
        os.close(found)


def _listener(fd: int, port: int) -> socket.socket:
    """``fd`` as the listener of ``port`` (see the module's doc), or closed and refused."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        os.close(fd)
        raise _refused("not a socket") from None
    try:
        if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM:
            raise _refused("not a TCP/IPv4 socket")
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise _refused("not listening")
        if sock.getsockname() != ("127.0.0.1", port):
            raise _refused(f"not bound to 127.0.0.1:{port}")
        if _namespace(sock) == os.stat("/proc/self/ns/net").st_ino:
            raise _refused("a listener on the daemon's own network, not a sandbox's")
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def take(head: bytes, fds: list[int]) -> Handed:
    """The listeners ``head`` names, from ``fds`` (see the module's doc); every descriptor is
    the Handed's or closed when this returns or raises."""
    try:
        ports = _ports(head)
        if len(fds) != len(ports):
            raise _refused(f"{len(ports)} ports named, {len(fds)} descriptors sent")
    except BaseException:
        _close(fds)
        raise
    taken: list[socket.socket] = []
    for index, (fd, port) in enumerate(zip(fds, ports, strict=True)):
        try:
            taken.append(_listener(fd, port))  # closed by it when refused
        except BaseException:
            for sock in taken:
                sock.close()
            _close(fds[index + 1:])
            raise
    return Handed(taken[0], tuple(zip(ports[1:], taken[1:], strict=True)))


def _close(fds: list[int]) -> None:
    for fd in fds:
        with suppress(OSError):
            os.close(fd)
