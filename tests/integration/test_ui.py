"""`teamctl ui` with a real daemon: nothing listens before it, it prints a loopback URL with a
one-time token, the event stream announces a journal change without polling, a busy port is a
typed error with the daemon unaffected, and ``--open`` without a browser says what to open.
Against other local users: half-sent requests cannot lock the operator out, a head that never
ends is closed, ``daemon.out`` stays bounded, ``ui --open`` puts no secret on a command line."""

from __future__ import annotations

import contextlib
import json
import resource
import secrets
import select
import socket
import stat
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, urlparse

import httpx

from tests.support.http_servers import half_sent
from tests.support.members import fake_member
from tests.support.processes import wait_for_path
from tests.support.scripts import python_script

if TYPE_CHECKING:

    from collections.abc import Iterator

    from tests.support.driver import Teamctl


def _listening(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (from /proc/net/tcp and its fds)."""
    import os
    from pathlib import Path

    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
            ports.add(int(fields[1].split(":")[1], 16))
    return ports


def test_ui_prints_a_loopback_url_and_the_stream_announces_changes(teamctl: Teamctl) -> None:
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))
                       ).returncode == 0
    daemon = teamctl.daemon_pid()
    assert daemon is not None and _listening(daemon) == set(), "nothing listens before ui"
    first = teamctl.run("ui")
    assert first.returncode == 0, first.stderr
    url = urlparse(first.stdout.strip())
    assert (url.scheme, url.hostname) == ("http", "127.0.0.1") and url.query.startswith(
        "token=")
    assert _listening(daemon) == {url.port}
    second = json.loads(teamctl.run("ui", "--json").stdout)
    assert urlparse(second["url"]).port == url.port and second["url"] != first.stdout.strip()
    events = [json.dumps(e) for e in teamctl.log_events()]
    assert not any(url.query.split("=")[1] in e for e in events), "the token is never logged"

    base = f"http://127.0.0.1:{url.port}"
    with httpx.Client(base_url=base, timeout=30) as browser:
        assert browser.get(f"/?{url.query}", follow_redirects=False).status_code == 303
        with browser.stream("GET", "/events") as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: change"
            first_version = int(next(lines).removeprefix("data: "))
            assert teamctl.run("send", "lead", "hello", "--wait").returncode == 0
            for line in lines:
                if line.startswith("data: "):
                    assert int(line.removeprefix("data: ")) > first_version
                    break
        assert "fake-claude" in browser.get("/fragments/conversation?member=lead").text


def test_a_busy_port_is_a_usage_error_and_the_daemon_goes_on(teamctl: Teamctl) -> None:
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))
                       ).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = teamctl.run("ui", "--port", str(port))
        assert done.returncode == 2 and "pick another --port" in done.stderr
    assert teamctl.run("ui", "--port", "80").returncode == 2, "no privileged port"
    assert teamctl.run("ui").returncode == 0 and teamctl.run("status").returncode == 0


def test_status_watch_redraws_on_a_change_not_on_a_timer(teamctl: Teamctl) -> None:
    import subprocess
    import sys

    assert teamctl.run("launch", str(teamctl.write_team("web", [
        fake_member("lead", backoff=[30.0, 60.0])]))).returncode == 0
    watch = subprocess.Popen([sys.executable, "-m", "orchestrator", "status", "--watch",
                              "--json"], env=teamctl.env, stdout=subprocess.PIPE, text=True)
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())
        [row] = first["teams"][0]["members"]
        assert row["launch"] == "running"
        import os
        import signal

        os.kill(row["pid"], signal.SIGKILL)
        while True:  # each line is a redraw after a change; the member goes to backoff
            [row] = json.loads(watch.stdout.readline())["teams"][0]["members"]
            if row["launch"] == "backoff":
                break
    finally:
        watch.terminate()
        watch.wait(timeout=10)
        if watch.stdout is not None:
            watch.stdout.close()


def test_hostile_params_on_the_new_socket_methods_are_refused_and_nothing_is_lost(
        teamctl: Teamctl) -> None:
    gate = teamctl.workdir / "gate"  # lead's turn stays in flight through the hostile calls
    assert teamctl.run("launch", str(teamctl.write_team("web", [
        fake_member("lead", env={"FAKE_CLAUDE_TURN_GATE": str(gate)})]))).returncode == 0
    queued = teamctl.run("send", "lead", "kept through it all").stdout.strip()
    for method, params in (("changes", {"after": -1}), ("changes", {"wait": 1e9}),
                           ("changes", {"wait": "forever"}), ("ui", {"port": 70000}),
                           ("ui", {"port": 22}), ("ui", {"host": "0.0.0.0"}),
                           ("approvals", {"wait": 99}), ("approvals", {"after": "x"}),
                           ("deny", {"id": "apv_" + "A" * 26, "message": "m" * 20_000}),
                           ("answer", {"id": "apv_" + "A" * 26, "text": ""})):
        answer = teamctl.rpc(method, params)
        assert answer["error"]["code"] == "usage_error", (method, params, answer)
    assert teamctl.run("status").returncode == 0, "the daemon is up"
    gate.touch()
    done = teamctl.run("send", "lead", "and after", "--wait")
    assert done.returncode == 0, done.stderr
    states = {m["id"]: m["state"] for m in teamctl.json("history", "lead")["messages"]}
    assert states[queued] == "answered", "the queued message was not lost"


def test_ui_open_without_a_browser_says_so_and_names_the_file_to_open(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """`ui --open` on a machine with no browser (none installed, no display, or BROWSER naming
    a program that is not there) opened nothing and said nothing, exit 0. The promise: it
    still prints the URL and exits 0, and one warning line on stderr says no browser was
    opened (and why, for BROWSER) and names the sign-in file to open by hand."""
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))
                       ).returncode == 0
    empty = tmp_path / "bin"
    empty.mkdir()
    bare = {"PATH": str(empty), "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    page = teamctl.home / "ui" / "sign-in.html"
    for browser in (str(tmp_path / "no-such-browser"), ""):
        done = teamctl.run("ui", "--open", extra_env={**bare, "BROWSER": browser})
        assert done.returncode == 0, done.stderr
        printed = urlparse(done.stdout.strip())
        assert (printed.scheme, printed.hostname) == ("http", "127.0.0.1")
        [warning] = [line for line in done.stderr.splitlines() if "no browser" in line]
        assert warning.startswith("teamctl: warning: no browser opened") and \
            page.as_uri() in warning, done.stderr
        assert ("no-such-browser" in warning) == bool(browser), warning
        token = parse_qs(printed.query)["token"][0]
        assert token in page.read_text(), "the file named signs in with this link's token"


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
    python_script(script, f"import json, sys\nopen({str(record)!r}, 'w').write("
                          "json.dumps(sys.argv))\n", mode=0o755)
    return script, record


@contextlib.contextmanager
def _other_user() -> Iterator[str]:
    """A throwaway local user (tests/support/sshd.py's pattern), removed afterwards."""
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
