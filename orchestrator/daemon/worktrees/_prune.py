"""``worktrees --prune``: a worktree is removed only when that loses nothing — its member is
not running, it is not locked, it holds no changed, untracked or ignored work and no
submodule, and its commits are in its base or pushed — and every other one is kept, with why.

Nothing here trusts a file the member could write: the lock's reason is read from the admin
dir teamctl recorded, without following a symlink and bounded (``_files.head_beneath``); the
removal is teamctl's own (the worktree, then its recorded admin dir, each removed without
following a link), not ``git worktree remove``, which runs ``git status`` with the
``GIT_DIR`` the worktree's ``.git`` file names and deletes whatever path its ``gitdir`` file
names."""

from __future__ import annotations

import errno
import shutil
from typing import TYPE_CHECKING

from orchestrator.daemon.worktrees._changes import Changes, changes
from orchestrator.daemon.worktrees._files import head_beneath
from orchestrator.visible import clipped, visible_line

if TYPE_CHECKING:
    from orchestrator.daemon.worktrees._record import Worktree
    from orchestrator.git_run import Git

__all__ = ["lock_reason", "prune_one"]

_REASON_CHARS = 200
_LOCK_BYTES = 64 * 1024  # of a lock's reason read (what is past 200 characters is counted)
_GITLINK = "160000"


def prune_one(tree: Worktree, git: Git, repository: Git) -> str | None:
    """Remove ``tree`` — its member is not running — if that loses nothing (None); else why
    it is kept. ``git`` works in the worktree, ``repository`` in its repository (where
    ``base`` is resolved)."""
    if not tree.path.exists():
        _remove(tree)  # its admin dir, left by a worktree gone from the disk
        return None
    locked = lock_reason(tree)
    if locked is not None:
        return f"locked ({locked})" if locked else "locked"
    held = changes(git, tree)
    if held.changed or held.untracked or held.ignored or held.repositories:
        return _held_reason(held)
    if _has_submodules(git, tree):
        return "it holds submodules (remove it with 'git worktree remove' yourself)"
    head = git.run("rev-parse", "--verify", "HEAD^{commit}").stdout.strip()
    merged = repository.run("merge-base", "--is-ancestor", head, tree.base,
                            check=False).returncode == 0  # base never starts with "-"
    pushed = bool(git.run("branch", "-r", "--contains", head).stdout.strip())
    if not merged and not pushed:
        ahead = git.run("rev-list", "--count", f"{tree.base_commit}..{head}", "--")
        return f"{ahead.stdout.strip()} commits are neither in {tree.base} nor pushed"
    return _remove(tree)


def lock_reason(tree: Worktree) -> str | None:
    """None if the worktree is not locked (``git worktree lock``), else the lock's reason as
    the operator may see it: a regular file's first 200 characters (the rest counted), every
    character that would act on a terminal shown as its mark (orchestrator/visible.py) —
    never what a link in its place points at."""
    admin = tree.place().git_dir
    try:
        data = head_beneath(admin, "locked", limit_bytes=_LOCK_BYTES)
    except OSError as exc:
        if exc.errno == errno.ENOENT:  # its admin dir is gone: not locked
            return None
        return "its reason is not a regular file: not read"
    if data is None:
        return None
    return clipped(data.decode(errors="replace").strip(), _REASON_CHARS)


def _has_submodules(git: Git, tree: Worktree) -> bool:
    """What ``git worktree remove`` refuses too: the admin dir's ``modules``, or a gitlink in
    the index whose directory holds a checkout."""
    if (tree.place().git_dir / "modules").is_dir():
        return True
    listed = git.run("ls-files", "-z", "--stage").stdout.split("\0")
    return any(entry.startswith(_GITLINK) and (tree.path / entry.split("\t", 1)[-1]
                                               / ".git").exists() for entry in listed)


def _remove(tree: Worktree) -> str | None:
    """The worktree's directory, then its recorded admin dir, removed (``shutil.rmtree``
    never follows a link out on Linux); None, or why it could not be."""
    for path in (tree.path, tree.place().git_dir):
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"it could not be removed ({exc.strerror}: {visible_line(str(path))})"
    return None


def _held_reason(held: Changes) -> str:
    """E.g. ``1 changed file (app.py); 3 ignored files (.env, build/, notes.md)``."""
    parts = []
    for kind, names in (("changed file", held.changed), ("untracked file", held.untracked),
                        ("ignored file", held.ignored),
                        ("untracked repositor", held.repositories)):
        if names:
            shown = ", ".join(visible_line(n) for n in names[:5]) + (
                f", and {len(names) - 5} more" if len(names) > 5 else "")
            ending = ("y" if len(names) == 1 else "ies") if kind.endswith("repositor") else (
                "" if len(names) == 1 else "s")
            parts.append(f"{len(names)} {kind}{ending} ({shown})")
    return "; ".join(parts)
