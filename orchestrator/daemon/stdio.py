"""The daemon's own stdout and stderr (``logs/daemon.out``), bounded.

``teamctl`` starts the daemon with both pointing at ``logs/daemon.out``: its last words when it
cannot start, and whatever Python or a library prints (tracebacks, asyncio's and uvicorn's
warnings). Unbounded, one repeating error filled it with 214 MB in 90 s (issue 25). So:

- while fds 1 and 2 are that file, ``sys.stdout``/``sys.stderr`` write through ``BoundedOut``:
  past ``max_bytes`` the file is rotated once (``daemon.out.1``; fds 1 and 2 follow the new
  file, so what C code writes lands there too) — at most twice ``max_bytes`` on disk;
- the standard library's log records (asyncio, uvicorn) go through ``RepeatFilter``: a message
  seen again within ``window`` seconds is counted, not written, and the next one after the
  window says how many were left out. The first one keeps its traceback.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import time
from typing import TYPE_CHECKING

from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

__all__ = ["BoundedOut", "RepeatFilter", "bounded_stdio", "max_out_bytes"]

DEFAULT_MAX_BYTES = 8 << 20
_MAX_KEYS = 256


def max_out_bytes(environ: dict[str, str] | os._Environ[str] | None = None) -> int:
    """``TEAMCTL_DAEMON_OUT_MAX_BYTES`` (default 8 MiB)."""
    raw = (os.environ if environ is None else environ).get("TEAMCTL_DAEMON_OUT_MAX_BYTES")
    if raw is None:
        return DEFAULT_MAX_BYTES
    if not raw.isdigit() or int(raw) < 4096:
        raise UsageError(f"TEAMCTL_DAEMON_OUT_MAX_BYTES={raw!r} is not a size of at least "
                         "4096 bytes; fix or unset it and start the daemon again")
    return int(raw)


class BoundedOut(io.TextIOBase):
    """A text stream onto fd 2 that rotates ``path`` once it passes ``max_bytes``."""

    def __init__(self, path: Path, max_bytes: int, lock: threading.Lock) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = lock

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "replace")
        with self._lock:
            if len(data) > self.max_bytes // 2:
                data = data[: self.max_bytes // 2] + b"\n[... cut: too long for daemon.out]\n"
            with contextlib.suppress(OSError):
                if os.fstat(2).st_size + len(data) > self.max_bytes:
                    self._rotate()
                os.write(2, data)
        return len(text)

    def _rotate(self) -> None:
        try:
            os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError:  # no descriptor to spare: start the same file over instead
            os.ftruncate(2, 0)
            return
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)


class RepeatFilter(logging.Filter):
    """Lets a message through once per ``window`` seconds, with the count of those held back."""

    def __init__(self, window: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window = window
        self._clock = clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}  # -> (shown at, held back)

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg)[:200])
        now = self._clock()
        shown_at, held = self._seen.get(key, (-self.window, 0))
        if now - shown_at < self.window:
            self._seen[key] = (shown_at, held + 1)
            return False
        if len(self._seen) >= _MAX_KEYS:
            self._seen.clear()
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} (repeated {held} more times in {self.window:g} s)"
            record.exc_info = record.exc_text = None
        return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        mine, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


@contextlib.contextmanager
def bounded_stdio(path: Path, max_bytes: int) -> Iterator[BoundedOut | None]:
    """Bound ``path`` while fds 1 and 2 write to it (a foreground daemon's terminal is left
    alone), and pass the standard library's log records through a ``RepeatFilter``."""
    handler = logging.StreamHandler()  # sys.stderr at each write: the bounded one, if any
    handler.addFilter(RepeatFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    saved = sys.stdout, sys.stderr
    out = None
    if _same_file(1, path) and _same_file(2, path):
        out = BoundedOut(path, max_bytes, threading.Lock())
        sys.stdout = sys.stderr = out
    handler.setStream(sys.stderr)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        sys.stdout, sys.stderr = saved
