"""The live view against other local users, with a real daemon: half-sent requests cannot lock
the operator out of the control socket (a descriptor reserve, a connection cap), a request head
that never ends is closed after the header timeout, ``daemon.out`` stays bounded, and
``ui --open`` gives the browser no reusable secret on its command line."""

from __future__ import annotations

import contextlib
import json
import resource
import secrets
import select
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlparse

import httpx

from tests.conftest import fake_member, wait_for_path

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


@contextlib.contextmanager
def _flood(port: int, count: int) -> Iterator[list[socket.socket]]:
    held = [s for s in (half_sent(port) for _ in range(count)) if s is not None]
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


def _fake_browser(tmp: Path) -> tuple[Path, Path]:
    """A BROWSER that records its argv (one JSON list) and exits; (script, its record)."""
    record = tmp / "browser-argv.json"
    script = tmp / "fake-browser"
    script.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(record)!r}, 'w').write(json.dumps(sys.argv))\n")
    script.chmod(0o755)
    return script, record


@contextlib.contextmanager
def _other_user() -> Iterator[str]:
    """A throwaway local user (tests/sshd.py's pattern), removed afterwards."""
    user = f"tcu{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", user], check=True,
                   capture_output=True)
    try:
        yield user
    finally:
        subprocess.run(["userdel", user], check=False, capture_output=True)


def test_ui_open_puts_no_sign_in_token_on_the_browsers_command_line(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """`ui --open` handed the sign-in URL, token included, to the browser's argv, which every
    local user can read in /proc/PID/cmdline: another uid redeemed it first. The promise: the
    browser is given a file:// address of a 0600 page in the 0700 home that POSTs the one-time
    token; nothing in its argv signs anyone in, and another uid cannot read the page."""
    script, record = _fake_browser(tmp_path)
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))
                       ).returncode == 0
    done = teamctl.run("ui", "--open", extra_env={"BROWSER": str(script)})
    assert done.returncode == 0, done.stderr
    printed = urlparse(done.stdout.strip())
    token = printed.query.removeprefix("token=")
    assert wait_for_path(record, 30), "the browser was started"
    argv = json.loads(record.read_text())
    assert not any(token in arg for arg in argv), argv
    page = Path(urlparse(argv[-1]).path)
    assert argv[-1].startswith("file://") and page.is_file()
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert stat.S_IMODE(page.parent.stat().st_mode) == 0o700
    base = f"http://127.0.0.1:{printed.port}"
    with httpx.Client(base_url=base, timeout=30) as browser:
        for arg in argv:  # nothing in argv redeems, as a URL or as a token
            assert browser.get(f"/?token={quote(arg)}").status_code == 403
            assert browser.post("/signin", data={"token": arg}).status_code == 403
        html = page.read_text()
        assert f'action="{base}/signin"' in html and token in html
        signed = browser.post("/signin", data={"token": token})
        assert signed.status_code == 200 and 'content="0;url=/"' in signed.text
        assert browser.get("/").status_code == 200, "the page's own POST signs the browser in"
        assert browser.get(f"/?token={token}").status_code == 403, "once"
    with _other_user() as user:
        for folder in (page.parent, *page.parents):  # even where every dir lets it pass
            folder.chmod(folder.stat().st_mode | 0o001)
        peek = subprocess.run(["cat", str(page)], user=user, capture_output=True, check=False)
        assert peek.returncode != 0 and b"token" not in peek.stdout
