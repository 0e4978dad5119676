"""The sandbox's network relay (runtimes/hosts/sandbox/relay.py), the real process started as
the network plan starts it (``relay_command``: imported from teamctl's directory here, from its
source on an SSH host), outside a sandbox: a stand-in egress proxy on a Unix socket, a TCP server
for the way in, a child that uses the proxy port and a mapped port. It loads only what it must
(the property its few MiB beside each member with its network cut rest on,
docs/dev/performance.md), joins each connection both ways with every byte, hands the proxy's
refusal of a mapped port to the client, passes a stop signal on and exits with the child's
status."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

import pytest

from runtimes.hosts.sandbox.network import relay_command

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.MULTILINE)
_REFUSED = (b"HTTP/1.1 403 Forbidden\r\nX-Teamctl-Error: egress_denied\r\n"
            b"Content-Length: 2\r\n\r\nno")

# the runtime: through the proxy port (a CONNECT, then 1 MiB echoed), through the mapped port
# (the proxy asked for it by the relay), then through the refused mapped port; says what it
# got, waits for a line on stdin, exits 3
_CHILD = r"""
import os, socket, sys, threading
def through(port, head, payload):
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    def send():
        sock.sendall(head + payload)
        sock.shutdown(socket.SHUT_WR)
    threading.Thread(target=send).start()
    got = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return got
        got += data
proxy = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
payload = bytes(range(256)) * 4096
got = through(proxy, b"CONNECT example.org:443 HTTP/1.1\r\n\r\n", payload)
mapped = through(int(sys.argv[1]), b"", b"ping")
refused = through(int(sys.argv[2]), b"", b"ping")
print(got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"echo:" + payload), mapped, refused,
      os.environ["NO_PROXY"], flush=True)
sys.stdin.readline()
sys.exit(3)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _proxy(path: Path, refused_port: int, *, hand_over: bytes = b"HTTP/1.1 400 Bad Request",
           handed: list[socket.socket] | None = None) -> Iterator[list[bytes]]:
    """A stand-in egress proxy on ``path``: each connection's head recorded; a CONNECT to
    ``refused_port`` answered 403, any other 200 and then everything it sends echoed after
    ``echo:``; a hand-over answered ``hand_over``, the listeners that came with it kept in
    ``handed`` (the first, the proxy port's, then answers each connection ``hi``)."""
    heads: list[bytes] = []
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(16)

    def serve(conn: socket.socket) -> None:
        with conn:
            buffer, fds, _, _ = socket.recv_fds(conn, 4096, 16)
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(4096)
                if not data:
                    return
                buffer += data
            head, _, rest = buffer.partition(b"\r\n\r\n")
            heads.append(head)
            if head.startswith(b"TEAMCTL-LISTENERS/1 "):
                if handed is not None:
                    handed.extend(socket.socket(fileno=fd) for fd in fds)
                    threading.Thread(target=answer_hi, args=(handed[0],), daemon=True).start()
                conn.sendall(hand_over + b"\r\n\r\n")
                return
            if f"127.0.0.1:{refused_port} ".encode() in head:
                conn.sendall(_REFUSED)
                return
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\necho:" + rest)
            while data := conn.recv(65536):
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)

    def accept() -> None:
        with suppress(OSError):
            while True:
                conn, _ = server.accept()
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    def answer_hi(listener: socket.socket) -> None:
        listener.setblocking(True)  # the relay's, non-blocking (a flag its copies share)
        with suppress(OSError):
            while True:
                conn, _ = listener.accept()
                with conn:
                    conn.sendall(b"hi")

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield heads
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        for sock in handed or ():
            sock.close()


@contextmanager
def _server() -> Iterator[int]:
    """A TCP server on the loopback that answers each connection with what it got, upper."""
    server = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        with suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.sendall(conn.recv(100).upper())

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield int(server.getsockname()[1])
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()


