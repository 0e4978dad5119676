"""A real X server (Debian's Xvfb) and a real clipboard owner (Debian's xclip), for the
``send --paste`` tests and benchmark: every wait is on a line the program prints, with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["clipboard_owner", "wait_line", "x_server"]

DEADLINE = 15.0


def _need(name: str) -> str:
    found = shutil.which(name)
    assert found, (f"{name} is needed: apt-get install xvfb xclip (.ci/run does)")
    return found


def wait_line(fd: int, wanted: bytes, what: str) -> bytes:
    """Read ``fd`` until a line holding ``wanted`` (a deadline, never a sleep)."""
    deadline, seen = time.monotonic() + DEADLINE, b""
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{what} did not print {wanted!r} within {DEADLINE}s: {seen[-500:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"{what} ended before printing {wanted!r}: {seen[-500:]!r}"
            seen += chunk
    return seen


@contextlib.contextmanager
def x_server() -> Iterator[str]:
    """A fresh Xvfb; yields its DISPLAY (``:N``, the number Xvfb chose and printed)."""
    read, write = os.pipe()
    process = subprocess.Popen(
        [_need("Xvfb"), "-displayfd", str(write), "-nolisten", "tcp", "-screen", "0",
         "1280x800x24"], pass_fds=(write,), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    os.close(write)
    try:
        number = wait_line(read, b"\n", "Xvfb").strip().decode()
        yield f":{number}"
    finally:
        os.close(read)
        process.kill()
        process.wait()


@contextlib.contextmanager
def clipboard_owner(display: str, data: bytes, mime: str | None) -> Iterator[None]:
    """xclip owning the CLIPBOARD selection with ``data`` as ``mime`` (None: as text) until
    the block ends — like the application a screenshot was copied from."""
    argv = [_need("xclip"), "-verbose", "-selection", "clipboard", "-i"]
    if mime is not None:
        argv += ["-t", mime]
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env={**os.environ, "DISPLAY": display})
    assert process.stdin is not None and process.stderr is not None
    try:
        process.stdin.write(data)
        process.stdin.close()
        wait_line(process.stderr.fileno(), b"Waiting for selection requests", "xclip")
        yield
    finally:
        process.kill()
        process.wait()
        process.stderr.close()
