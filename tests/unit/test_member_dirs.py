"""A member's private dir put right at each start (orchestrator/daemon/members/_dirs.py): what a
member could plant there before the dir became read-only to it is removed, never followed,
and the runtime's own dirs of the old layout move into ``runtime/``."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from structlog.testing import capture_logs

from orchestrator.daemon.members._dirs import private_dirs

if TYPE_CHECKING:
    from pathlib import Path


def test_links_and_files_where_the_daemons_dirs_go_are_removed_never_followed(
        tmp_path: Path) -> None:
    member, outside = tmp_path / "members" / "t" / "a", tmp_path / "outside"
    member.mkdir(parents=True)
    outside.mkdir()
    (outside / "key").write_text("secret")
    (member / "mcp").symlink_to(tmp_path)  # attack 1's socket dir
    (member / ".runtime.pid.tmp").symlink_to(outside / "key")  # attack 4
    (member / "attachments").symlink_to(outside)  # attack 9
    (member / "runtime").write_text("not a dir")
    with capture_logs() as logs:
        assert private_dirs(member) == member
    assert not any(p.is_symlink() for p in member.iterdir())
    assert stat.S_ISDIR(os.lstat(member / "runtime").st_mode)
    assert stat.S_IMODE(os.stat(member / "runtime").st_mode) == 0o700
    assert (outside / "key").read_text() == "secret" and sorted(os.listdir(outside)) == ["key"]
    removed = {e["path"].rsplit("/", 1)[1] for e in logs
               if e["event"] in ("member_dir_link_removed", "member_dir_entry_removed")}
    assert removed == {"mcp", ".runtime.pid.tmp", "attachments", "runtime"}


def test_an_old_layouts_runtime_dirs_move_into_the_runtime_home_once(tmp_path: Path) -> None:
    """A Claude member's transcripts (config/projects) are where ``--resume`` looks after the
    move; a dir the runtime home has already is left where it is, not merged or deleted."""
    member = tmp_path / "a"
    (member / "config" / "projects").mkdir(parents=True)
    (member / "config" / "projects" / "s.jsonl").write_text("{}")
    (member / "codex-home" / "sessions").mkdir(parents=True)
    (member / "runtime" / "xdg").mkdir(parents=True)
    (member / "xdg").mkdir()
    (member / "xdg" / "old").write_text("x")
    private_dirs(member)
    assert (member / "runtime" / "config" / "projects" / "s.jsonl").exists()
    assert (member / "runtime" / "codex-home" / "sessions").is_dir()
    assert not (member / "config").exists() and not (member / "codex-home").exists()
    assert (member / "xdg" / "old").exists() and not (member / "runtime" / "xdg" / "old").exists()
    private_dirs(member)  # twice: nothing moves again
    assert (member / "runtime" / "config" / "projects" / "s.jsonl").exists()
