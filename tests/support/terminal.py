"""``teamctl`` on a pseudo-terminal, as a person runs it: its stdin, stdout and stderr are one
terminal (120 columns), and the test reads what the screen gets — waiting for a text with a
deadline, never a sleep."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

__all__ = ["Terminal"]

COLUMNS = 120


class Terminal:
    """One ``teamctl ARGS`` process on its own pseudo-terminal."""

    def __init__(self, teamctl: Teamctl, *args: str) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, COLUMNS, 0, 0))
        self._master = master
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "orchestrator", *args], stdin=slave, stdout=slave,
                stderr=slave, env=teamctl.env, cwd=teamctl.workdir, start_new_session=True)
        finally:
            os.close(slave)
        self._screen = b""

    @property
    def screen(self) -> str:
        """Everything written to the terminal so far (``\\r\\n`` line ends, escapes kept)."""
        return self._screen.decode("utf-8", "replace")

    def until(self, text: str, timeout: float = 30.0) -> str:
        """The screen once ``text`` is on it; AssertionError at the deadline or the end."""
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            if not self._read(deadline - time.monotonic()):
                raise AssertionError(f"{text!r} never reached the terminal: {self.screen!r}")
        return self.screen

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        """The exit status and the whole screen, once the process has ended."""
        deadline = time.monotonic() + timeout
        while self._read(deadline - time.monotonic()):
            pass
        code = self.process.wait(timeout=max(deadline - time.monotonic(), 1.0))
        os.close(self._master)
        return code, self.screen

    def _read(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; False at the end (EIO: no writer left)."""
        if timeout <= 0:
            return False
        readable, _, _ = select.select([self._master], [], [], timeout)
        if not readable:
            return False
        try:
            chunk = os.read(self._master, 65536)
        except OSError:
            return False
        self._screen += chunk
        return bool(chunk)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait(timeout=10)
