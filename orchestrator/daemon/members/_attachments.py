"""A member's attachments, read in its own view (``member_view``) — never with the daemon's
rights, and never by their names twice.

For each path the member gave (absolute, as its ``teamctl mcp`` makes it):

1. the path as written must lie in the view (``/proc/...``, its private ``/tmp``, teamctl's
   state dir are refused before anything is opened);
2. it is opened with ``O_PATH`` — no read, no side effect even on a FIFO or a device, symlinks
   followed — and from then on only that open object is looked at;
3. where that object really is (``/proc/self/fd/N``) must lie in the view too: a symlink or a
   ``..`` that leads out is refused; and it must be a regular file with one name (a hard link's
   other names cannot be checked), readable by the member's uid by its mode, in directories
   the member may search (the daemon may run as root: DAC would not stop it, the sandbox's
   dropped capabilities stop the member);
4. only when every path passed is each object reopened through ``/proc/self/fd/N`` (the same
   inode, whatever happened to the name since) and read bounded by ``intake.read_original``.

The bytes go to the planner as ``Original``s, so nothing later opens the member's names.
Anything outside the view is ``AttachmentOutsideMemberView`` (its rule named), raised before
any byte is read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from orchestrator.attachments.failures import AttachmentError, AttachmentFailure, AttachmentRefused
from orchestrator.attachments.intake import Original, file_kind, read_original
from orchestrator.errors import AttachmentOutsideMemberView

if TYPE_CHECKING:
    from collections.abc import Sequence

    from orchestrator.daemon.members._view import MemberView

__all__ = ["Credentials", "OpenedInView", "open_in_view", "read_in_view"]

_PATH_CHARS = 4096
_SHOWN_CHARS = 300  # a refused path as the error shows it


@dataclass(frozen=True)
class Credentials:
    """Whose rights a read is checked against: the member's uid and groups (a member runs as
    the operator's user, in its sandbox without capabilities)."""

    uid: int = field(default_factory=os.geteuid)
    gids: frozenset[int] = field(
        default_factory=lambda: frozenset({os.getegid(), *os.getgroups()}))


class OpenedInView:
    """A member's attachments, each opened (``O_PATH``) and proven in its view, not yet read:
    ``read`` reads the objects held, whatever became of their names since. Close it (a
    context manager) to let the descriptors go."""

    def __init__(self, opened: list[tuple[str, int]], failures: list[AttachmentFailure]) -> None:
        self._opened = opened
        self._failures = failures

    def read(self) -> list[Original]:
        """Each object's bytes, in order, bounded; AttachmentRefused with every path that is
        in the view but missing or too large."""
        failures = list(self._failures)
        originals = []
        for path, fd in self._opened:
            try:
                originals.append(_read(path, fd))
            except AttachmentError as exc:
                failures.append(_failure(exc, path))
        if failures:
            raise AttachmentRefused(failures)
        return originals

    def close(self) -> None:
        while self._opened:
            os.close(self._opened.pop()[1])

    def __enter__(self) -> OpenedInView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_in_view(view: MemberView, paths: Sequence[str],
                 credentials: Credentials | None = None) -> OpenedInView:
    """Each of ``paths`` opened in ``view`` (nothing read yet). AttachmentOutsideMemberView
    at the first one outside it, every descriptor closed. Blocking: a worker thread's."""
    who = credentials or Credentials()
    opened: list[tuple[str, int]] = []
    failures: list[AttachmentFailure] = []
    try:
        for path in paths:
            try:
                opened.append((path, _open_in_view(view, path, who)))
            except AttachmentError as exc:
                failures.append(_failure(exc, path))
    except BaseException:
        OpenedInView(opened, []).close()
        raise
    return OpenedInView(opened, failures)


