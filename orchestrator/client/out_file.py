"""A file the operator names with ``--out``: written whole or not at all, 0600, and never over
what is already there unless asked.

An existing path is refused unless ``force`` (``OutputExists``: pass --force or choose another
path). A symlink, FIFO, directory, socket or device at the path is refused even with ``force``
(``OutputNotRegular``): it is never followed, written through or replaced. The bytes go to a
temp file beside the target, fsynced, then hard-linked into place (atomic, and the link fails
rather than replace a file that appeared meanwhile) or, with ``force`` over a regular file,
renamed over it (a rename replaces the name, it never follows it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from typing import TYPE_CHECKING

from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["OutputExists", "OutputNotRegular", "check_out", "write_out"]

_KINDS = ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


class OutputExists(UsageError):
    code = "export_target_exists"

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} already exists; pass --force or choose another path",
                         path=str(path))


class OutputNotRegular(UsageError):
    code = "export_target_not_regular"

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file; teamctl never writes through "
                         f"or replaces one (not even with --force); choose another path",
                         path=str(path), kind=kind)


def check_out(path: Path, *, force: bool) -> bool:
    """Raise if ``path`` may not be written; True if a regular file is there (``force``)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        raise OutputNotRegular(path, next((k for test, k in _KINDS if test(mode)),
                                          "not a regular file"))
    if not force:
        raise OutputExists(path)
    return True


def write_out(path: Path, data: bytes, *, force: bool) -> None:
    """Write ``data`` to ``path`` (0600, atomically) under the rules above."""
    replace = check_out(path, force=force)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path, data)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _link_new(tmp: str, path: Path, data: bytes) -> None:
    """Give ``tmp`` the name ``path`` only if nothing has it (a file system without hard
    links: an exclusive, no-follow create written in place)."""
    try:
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError:
        raise OutputExists(path) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            raise OutputExists(path) from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
