"""``.worktreeinclude``: the ignored files (an ``.env``) the operator wants in every new
worktree, one glob per line relative to the repository's top — copied from the operator's
checkout when teamctl makes a worktree, and only files *of that checkout*.

A member that can write the checkout (one without a worktree of its own) could plant a link
there (``lnk -> ~/.ssh``) and name ``lnk/*`` in the file; teamctl, copying as the operator,
would have carried the operator's keys into the next worktree. So each source is opened by
walking down from the checkout one directory descriptor at a time, never following a
symlink (``_files.open_beneath``), a regular file with one link only, at most
``MAX_FILE_BYTES``, ``MAX_FILES`` files in all; the copy is written the same way into the
new worktree (a tracked symlink there is not followed either) as a new file — an existing
one is left as it is. Never anything under ``node_modules`` or ``.git``. A refusal is named
(the caller logs it) and the worktree is made all the same.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from orchestrator.beneath import open_dir
from orchestrator.daemon.worktrees._files import head_beneath, open_beneath

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "Refusal", "copy_included"]

MAX_FILES = 1000
MAX_FILE_BYTES = 16 * 1024 * 1024
_MAX_CANDIDATES = 20 * MAX_FILES  # glob matches looked at, copied or not
_LIST_BYTES = 64 * 1024  # of .worktreeinclude itself
_NEVER_COPIED = ("node_modules", ".git")
_LINK = "a symlink (never followed)"
_REASONS = {errno.ELOOP: _LINK, errno.ENOTDIR: "not a directory",
            errno.EINVAL: "not a regular file", errno.EMLINK: "a file with other links",
            errno.EFBIG: f"larger than {MAX_FILE_BYTES} bytes"}


@dataclass(frozen=True)
class Refusal:
    """What was not copied, and why (as the log and the operator read it)."""

    path: str
    reason: str


def copy_included(repo: Path, worktree: Path) -> list[Refusal]:
    """The files ``repo/.worktreeinclude`` names, copied from ``repo`` into ``worktree``;
    what was refused (each symlink on the way once)."""
    try:
        listed = head_beneath(repo, ".worktreeinclude", limit_bytes=_LIST_BYTES)
    except OSError as exc:
        return [Refusal(".worktreeinclude", _reason(exc))]
    refusals: dict[Refusal, None] = {}
    copied = 0
    for parts in _candidates(repo, (listed or b"").decode(errors="replace"), refusals):
        if copied == MAX_FILES:
            refusals.setdefault(Refusal(".worktreeinclude", f"more than {MAX_FILES} files"))
            break
        refusal = _copy(repo, worktree, parts)
        if refusal is None:
            copied += 1
        elif refusal.reason:
            refusals.setdefault(refusal)
    return list(refusals)


def _candidates(repo: Path, listed: str, refusals: dict[Refusal, None]
                ) -> Iterator[tuple[str, ...]]:
    """Each match of each pattern as path parts inside ``repo`` (never outside it, never
    under node_modules or .git), at most ``_MAX_CANDIDATES``."""
    seen = 0
    for line in listed.splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        if PurePosixPath(pattern).is_absolute() or ".." in PurePosixPath(pattern).parts:
            refusals.setdefault(Refusal(pattern, "outside the repository"))
            continue
        for match in sorted(repo.glob(pattern)):
            seen += 1
            if seen > _MAX_CANDIDATES:
                refusals.setdefault(Refusal(pattern, f"more than {_MAX_CANDIDATES} matches"))
                return
            parts = match.relative_to(repo).parts
            if parts and not any(p in _NEVER_COPIED for p in parts):
                yield parts


def _copy(repo: Path, worktree: Path, parts: Sequence[str]) -> Refusal | None:
    """One file copied (None); a refusal; or a blank reason for what is silently not a file
    to copy (a directory a glob matched, a file the worktree has already)."""
    try:
        fd = open_beneath(repo, parts)
    except OSError as exc:
        if exc.errno == errno.EINVAL and _is_directory(repo, parts):
            return Refusal("/".join(parts), "")
        link = _link_on_the_way(repo, parts)
        return Refusal(link, _LINK) if link else Refusal("/".join(parts), _reason(exc))
    with os.fdopen(fd, "rb") as source:
        found = os.fstat(source.fileno())
        if found.st_size > MAX_FILE_BYTES:
            return Refusal("/".join(parts), _REASONS[errno.EFBIG])
        try:
            _write_new(worktree, parts, source.read(MAX_FILE_BYTES), found)
        except FileExistsError:
            return Refusal("/".join(parts), "")
        except OSError as exc:
            why = _LINK if _link_on_the_way(worktree, parts) else _reason(exc)
            return Refusal("/".join(parts), f"not written in the worktree: {why}")
    return None


def _write_new(worktree: Path, parts: Sequence[str], data: bytes, source: os.stat_result
               ) -> None:
    """``data`` as a new file at ``worktree/parts...``: directories made as needed, none of
    them (nor the file) through a symlink; the source's mode and times kept."""
    directory = open_dir(worktree, "/".join(parts[:-1]))  # made 0700 where missing
    try:
        fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, stat.S_IMODE(source.st_mode) & 0o777, dir_fd=directory)
    finally:
        os.close(directory)
    with os.fdopen(fd, "wb") as target:
        target.write(data)
        target.flush()
        os.utime(target.fileno(), ns=(source.st_atime_ns, source.st_mtime_ns))


def _link_on_the_way(root: Path, parts: Sequence[str]) -> str | None:
    """The first component of ``parts`` under ``root`` that is a symlink (what to name, once,
    for ``lnk/*``), if any."""
    for end in range(1, len(parts) + 1):
        if root.joinpath(*parts[:end]).is_symlink():
            return "/".join(parts[:end])
    return None


def _is_directory(repo: Path, parts: Sequence[str]) -> bool:
    found = repo.joinpath(*parts)
    return found.is_dir() and not found.is_symlink()


def _reason(exc: OSError) -> str:
    return _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
