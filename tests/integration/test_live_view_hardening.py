"""The live view's port against a local flood, with a real daemon: half-sent requests cannot
lock the operator out of the control socket (a descriptor reserve, a connection cap), a request
head that never ends is closed after the header timeout, and ``daemon.out`` stays bounded."""

from __future__ import annotations

import contextlib
import resource
import select
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from tests.conftest import fake_member

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Teamctl

SOFT_LIMIT = 300
FLOOD = 450
OUT_BOUND = 64 * 1024


def _start_ui(teamctl: Teamctl, **settings: str) -> tuple[int, int]:
    """Launch a team and the live view with ``settings`` (env); (daemon pid, port)."""
    teamctl.env.update(settings)
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))
                       ).returncode == 0
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    done = teamctl.run("ui")
    assert done.returncode == 0, done.stderr
    port = urlparse(done.stdout.strip()).port
    assert port is not None
    return daemon, port


def _half_sent(port: int) -> socket.socket | None:
    """A connection that sends the start of a request head and never its end (None: refused)."""
    sock = socket.socket()
    try:
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
    except OSError:
        sock.close()
        return None
    return sock


@contextlib.contextmanager
def _flood(port: int, count: int) -> Iterator[list[socket.socket]]:
    held = [s for s in (_half_sent(port) for _ in range(count)) if s is not None]
    try:
        yield held
    finally:
        for sock in held:
            sock.close()


def _closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """True once the server has closed ``sock`` (EOF or reset), waiting at most ``timeout``."""
    readable, _, _ = select.select([sock], [], [], timeout)
    if not readable:
        return False
    with contextlib.suppress(OSError):
        sock.recv(4096)  # EOF, a reset, or a refusal's answer before the close
    return True


def _out_size(teamctl: Teamctl) -> int:
    logs = teamctl.home / "logs"
    return sum(p.stat().st_size for p in logs.glob("daemon.out*"))


def test_a_flood_of_half_sent_requests_on_the_live_view_leaves_status_answering(
        teamctl: Teamctl) -> None:
    """~450 half-sent requests on the live view's port (the daemon's soft descriptor limit at
    300) exhausted the daemon's descriptors: `teamctl status` failed for 90 s and asyncio's
    EMFILE traceback loop filled daemon.out. The promise: the live view keeps a reserve of
    descriptors (it closes what it cannot afford), so the control socket answers during the
    flood, and daemon.out stays under its bound."""
    daemon, port = _start_ui(teamctl, TEAMCTL_UI_HEADER_TIMEOUT="120",
                             TEAMCTL_UI_MAX_CONNECTIONS="1000",  # the reserve decides here
                             TEAMCTL_DAEMON_OUT_MAX_BYTES=str(OUT_BOUND))
    hard = resource.prlimit(daemon, resource.RLIMIT_NOFILE)[1]
    resource.prlimit(daemon, resource.RLIMIT_NOFILE, (SOFT_LIMIT, hard))
    with _flood(port, FLOOD) as held:
        assert len(held) > 0
        done = teamctl.run("status", timeout=30)
        assert done.returncode == 0, done.stderr
        assert "lead" in done.stdout
        refused = [s for s in held if _closed_by_peer(s, 0.0)]
        assert refused, "past its reserve the live view closes new connections"
        [event] = [e for e in teamctl.log_events() if e["event"] == "ui_connections_refused"]
        assert 0 < event["open"] < SOFT_LIMIT - event["fd_reserve"]
        assert _out_size(teamctl) <= 2 * OUT_BOUND
        assert teamctl.run("send", "lead", "still here?", "--wait", timeout=60
                           ).returncode == 0
    assert _out_size(teamctl) <= 2 * OUT_BOUND


def test_a_request_head_that_never_ends_is_closed_after_the_header_timeout(
        teamctl: Teamctl) -> None:
    """uvicorn's h11 protocol has no header timeout: a half-sent request held its connection
    (and a descriptor) forever. The promise: a connection whose request head is not complete
    within the header timeout (a setting) is closed."""
    _daemon, port = _start_ui(teamctl, TEAMCTL_UI_HEADER_TIMEOUT="1")
    with _flood(port, 3) as held:
        assert len(held) == 3
        assert all(_closed_by_peer(s, 30.0) for s in held)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"GET /static/app.css HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     "Connection: close\r\n\r\n".encode())
        assert sock.recv(64).startswith(b"HTTP/1.1 401"), "a whole request is still served"
