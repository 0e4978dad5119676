"""Files made beneath a directory a member may write (orchestrator/beneath.py): never through
a name the member made there — the daemon's side of "the daemon is never a confused deputy"."""

from __future__ import annotations

import errno
import os
import stat
import threading
from typing import TYPE_CHECKING

import pytest

from orchestrator.beneath import (
    link_beneath,
    open_dir,
    read_beneath,
    read_regular,
    unlink_link_beneath,
    write_beneath,
)

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A member's home and, outside it, the operator's file its links point at."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (outside / "authorized_keys").write_text("the operator's\n")
    return home, outside / "authorized_keys"


def test_a_write_replaces_a_planted_link_and_never_writes_through_it(
        planted: tuple[Path, Path]) -> None:
    """Attack 9's shape: ``.config.toml.tmp`` and the final name linked to a file outside;
    the write lands in the home as a new 0600 file, the target is untouched."""
    home, target = planted
    (home / "config.toml").symlink_to(target)
    (home / ".config.toml.tmp").symlink_to(target)
    write_beneath(home, "config.toml", b"model = 'x'\n")
    assert target.read_text() == "the operator's\n"
    found = os.lstat(home / "config.toml")
    assert stat.S_ISREG(found.st_mode) and stat.S_IMODE(found.st_mode) == 0o600
    assert (home / "config.toml").read_bytes() == b"model = 'x'\n"


def test_a_directory_swapped_for_a_link_is_refused_not_followed(
        planted: tuple[Path, Path]) -> None:
    """``attachments`` (or ``codex-home``) made a link to a directory outside: nothing is
    written there (ELOOP), nothing made."""
    home, target = planted
    (home / "attachments").symlink_to(target.parent)
    with pytest.raises(OSError) as refused:
        write_beneath(home, "attachments/abc", b"image bytes")
    assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)
    assert sorted(p.name for p in target.parent.iterdir()) == ["authorized_keys"]
    with pytest.raises(OSError):
        os.close(open_dir(home, "attachments/sub"))
    assert not (target.parent / "sub").exists()


def test_a_link_replaces_a_link_never_a_file_and_unlink_keeps_a_file(
        planted: tuple[Path, Path]) -> None:
    home, target = planted
    link_beneath(home, "codex-home/auth.json", str(target))
    assert os.readlink(home / "codex-home" / "auth.json") == str(target)
    link_beneath(home, "codex-home/auth.json", "/elsewhere")
    assert os.readlink(home / "codex-home" / "auth.json") == "/elsewhere"
    (home / "codex-home" / "auth.json").unlink()
    (home / "codex-home" / "auth.json").write_text("{}")
    with pytest.raises(FileExistsError):
        link_beneath(home, "codex-home/auth.json", str(target))
    unlink_link_beneath(home, "codex-home/auth.json")
    assert (home / "codex-home" / "auth.json").read_text() == "{}"


def test_a_read_never_follows_a_link_nor_blocks_on_a_fifo(planted: tuple[Path, Path]) -> None:
    """The login check read a member's ``auth.json`` by path: a link to a secret was
    followed, and a FIFO there would have hung the daemon. Both are refused at once."""
    home, target = planted
    (home / "auth.json").symlink_to(target)
    with pytest.raises(OSError) as linked:
        read_beneath(home, "auth.json")
    assert linked.value.errno == errno.ELOOP
    os.mkfifo(home / "fifo")
    done = threading.Event()

    def read() -> None:
        with pytest.raises(OSError):
            read_beneath(home, "fifo")
        with pytest.raises(OSError):
            read_regular(home / "fifo")
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10), "a FIFO blocked the read"
    (home / "big").write_bytes(b"x" * 2048)
    with pytest.raises(OSError) as big:
        read_beneath(home, "big", limit_bytes=1024)
    assert big.value.errno == errno.EFBIG


@pytest.mark.parametrize("relative", ["/etc/passwd", "../outside/authorized_keys", "a/../../x"])
def test_a_path_out_of_its_root_is_refused(planted: tuple[Path, Path], relative: str) -> None:
    home, target = planted
    with pytest.raises(ValueError, match="not a path beneath"):
        write_beneath(home, relative, b"x")
    assert target.read_text() == "the operator's\n"
