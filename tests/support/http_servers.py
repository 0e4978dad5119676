"""Local HTTP servers and connections for the tests: two servers for the sandbox network tests
(one stands for the provider's API, the allowed destination, the other for anything else),
and a connection that sends half a request head and never its end (the live view's guard)."""

from __future__ import annotations

import http.server
import socket
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


class _Api(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"api on {self.server.server_address[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@contextmanager
def api_servers() -> Iterator[tuple[int, int]]:
    """Two local HTTP servers: (the fake API's port, another's)."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api) for _ in range(2)]
    for server in servers:
        # a short poll: shutdown() waits for the loop to look (socketserver's 0.5 s default)
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    try:
        yield servers[0].server_address[1], servers[1].server_address[1]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def half_sent(port: int) -> socket.socket | None:
    """A connection that sends the start of a request head and never its end (None: refused)."""
    sock = socket.socket()
    try:
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
    except OSError:
        sock.close()
        return None
    return sock
