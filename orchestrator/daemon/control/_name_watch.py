"""Wait until a name in a directory is created, removed or renamed over — told by the kernel
(inotify), so an idle daemon is not woken to look: a stat every two seconds was a quarter of
its idle CPU with a hundred members (docs/dev/performance.md). Where inotify cannot be had (no
libc symbol, the per-user watch limit reached), the wait is a poll of ``interval`` and the
caller looks itself, as before.

Only names are watched (``IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO``), not writes:
the journal beside the socket is written on every message and must not wake this.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
from typing import TYPE_CHECKING

import anyio
import structlog

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["NameWatch"]

log = structlog.get_logger("teamctl.daemon")

_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_Q_OVERFLOW, _IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
_NAMES = _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF
_ANY_NAME = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_Q_OVERFLOW | _IN_IGNORED  # the directory
# itself went, or events were lost: every name may have changed
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name


class NameWatch:
    """``with NameWatch(path, interval) as watch: await watch.touched()``."""

    def __init__(self, path: Path, interval: float) -> None:
        self._name = os.fsencode(path.name)
        self._directory = path.parent
        self._interval = interval
        self._fd: int | None = None

    @property
    def polling(self) -> bool:
        """No inotify here: ``touched`` returns every ``interval``."""
        return self._fd is None

    def __enter__(self) -> NameWatch:
        self._fd = _inotify(self._directory)
        return self

    def __exit__(self, *_: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def touched(self) -> None:
        """Return once the name may have changed (the caller looks): it was created, removed
        or renamed to or from, or the directory itself went; polling, after ``interval``."""
        if self._fd is None:
            await anyio.sleep(self._interval)
            return
        while True:
            await anyio.wait_readable(self._fd)
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                continue
            if self._names(data):
                return

    def _names(self, data: bytes) -> bool:
        """Whether ``data`` (whole events: the kernel never splits one) touch the name."""
        offset = 0
        while offset + _EVENT.size <= len(data):
            _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            if mask & _ANY_NAME or name == self._name:
                return True
        return False


def _inotify(directory: Path) -> int | None:
    """A non-blocking inotify descriptor watching the names in ``directory``; None (logged)
    where there is none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError) as exc:
        log.info("name_watch_polling", directory=str(directory), reason=str(exc))
        return None
    init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
    add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    add.restype = ctypes.c_int
    fd = int(init(os.O_NONBLOCK | os.O_CLOEXEC))
    if fd < 0:
        log.info("name_watch_polling", directory=str(directory),
                 reason=os.strerror(ctypes.get_errno()))
        return None
    if add(fd, os.fsencode(directory), _NAMES) < 0:
        reason = os.strerror(ctypes.get_errno())
        with contextlib.suppress(OSError):
            os.close(fd)
        log.info("name_watch_polling", directory=str(directory), reason=reason)
        return None
    return fd
