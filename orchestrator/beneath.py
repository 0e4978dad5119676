"""Files made beneath a directory without following a name someone else may have made there
(docs/security.md, "The daemon is never a confused deputy").

A member's runtime home is the member's to write: a sandboxed member can plant a symlink at any
name in it (``config.toml.tmp`` → ``~/.bashrc``), swap a directory for a link to another one,
or leave a FIFO where a file goes. A plain ``open(path, "w")`` or ``os.replace`` by path would
then write, as the operator, wherever the member pointed. Here every step is taken from a
directory descriptor: each directory on the way is opened with ``O_NOFOLLOW | O_DIRECTORY``
(a symlink or a non-directory there is refused: ``ELOOP`` / ``ENOTDIR``), a file is created
under a fresh random name with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (nobody's name is reused) and
renamed over the final name with both ends relative to that descriptor — a rename replaces a
planted symlink, it never writes through it. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["link_beneath", "open_dir", "read_beneath", "read_regular", "unlink_link_beneath",
           "write_beneath"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir(root: Path, relative: str | Path = "", *, create: bool = True) -> int:
    """A descriptor of ``root / relative``, each component below ``root`` opened without
    following a symlink (made 0700 where missing and ``create``). ``root`` itself must be a
    real directory (not a symlink). OSError (ELOOP, ENOTDIR, ENOENT) otherwise; the caller
    closes the descriptor."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in _parts(relative):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_beneath(root: Path, relative: str | Path, data: bytes, *, mode: int = 0o600) -> None:
    """``data`` as the file ``root / relative`` (``mode``), durably and atomically, never
    through a name another process made (see the module's doc)."""
    *dirs, name = _parts(relative)
    fd = open_dir(root, os.path.join(*dirs) if dirs else "")
    try:
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      mode, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                os.fsync(handle.fileno())
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
        os.fsync(fd)
    finally:
        os.close(fd)


def link_beneath(root: Path, relative: str | Path, target: str) -> None:
    """A symlink ``root / relative`` → ``target``, replacing only a symlink (or nothing)
    there. FileExistsError where a real file or directory holds the name (the operator
    decides what to do with it; it is never removed)."""
    *dirs, name = _parts(relative)
    fd = open_dir(root, os.path.join(*dirs) if dirs else "")
    try:
        try:
            found = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:
            found = None
        if found is not None and not stat.S_ISLNK(found.st_mode):
            raise FileExistsError(f"{root / relative} exists and is not a link")
        if found is not None and os.readlink(name, dir_fd=fd) == target:
            return
        tmp = f".{name}.{secrets.token_hex(8)}.link"
        os.symlink(target, tmp, dir_fd=fd)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)


def unlink_link_beneath(root: Path, relative: str | Path) -> None:
    """Remove the symlink ``root / relative`` if one is there (a real file is kept)."""
    *dirs, name = _parts(relative)
    try:
        fd = open_dir(root, os.path.join(*dirs) if dirs else "", create=False)
    except OSError:
        return
    try:
        if stat.S_ISLNK(os.lstat(name, dir_fd=fd).st_mode):
            os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


def read_beneath(root: Path, relative: str | Path, *, limit_bytes: int = 1 << 20) -> bytes:
    """The regular file ``root / relative``, no component of it a symlink, at most
    ``limit_bytes`` (a FIFO or a device there never blocks: refused). OSError otherwise
    (ELOOP, ENOTDIR, ENOENT; EINVAL: not a regular file; EFBIG: too large)."""
    *dirs, name = _parts(relative)
    fd = open_dir(root, os.path.join(*dirs) if dirs else "", create=False)
    try:
        file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                       | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    return _bounded(file, limit_bytes)


def read_regular(path: Path, *, limit_bytes: int = 1 << 20) -> bytes:
    """A regular file (a link to one is followed) of at most ``limit_bytes``; a FIFO or a
    device at ``path`` is refused without blocking. OSError otherwise."""
    return _bounded(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC),
                    limit_bytes)


def _bounded(fd: int, limit_bytes: int) -> bytes:
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = handle.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise OSError(errno.EFBIG, f"larger than {limit_bytes} bytes")
    return data


def _parts(relative: str | Path) -> list[str]:
    """``relative``'s components: never absolute, never ``..``."""
    text = os.fspath(relative)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if text.startswith("/") or ".." in parts:
        raise ValueError(f"not a path beneath its root: {text!r}")
    return parts