def _start(tmp_path: Path, *args: str, flags: tuple[str, ...] = (),
           source: bool = False) -> subprocess.Popen[bytes]:
    command = relay_command(sys.executable, source=source)
    return subprocess.Popen([*command[:3], *flags, *command[3:], *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)


def _imported(stderr: str) -> set[str]:
    return set(_IMPORTED.findall(stderr))


def _startup() -> set[str]:
    """What ``python -I -S -c "import os"`` imports: the interpreter's own start."""
    done = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", "-c", "import os"],
                          capture_output=True, text=True, timeout=60, check=True)
    return _imported(done.stderr)


@pytest.mark.parametrize("source", [False, True], ids=["imported", "from-source"])
def test_the_relay_joins_every_way_and_loads_only_socket_os_and_select(
        tmp_path: Path, source: bool) -> None:
    """Through the proxy port, a mapped port and the way in, every byte both ways; a mapped
    port the proxy refuses gets the proxy's answer; the runtime's environment names the proxy
    and the loopback; its exit status is the relay's; the inbound socket (0600) is gone after.
    And the relay imported nothing but ``_socket``, ``os``, ``select`` (and itself) beyond the
    interpreter's own start — no ``socket``, ``subprocess``, ``threading``, ``struct``,
    ``typing``: what keeps it ~9 MiB beside each member where it was 13 MiB. A figure for the
    bench, not asserted here: bench_own_cost.py."""
    (tmp_path / "child.py").write_text(_CHILD)
    mapped, refused = _free_port(), _free_port()
    inbound = tmp_path / "serve.sock"
    with _proxy(tmp_path / "egress.sock", refused) as heads, _server() as port:
        relay = _start(tmp_path, "--socket", str(tmp_path / "egress.sock"), "--map", str(mapped),
                       "--map", str(refused), "--inbound", f"{port}:{inbound}", "--",
                       sys.executable, "child.py", str(mapped), str(refused),
                       flags=("-X", "importtime"), source=source)
        assert relay.stdout is not None
        said = relay.stdout.readline().decode()
        assert said.split(" ", 1) == [
            "True", f"b'echo:ping' {_REFUSED!r} localhost,127.0.0.1,::1\n"], said
        assert inbound.stat().st_mode & 0o777 == 0o600
        with socket.socket(socket.AF_UNIX) as way_in:
            way_in.settimeout(30)
            way_in.connect(str(inbound))
            way_in.sendall(b"hello")
            assert way_in.recv(100) == b"HELLO"
        _, stderr = relay.communicate(b"\n", timeout=60)
    assert relay.returncode == 3, stderr
    assert not inbound.exists()
    assert [h.split(b"\r\n")[0] for h in heads] == [
        b"CONNECT example.org:443 HTTP/1.1", f"CONNECT 127.0.0.1:{mapped} HTTP/1.1".encode(),
        f"CONNECT 127.0.0.1:{refused} HTTP/1.1".encode()]
    loaded = _imported(stderr.decode())
    assert loaded - _startup() == {"_socket", "select", "__future__", "relay"} - (
        {"relay"} if source else set())


def test_a_stop_signal_reaches_the_runtime_and_its_end_is_the_relays(tmp_path: Path) -> None:
    """SIGTERM to the relay is passed on; the child ends by it, the relay exits 128 + 15.

    The child waits on nothing but a signal: one that read its stdin ended by itself (exit 0)
    when ``communicate`` closed that pipe before the forwarded SIGTERM reached it."""
    with _proxy(tmp_path / "egress.sock", 0):
        relay = _start(tmp_path, "--socket", str(tmp_path / "egress.sock"), "--",
                       sys.executable, "-c", "import signal; print('up', flush=True); "
                       "signal.pause()")
        assert relay.stdout is not None
        assert relay.stdout.readline() == b"up\n"
        relay.send_signal(signal.SIGTERM)
        relay.communicate(timeout=60)
    assert relay.returncode == 128 + signal.SIGTERM


def test_a_runtime_that_cannot_start_is_said_and_exits_127(tmp_path: Path) -> None:
    with _proxy(tmp_path / "egress.sock", 0):
        relay = _start(tmp_path, "--socket", str(tmp_path / "egress.sock"), "--",
                       str(tmp_path / "no-such-cli"))
        _, stderr = relay.communicate(timeout=60)
    assert relay.returncode == 127
    assert f"sandbox_relay: cannot start {tmp_path / 'no-such-cli'}" in stderr.decode()


