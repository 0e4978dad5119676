"""A second local uid for the tests (they run as root): a throwaway user (``other_user``, as
tests/support/sshd.py and test_ui.py make one) and a client of a Unix socket run as
that user (``connect_as``; ``run_as`` for any other system call: a child forked from the test's
process drops to the uid first — the venv's interpreter under /root is not the other user's
to start).

The child imports nothing and only makes system calls, so forking a test process that has
threads is safe; it reports over a pipe and ends with ``os._exit``."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import secrets
import socket
import stat
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


@dataclass(frozen=True)
class OtherUser:
    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Probe:
    """What the other uid's client saw: the ``connect`` refused (``refused``: its errno's
    name), or connected, its ``payload`` sent, and ``answer``: every byte read until the
    server closed (``closed``) or the deadline passed."""

    refused: str | None
    answer: bytes = b""
    closed: bool = False


@contextlib.contextmanager
def other_user() -> Iterator[OtherUser]:
    """A throwaway local user, removed afterwards."""
    name = f"tcu{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True,
                   capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield OtherUser(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


def _client(path: str, payload: bytes, timeout: float) -> dict[str, object]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError as exc:
        return {"refused": errno.errorcode.get(exc.errno or 0, str(exc))}
    answer, closed = b"", False
    try:
        with contextlib.suppress(OSError):  # a peer that closed first: EPIPE
            sock.sendall(payload)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            answer += chunk
    except ConnectionResetError:  # closed with our bytes unread: a reset, not a FIN
        closed = True
    except TimeoutError:
        pass
    finally:
        sock.close()
    return {"refused": None, "answer": answer.hex(), "closed": closed}


def run_as(user: OtherUser, action: Callable[[], bytes]) -> bytes:
    """``action()``'s bytes, run as ``user`` in a child forked from this process (its
    supplementary groups dropped, then its gid and uid set). ``action`` makes system calls
    only: no import, no lock another thread of the test may hold."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing but system calls, then _exit
        code = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            os.write(write_end, action())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read()  # its end: the child is done (the action's deadline bounds it)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the other uid's action failed"
    return report


def connect_as(user: OtherUser, path: Path, payload: bytes = b"",
               timeout: float = 10.0) -> Probe:
    """Connect to the Unix socket ``path`` as ``user``, send ``payload``, read until the
    server closes (at most ``timeout`` seconds)."""
    found = json.loads(run_as(user, lambda: json.dumps(
        _client(str(path), payload, timeout)).encode()))
    return Probe(found["refused"], bytes.fromhex(found.get("answer", "")),
                 found.get("closed", False))


def open_to_everyone(socket_path: Path) -> None:
    """The socket 0666 in a 0777 directory, and every directory above passable (o+x): only
    the server's peer check is left between another uid and the socket."""
    socket_path.chmod(0o666)
    socket_path.parent.chmod(0o777)
    passable_above(socket_path.parent)


def passable_above(directory: Path) -> None:
    """Every directory above ``directory`` passable (o+x), ``directory`` itself as it is: a
    refusal then comes from the modes of what teamctl made, not the test's tmp dirs."""
    for folder in directory.parents:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
