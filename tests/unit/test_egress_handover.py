"""What a sandbox's relay hands its egress proxy (orchestrator/daemon/egress/_handover.py):
anything but a listener on ``127.0.0.1`` at the port the head names, in a network namespace
that is not the daemon's, is refused — a listener on this machine's own loopback above all,
which any local user reaches — and every descriptor of a refused hand-over is closed, none
kept. (A sandbox's listeners taken and served: tests/integration/test_egress_handover.py.)"""

from __future__ import annotations

import errno
import os
import socket
from typing import TYPE_CHECKING

import pytest

from orchestrator.daemon.egress._handover import HANDOVER, MAX_LISTENERS, take
from orchestrator.errors import EgressRefused

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError as exc:
        return exc.errno == errno.EBADF
    return False


def _loopback_listener() -> tuple[int, int]:
    sock = socket.create_server(("127.0.0.1", 0))
    return sock.getsockname()[1], sock.detach()


def _udp() -> tuple[int, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    return sock.getsockname()[1], sock.detach()


def _ipv6() -> tuple[int, int]:
    sock = socket.create_server(("::1", 0), family=socket.AF_INET6)
    return sock.getsockname()[1], sock.detach()


def _not_listening() -> tuple[int, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock.getsockname()[1], sock.detach()


def _unix(tmp: str) -> Callable[[], tuple[int, int]]:
    def make() -> tuple[int, int]:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(os.path.join(tmp, "s.sock"))
        sock.listen()
        return 8080, sock.detach()
    return make


def _pipe() -> tuple[int, int]:
    read, write = os.pipe()
    os.close(write)
    return 8080, read


def _another_port() -> tuple[int, int]:
    port, fd = _loopback_listener()
    return (port % 60000) + 1, fd


@pytest.mark.parametrize(("make", "said"), [
    (_loopback_listener, ("the daemon's own network", "cannot be asked")),
    (_udp, ("not a TCP/IPv4 socket",)),
    (_ipv6, ("not a TCP/IPv4 socket",)),
    (_not_listening, ("not listening",)),
    (_pipe, ("not a socket",)),
    (_another_port, ("not bound to 127.0.0.1:",)),
], ids=["own-loopback", "udp", "ipv6", "not-listening", "pipe", "another-port"])
def test_anything_but_a_sandboxs_listener_is_refused_and_closed(
        make: Callable[[], tuple[int, int]], said: tuple[str, ...]) -> None:
    port, fd = make()
    with pytest.raises(EgressRefused) as refused:
        take(HANDOVER + str(port).encode(), [fd])
    assert refused.value.code == "egress_handover_refused" and refused.value.status == 400
    assert any(s in refused.value.message for s in said), refused.value.message
    assert _closed(fd)


def test_a_unix_listener_is_refused(tmp_path: Path) -> None:
    port, fd = _unix(str(tmp_path))()
    with pytest.raises(EgressRefused, match="not a TCP/IPv4 socket"):
        take(HANDOVER + str(port).encode(), [fd])
    assert _closed(fd)


@pytest.mark.parametrize("ports", [
    b"", b"0", b"70000", b"8080 8080", b"80a", b"-1", b"123456",
    " ".join(str(p) for p in range(1000, 1001 + MAX_LISTENERS)).encode(),
], ids=["none", "zero", "too-high", "twice", "not-digits", "negative", "six-digits",
        "too-many"])
def test_a_head_that_names_no_good_ports_is_refused_and_every_descriptor_closed(
        ports: bytes) -> None:
    fds = [os.pipe()[0] for _ in range(2)]
    with pytest.raises(EgressRefused, match="port"):
        take(HANDOVER + ports, fds)
    assert all(_closed(fd) for fd in fds)


def test_as_many_descriptors_as_ports_or_none_is_kept() -> None:
    """Two ports named, one descriptor (or three): refused, all closed."""
    for count in (1, 3):
        fds = [_loopback_listener()[1] for _ in range(count)]
        with pytest.raises(EgressRefused, match=f"2 ports named, {count} descriptors sent"):
            take(HANDOVER + b"8080 8081", fds)
        assert all(_closed(fd) for fd in fds)


def test_one_bad_descriptor_closes_the_ones_after_it_too() -> None:
    fds = [_udp()[1], _pipe()[1], _loopback_listener()[1]]
    with pytest.raises(EgressRefused):
        take(HANDOVER + b"8080 8081 8082", fds)
    assert all(_closed(fd) for fd in fds)
