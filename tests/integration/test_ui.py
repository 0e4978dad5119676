"""`teamctl ui` with a real daemon: nothing listens before it, it prints a loopback URL with a
one-time token, the event stream announces a journal change without polling, a busy port is a
typed error with the daemon unaffected, and ``--open`` without a browser says what to open."""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlparse

import httpx

from tests.conftest import fake_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import Teamctl


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
