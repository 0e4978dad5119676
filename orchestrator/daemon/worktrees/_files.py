"""Reading a file in a directory a member can write, without being its deputy: the daemon
starts from a directory it recorded (a worktree, its admin dir, the operator's checkout) and
walks down one directory descriptor at a time, never following a symlink
(``orchestrator.beneath.open_dir``: a link on the way is ``ENOTDIR``, the file itself a link
``ELOOP``), and reads only a regular file with a single link (a hard link to someone else's
file is ``EMLINK``), never more than its bound (``EFBIG``). A FIFO is opened without blocking
and refused like any other non-file. What ``beneath`` does not: a file's first bytes, a copy
streamed within a bound, two trees' files compared. Foreign errors stay ``OSError``s with
their errno; callers say what a refusal means for them."""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING

from orchestrator.beneath import open_dir

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["copy_beneath", "head_beneath", "open_beneath", "same_beneath"]

_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 16


def open_beneath(root: Path, parts: Sequence[str]) -> int:
    """A read-only descriptor of the regular file ``root/parts...`` (see the module's doc);
    the caller closes it. FileNotFoundError where it is not there."""
    if not parts or any(p in ("", ".", "..") or "/" in p for p in parts):
        raise OSError(errno.EINVAL, "not a plain relative path", "/".join(parts))
    directory = open_dir(root, "/".join(parts[:-1]), create=False)
    try:
        fd = os.open(parts[-1], _FILE, dir_fd=directory)
    finally:
        os.close(directory)
    try:
        _check_regular(fd, parts[-1])
    except OSError:
        os.close(fd)
        raise
    return fd


def head_beneath(root: Path, name: str, *, limit_bytes: int) -> bytes | None:
    """The first ``limit_bytes`` of ``root/name`` (a regular file, one link), None if it is
    not there."""
    try:
        fd = open_beneath(root, [name])
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit_bytes)


def copy_beneath(root: Path, parts: Sequence[str], target: Path, *,
                 limit_bytes: int) -> bool:
    """``root/parts...`` copied to ``target`` (a new file, 0600); False if there is no such
    file; EFBIG past ``limit_bytes`` (nothing left at ``target``)."""
    try:
        fd = open_beneath(root, parts)
    except FileNotFoundError:
        return False
    with os.fdopen(fd, "rb") as source, open(target, "xb", opener=_private) as copy:
        copied = 0
        while chunk := source.read(_CHUNK):
            copied += len(chunk)
            if copied > limit_bytes:
                copy.close()
                target.unlink()
                raise OSError(errno.EFBIG, f"over {limit_bytes} bytes", "/".join(parts))
            copy.write(chunk)
    return True


def same_beneath(first: Path, second: Path, parts: Sequence[str]) -> bool:
    """Whether ``parts`` names a regular file under both roots with the same bytes; False for
    anything refused or missing on either side."""
    try:
        with os.fdopen(open_beneath(first, parts), "rb") as one, \
                os.fdopen(open_beneath(second, parts), "rb") as other:
            if os.fstat(one.fileno()).st_size != os.fstat(other.fileno()).st_size:
                return False
            while True:
                chunk = one.read(_CHUNK)
                if chunk != other.read(_CHUNK):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False


def _check_regular(fd: int, name: str) -> None:
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", name)
    if found.st_nlink != 1:
        raise OSError(errno.EMLINK, "a file with other links", name)


def _private(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
