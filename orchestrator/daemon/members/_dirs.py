"""A member's private directory and the runtime home in it (docs/security.md, "The daemon is
never a confused deputy").

``members/<team>/<member>/`` is the daemon's: its files for the runtime (the role prompt, the
settings, the MCP config that carries the member's token, Codex's config), the pid record, the
member's socket (``mcp/``) and the images a sandboxed runtime reads (``attachments/``). A
sandboxed member sees it read-only. ``runtime/`` inside it is the runtime's own home (its
config dir, sessions, caches): the one place of teamctl's a sandboxed member may write, and
where the daemon writes nothing (``Host.place``).

Before this split the whole directory was the member's to write, so one made by an earlier
teamctl may hold what a member planted there: a symlink where the daemon's socket dir, its
attachments or its pid file go (the daemon followed them), a directory where a file goes. At
every start the directory is put right before anything is made in it: every symlink directly
in it is removed (no name of the daemon's is ever a link), a non-directory where one of the
daemon's directories goes is removed, and the runtime's own dirs of the old layout move into
``runtime/`` (so a member's session is resumed, not lost).
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

import structlog

from orchestrator.contracts import RUNTIME_HOME, runtime_home
from orchestrator.paths import ensure_private_dir

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["private_dirs"]

log = structlog.get_logger("teamctl.member_dirs")

# what the runtimes kept directly in the private dir before ``runtime/`` (Claude: config, tmp,
# xdg; Codex: codex-home; OpenCode: home, xdg; an ACP agent: home)
_OLD_RUNTIME_DIRS = ("config", "tmp", "xdg", "codex-home", "home")
_DAEMON_DIRS = (RUNTIME_HOME, "mcp", "attachments")


def private_dirs(member_dir: Path) -> Path:
    """``member_dir`` (0700) put right, with its runtime home in it (0700); ``member_dir``.
    OSError where it cannot be made."""
    if os.path.islink(member_dir):
        os.unlink(member_dir)  # its parent was never a member's: a leftover, not followed
    ensure_private_dir(member_dir)
    _clear_links(member_dir)
    home = runtime_home(member_dir)
    for name in _DAEMON_DIRS:
        _clear_non_dir(member_dir / name)
    home.mkdir(mode=0o700, exist_ok=True)
    os.chmod(home, 0o700, follow_symlinks=False)
    for name in _OLD_RUNTIME_DIRS:
        _move_old(member_dir, name)
    return member_dir


def _clear_links(member_dir: Path) -> None:
    """Every symlink directly in the private dir: none is the daemon's."""
    with os.scandir(member_dir) as entries:
        for entry in entries:
            if entry.is_symlink():
                log.warning("member_dir_link_removed", path=entry.path)
                os.unlink(entry.path)


def _clear_non_dir(path: Path) -> None:
    """A file, FIFO or socket where one of the daemon's directories goes."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(found.st_mode):
        log.warning("member_dir_entry_removed", path=str(path))
        os.unlink(path)


def _move_old(member_dir: Path, name: str) -> None:
    """An old layout's runtime dir moved into the runtime home (never over one there)."""
    old, new = member_dir / name, runtime_home(member_dir) / name
    try:
        found = os.lstat(old)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(found.st_mode):
        os.unlink(old)  # not a runtime's dir: a leftover
        return
    if os.path.lexists(new):
        return  # the runtime home has its own: this one is unused (left as it is)
    os.rename(old, new)
    log.info("member_dir_migrated", path=str(old), to=str(new))