def read_in_view(view: MemberView, paths: Sequence[str],
                 credentials: Credentials | None = None) -> list[Original]:
    """Each of ``paths`` read in ``view``, in order: all opened and proven first, then read
    (``open_in_view``, ``OpenedInView.read``), so a path outside refuses the message before
    any byte is read. Blocking: run it in a worker thread."""
    with open_in_view(view, paths, credentials) as opened:
        return opened.read()


def _open_in_view(view: MemberView, path: str, who: Credentials) -> int:
    """An ``O_PATH`` descriptor of the object ``path`` names, once it is proven in the view."""
    if view.closed is not None:
        raise _refused(view, path, *view.closed)
    if len(path) > _PATH_CHARS or "\0" in path or not path.startswith("/"):
        raise _refused(view, path, "not_absolute", "it is not an absolute path of at most "
                                                   f"{_PATH_CHARS} characters")
    if not view.shows(_normal(path)):
        raise _refused(view, path, "outside", "it is outside what you can read")
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        if not view.shows(_normal(os.path.realpath(path))):  # no answer about what is outside
            raise _refused(view, path, "outside", "it leads outside what you can read") \
                from None
        raise AttachmentError("attachment_not_found",
                              f"{_name(path)}: cannot open it ({exc.strerror})") from None
    try:
        _check(view, path, fd, who)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check(view: MemberView, path: str, fd: int, who: Credentials) -> None:
    """The opened object: where it really is, what it is, whether the member may read it."""
    real = os.readlink(f"/proc/self/fd/{fd}")
    if not real.startswith("/") or real.endswith(" (deleted)") or not view.shows(real):
        raise _refused(view, path, "outside", "it leads outside what you can read (a symlink "
                                              "or a .. pointing out)")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _refused(view, path, "not_regular", f"it is {file_kind(info.st_mode)}, and only a "
                                                  "regular file is read for you")
    if info.st_nlink != 1:
        raise _refused(view, path, "hard_link", f"it has {info.st_nlink} names (a hard link), "
                       "and teamctl cannot check that each lies in what you can read; copy it "
                       "instead")
    if not _may(info, who, stat.S_IRUSR) or not _searchable(real, who):
        raise _refused(view, path, "unreadable", "its mode (or a directory's above it) does "
                                                 "not let you read it")


def _read(path: str, fd: int) -> Original:
    """The object behind ``fd`` reopened for reading (the same inode), bounded."""
    read = read_original(Path(f"/proc/self/fd/{fd}"), name=_name(path))
    return Original(read.name, path, read.data)


def _may(info: os.stat_result, who: Credentials, user_bit: int) -> bool:
    """Whether ``who`` has ``user_bit``'s permission (read or search) by the mode alone: the
    owner's bits for the owner, the group's for a member of the group, else the others'."""
    if info.st_uid == who.uid:
        return bool(info.st_mode & user_bit)
    if info.st_gid in who.gids:
        return bool(info.st_mode & (user_bit >> 3))
    return bool(info.st_mode & (user_bit >> 6))


def _searchable(real: str, who: Credentials) -> bool:
    """Whether every directory above ``real`` lets ``who`` through."""
    for directory in PurePosixPath(real).parents:
        try:
            info = os.stat(directory)
        except OSError:
            return False
        if not _may(info, who, stat.S_IXUSR):
            return False
    return True


def _normal(path: str) -> str:
    """``path`` normalized as written (``..`` and ``//`` folded; no symlink followed)."""
    return "/" + os.path.normpath(path).lstrip("/")


def _name(path: str) -> str:
    return PurePosixPath(path).name


def _refused(view: MemberView, path: str, rule: str, why: str) -> AttachmentOutsideMemberView:
    shown = path if len(path) <= _SHOWN_CHARS else path[:_SHOWN_CHARS] + "…"
    return AttachmentOutsideMemberView(view.member, shown, rule, why,
                                       "" if view.closed is not None else view.fix())


def _failure(exc: AttachmentError, path: str) -> AttachmentFailure:
    return AttachmentFailure(exc.failure.code, exc.failure.message, exc.failure.diagnostic,
                             _name(path))

