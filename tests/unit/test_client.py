"""The CLI's side of the socket: what the user is told when the daemon goes away mid-request,
and requests too large to send."""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING

import pytest

from orchestrator import client, protocol, rpc
from orchestrator.errors import ConnectionLost, RequestTooLarge
from orchestrator.paths import Home

if TYPE_CHECKING:
    from pathlib import Path


def _server_that_hangs_up(path: Path) -> threading.Thread:
    """Accepts one connection, reads the request line, closes without answering."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    data += conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_a_send_cut_after_its_request_was_written_says_check_history(tmp_path: Path) -> None:
    home = Home(tmp_path)
    thread = _server_that_hangs_up(home.socket)
    with pytest.raises(ConnectionLost) as caught:
        client.call(home, protocol.SEND, {"member": "lead", "text": "hi"}, timeout=10)
    thread.join(10)
    assert "it may have been journaled: check 'teamctl history lead'" in caught.value.message
    assert caught.value.exit_code == 4


def test_a_status_cut_does_not_mention_history(tmp_path: Path) -> None:
    home = Home(tmp_path)
    thread = _server_that_hangs_up(home.socket)
    with pytest.raises(ConnectionLost) as caught:
        client.call(home, protocol.STATUS, {}, timeout=10)
    thread.join(10)
    assert "went away before answering 'status'" in caught.value.message
    assert "journaled" not in caught.value.message


def test_a_request_over_the_limit_is_refused_before_connecting(tmp_path: Path) -> None:
    """A >1 MiB send was reported as "no daemon reachable" (exit 4): now a usage error."""
    with pytest.raises(RequestTooLarge) as caught:
        client.call(Home(tmp_path), protocol.SEND,
                    {"member": "lead", "text": "x" * rpc.REQUEST_LIMIT_BYTES})
    assert caught.value.exit_code == 2 and "1 MiB limit" in caught.value.message


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polled"])
def test_daemon_exit_waits_for_the_process_that_answered_and_gives_up_at_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pidfd: bool) -> None:
    """``teamctl stop`` returns once the daemon has exited: the process that answered
    ``ping`` (here a child standing in for it) is waited on, with a deadline."""
    import subprocess

    from orchestrator.client import calls

    if not pidfd:
        monkeypatch.delattr(calls.os, "pidfd_open", raising=False)
    stand_in = subprocess.Popen(["sleep", "60"])
    try:
        monkeypatch.setattr(calls, "call", lambda *_a, **_k: {"pid": stand_in.pid})
        with client.daemon_exit(Home(tmp_path)) as exited:
            assert not exited(0.05), "still running: not exited at the deadline"
            stand_in.kill()
            if not pidfd:
                stand_in.wait()  # reaped, as init reaps a real daemon (not a zombie)
            assert exited(10.0)
    finally:
        stand_in.kill()
        stand_in.wait()


def test_daemon_exit_with_no_daemon_has_nothing_to_wait_for(tmp_path: Path) -> None:
    with client.daemon_exit(Home(tmp_path)) as exited:
        assert exited(0.0)


@pytest.mark.parametrize("answer", [{}, {"pid": "abc"}, {"pid": None}, {"pid": 0}, {"pid": -1},
                                    {"pid": 1}, [], "pid"], ids=repr)
def test_daemon_exit_never_waits_on_a_broken_pid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: object) -> None:
    """A ping answer without a daemon's pid (missing, not a number, 0 or -1 — a process group
    or every process to ``kill`` — or init's) is nothing to wait for, not a minute's hang."""
    from orchestrator.client import calls

    monkeypatch.setattr(calls, "call", lambda *_a, **_k: answer)
    with client.daemon_exit(Home(tmp_path)) as exited:
        assert exited(0.0)