def test_the_relay_starts_with_no_descriptor_of_its_own_open_in_the_runtime(
        tmp_path: Path) -> None:
    """The runtime inherits its stdio only: no listener, no pipe of the relay's."""
    with _proxy(tmp_path / "egress.sock", 0):
        relay = _start(tmp_path, "--socket", str(tmp_path / "egress.sock"), "--",
                       sys.executable, "-c", "import os; print(sorted(int(f) for f in "
                       "os.listdir('/proc/self/fd')))")
        out, stderr = relay.communicate(timeout=60)
    assert relay.returncode == 0, stderr
    assert out.decode().strip() in ("[0, 1, 2]", "[0, 1, 2, 3]"), out  # 3: listdir's own
    assert os.path.exists(tmp_path / "egress.sock")


# the runtime after a hand-over: its pid, what the proxy port says
_BECOME = r"""
import os, socket
port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
    said = sock.recv(10)
print(os.getpid(), said.decode(), flush=True)
"""


def test_handed_over_the_relay_becomes_the_runtime(tmp_path: Path) -> None:
    """``--hand-over``: the listeners (the proxy port's, each mapped port's, in that order and
    named in the head) go to the proxy, which answers 200; the relay then *is* the runtime
    (the same pid, its environment set) and the proxy serves the listeners itself."""
    mapped = _free_port()
    handed: list[socket.socket] = []
    with _proxy(tmp_path / "egress.sock", 0, hand_over=b"HTTP/1.1 200 OK",
                handed=handed) as heads:
        relay = _start(tmp_path, "--socket", str(tmp_path / "egress.sock"), "--hand-over",
                       "--map", str(mapped), "--", sys.executable, "-c", _BECOME)
        out, stderr = relay.communicate(timeout=60)
        assert relay.returncode == 0, stderr
        assert out.decode().split() == [str(relay.pid), "hi"]
        assert [(s.getsockname(), s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
                for s in handed][1:] == [(("127.0.0.1", mapped), 1)]
        assert heads == [f"TEAMCTL-LISTENERS/1 {handed[0].getsockname()[1]} {mapped}".encode()]
    assert stderr == b""


def test_a_hand_over_refused_is_said_and_the_relay_relays_itself(tmp_path: Path) -> None:
    """The proxy answers 400 (here: a hand-over it does not take, as on a host whose socket
    is forwarded): said on stderr; the relay starts the runtime as its child and relays."""
    with _proxy(tmp_path / "egress.sock", 0):
        relay = _start(tmp_path, "--socket", str(tmp_path / "egress.sock"), "--hand-over", "--",
                       sys.executable, "-c", _BECOME.replace("sock.recv(10)", (
                           "sock.sendall(b'CONNECT a:1 HTTP/1.1\\r\\n\\r\\n') or "
                           "sock.recv(8)")))
        out, stderr = relay.communicate(timeout=60)
    assert relay.returncode == 0, stderr
    pid, said = out.decode().split()
    assert (pid != str(relay.pid), said) == (True, "HTTP/1.1")
    assert b"sandbox_relay: the daemon did not take the listeners (HTTP/1.1 400 Bad Request): " \
        b"relayed here" in stderr


@pytest.mark.parametrize("hand_over", [b"HTTP/1.1 200 OK", b"HTTP/1.1 400 Bad Request"],
                         ids=["became-it", "its-child"])
def test_the_runtime_starts_with_sigpipe_at_its_default(tmp_path: Path,
                                                        hand_over: bytes) -> None:
    """The interpreter ignores SIGPIPE and SIGXFSZ; the runtime (and what it runs: a shell's
    ``yes | head``) does not inherit that, whether the relay became it or started it."""
    with _proxy(tmp_path / "egress.sock", 0, hand_over=hand_over, handed=[]):
        relay = _start(tmp_path, "--socket", str(tmp_path / "egress.sock"), "--hand-over", "--",
                       "grep", "^SigIgn:", "/proc/self/status")
        out, stderr = relay.communicate(timeout=60)
    assert relay.returncode == 0, stderr
    ignored = int(out.split()[1], 16)
    assert ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)) == 0, out
