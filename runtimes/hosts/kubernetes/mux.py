"""teamctl's MCP tools from a pod, over an exec stream (docs/security.md, "Members in
Kubernetes pods"). Standard library only: this file's text is also what runs in the pod.

**In the pod** (``python3 -c <this file> listen PATH``, a second exec stream of the member's
relay): a Unix socket at PATH (0600, its dir 0700) — the path the member's ``teamctl mcp`` is
told (``TEAMCTL_MCP_HOME``) — whose connections travel as frames on the exec's stdio; nothing
listens on the pod's network. A peer of another uid in the pod (SO_PEERCRED) is closed before
a byte is read and is never opened as a connection (its first refusal is said on stderr).

**Here** (``serve``, in the member's relay process): each connection opened there is a
connection of this process to the member's own socket of the daemon
(daemon/control/_member_sockets.py): ``member.*`` calls with that member's current token
only, from that member's processes (its relay is its process: daemon/control/_peers.py).

A frame: 4 bytes connection id, 1 byte kind (``OPEN``, ``DATA``, ``CLOSE``, ``READY``: the
socket is bound), 4 bytes length, the payload; big-endian. ``MAX_CONNECTIONS`` at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import sys
import threading
from typing import Any, BinaryIO

OPEN, DATA, CLOSE, READY = 0, 1, 2, 3
MAX_CONNECTIONS = 16
_HEADER = struct.Struct(">IBI")
_CHUNK = 1 << 16


def frame(connection: int, kind: int, payload: bytes = b"") -> bytes:
    return _HEADER.pack(connection, kind, len(payload)) + payload


class Frames:
    """Frames out of a byte stream fed in arbitrary chunks."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        self._buffer += data
        found = []
        while len(self._buffer) >= _HEADER.size:
            connection, kind, size = _HEADER.unpack_from(self._buffer)
            if len(self._buffer) < _HEADER.size + size:
                break
            found.append((connection, kind, self._buffer[_HEADER.size:_HEADER.size + size]))
            self._buffer = self._buffer[_HEADER.size + size:]
        return found


class Mux:
    """Connections by id, each pumped to ``send`` (a frame writer) by a thread of its own."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self._lock = threading.Lock()
        self.connections: dict[int, socket.socket] = {}

    def add(self, connection: int, sock: socket.socket) -> None:
        with self._lock:
            self.connections[connection] = sock
        threading.Thread(target=self._pump, args=(connection, sock), daemon=True).start()

    def _pump(self, connection: int, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = sock.recv(_CHUNK)
                if not data:
                    break
                self.send(frame(connection, DATA, data))
        if self.drop(connection):
            with contextlib.suppress(Exception):
                self.send(frame(connection, CLOSE))

    def drop(self, connection: int) -> bool:
        """Close ``connection``; False if it was gone already."""
        with self._lock:
            sock = self.connections.pop(connection, None)
        if sock is None:
            return False
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        return True

    def deliver(self, connection: int, payload: bytes) -> None:
        sock = self.connections.get(connection)
        if sock is None:
            return
        try:
            sock.sendall(payload)
        except OSError:
            if self.drop(connection):
                self.send(frame(connection, CLOSE))


# -- in the pod ----------------------------------------------------------------------------


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def listen(path: str) -> int:
    """The pod's side: bind PATH, announce READY, carry connections until stdin ends."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(path)
    finally:
        os.umask(old)
    server.listen(MAX_CONNECTIONS)
    out, lock = sys.stdout.buffer, threading.Lock()

    def send(data: bytes) -> None:
        with lock:
            out.write(data)
            out.flush()

    mux = Mux(send)
    threading.Thread(target=_accept, args=(server, mux, send), daemon=True).start()
    send(frame(0, READY))
    stdin = sys.stdin.buffer
    try:
        while True:
            header = _read_exact(stdin, _HEADER.size)
            if header is None:
                break
            connection, kind, size = _HEADER.unpack(header)
            payload = _read_exact(stdin, size) if size else b""
            if payload is None:
                break
            if kind == DATA:
                mux.deliver(connection, payload)
            elif kind == CLOSE:
                mux.drop(connection)
    finally:
        server.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
            os.rmdir(directory)
    return 0


def _accept(server: socket.socket, mux: Mux, send: Any) -> None:
    number = 0
    refused: set[int] = set()
    while True:
        try:
            sock, _ = server.accept()
        except OSError:
            return
        uid = _peer_uid(sock)
        if uid != os.getuid():
            sock.close()
            if uid not in refused:  # said once each: the stream carries nothing more of it
                refused.add(uid)
                sys.stderr.write(f"teamctl-kube: refused a connection from uid {uid}\n")
                sys.stderr.flush()
            continue
        if len(mux.connections) >= MAX_CONNECTIONS:
            sock.close()
            continue
        number += 1
        send(frame(number, OPEN))
        mux.add(number, sock)


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


# -- here, in the member's relay ------------------------------------------------------------


def serve(ws: Any, member_socket: str, frames: Frames,
          early: list[tuple[int, int, bytes]]) -> None:
    """Carry the pod's connections to ``member_socket`` until the stream ends (a thread);
    ``frames`` and ``early`` are ``wait_ready``'s."""
    mux = Mux(lambda data: ws.send_binary(b"\x00" + data))
    for connection, kind, payload in early:
        _here(mux, member_socket, connection, kind, payload)
    try:
        while True:
            opcode, received = ws.recv_data_frame(True)
            if opcode == 0x8:  # close
                break
            data = bytes(received.data or b"")
            if not data or data[0] != 1:
                continue
            for connection, kind, payload in frames.feed(data[1:]):
                _here(mux, member_socket, connection, kind, payload)
    except Exception:  # the stream is gone: the member's tools fail until its restart
        sys.stderr.write("teamctl-kube: the MCP stream of the pod ended\n")
    for connection in list(mux.connections):
        mux.drop(connection)


def _here(mux: Mux, member_socket: str, connection: int, kind: int, payload: bytes) -> None:
    if kind == OPEN:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(member_socket)
        except OSError:
            sock.close()
            mux.send(frame(connection, CLOSE))
            return
        mux.add(connection, sock)
    elif kind == DATA:
        mux.deliver(connection, payload)
    elif kind == CLOSE:
        mux.drop(connection)


def wait_ready(ws: Any) -> tuple[Frames, list[tuple[int, int, bytes]]]:
    """The pod's socket is bound (its READY frame); raises if the stream ends first. The
    parser and the frames that came after READY, for ``serve``."""
    frames = Frames()
    while True:
        opcode, received = ws.recv_data_frame(True)
        if opcode == 0x8:
            raise ConnectionError("the MCP forwarder's stream closed before it was ready")
        data = bytes(received.data or b"")
        if data[:1] == b"\x02":
            raise ConnectionError(data[1:].decode("utf-8", "replace").strip()[-300:])
        found = frames.feed(data[1:]) if data[:1] == b"\x01" else []
        kinds = [kind for _, kind, _ in found]
        if READY in kinds:
            return frames, found[kinds.index(READY) + 1:]


if __name__ == "__main__":
    if sys.argv[1:2] == ["listen"]:
        sys.exit(listen(sys.argv[2]))
    sys.exit(2)
