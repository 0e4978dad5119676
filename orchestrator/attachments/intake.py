"""Intake: read an attachment the operator named, safely.

Only regular files: a FIFO, a device or a directory is refused at once and never blocks (the
file is opened with O_NONBLOCK and checked with fstat before any read). The read is bounded:
at most the limit plus one byte, so an oversized original is refused without reading it all.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.attachments.failures import AttachmentError
from orchestrator.limits import ORIGINAL_LIMIT_BYTES

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ORIGINAL_LIMIT_BYTES", "Original", "file_kind", "read_original"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Original:
    name: str
    path: str
    data: bytes


def read_original(path: Path, *, limit_bytes: int = ORIGINAL_LIMIT_BYTES,
                  name: str | None = None) -> Original:
    """The file's bytes, or an AttachmentError saying what is wrong with it. ``name``: the
    attachment's name when ``path`` is not it (a ``/proc/self/fd/N`` a member's read holds)."""
    name = path.name if name is None else name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise AttachmentError("attachment_not_found", f"{name}: no such file ({path})") from None
    except IsADirectoryError:
        raise _not_regular(name, "a directory") from None
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENODEV):
            raise _not_regular(name, "a socket or device") from None
        raise AttachmentError("attachment_not_found",
                              f"{name}: cannot open it ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(name, file_kind(mode))
        special = _special_tree(path)
        if special:  # "regular" to fstat, but a view of a process or the kernel
            raise _not_regular(name, f"a special file (under {special})")
        return Original(name, str(path), _bounded_read(fd, name, limit_bytes))
    finally:
        os.close(fd)


def _bounded_read(fd: int, name: str, limit_bytes: int) -> bytes:
    chunks, total = [], 0
    while total <= limit_bytes:
        chunk = os.read(fd, min(_CHUNK, limit_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit_bytes:
        raise AttachmentError(
            "attachment_too_large_original",
            f"{name}: larger than {limit_bytes // (1024 * 1024)} MiB; "
            "crop it or export a smaller screenshot",
        )
    return b"".join(chunks)


_SPECIAL_TREES = ("/proc", "/sys", "/dev")


def _special_tree(path: Path) -> str | None:
    """``/proc``, ``/sys`` or ``/dev`` if the path resolves there: such files claim to be
    regular but are views of processes and devices (``/proc/self/mem`` is the daemon's)."""
    try:
        resolved = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    return next((t for t in _SPECIAL_TREES if resolved == t or resolved.startswith(t + "/")),
                None)


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a FIFO (named pipe)")."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _not_regular(name: str, kind: str) -> AttachmentError:
    return AttachmentError("attachment_not_a_regular_file",
                           f"{name}: is {kind}; attach a regular image file")
