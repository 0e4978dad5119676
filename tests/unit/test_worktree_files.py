"""Opening what a member could have replaced (orchestrator/daemon/worktrees/_files.py) and the
``.worktreeinclude`` copy built on it (``_include.py``): never through a symlink, a regular
file of one link only, bounded, a refusal named — in process, on a real file system."""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

import pytest

from orchestrator.daemon.worktrees._files import copy_beneath, head_beneath, open_beneath
from orchestrator.daemon.worktrees._include import Refusal, copy_included

if TYPE_CHECKING:
    from pathlib import Path


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout with ``sub/plain.txt`` and a secret directory beside it."""
    root, secret = tmp_path / "root", tmp_path / "secret"
    (root / "sub").mkdir(parents=True)
    secret.mkdir()
    (root / "sub" / "plain.txt").write_text("plain\n")
    (secret / "id_ed25519").write_text("sekrit\n")
    return root, secret


@pytest.mark.parametrize(("make", "code"), [
    ("dir-link", errno.ENOTDIR), ("file-link", errno.ELOOP), ("fifo", errno.EINVAL),
    ("hard-link", errno.EMLINK), ("directory", errno.EINVAL)])
def test_a_name_a_member_replaced_is_refused_never_followed(
        tmp_path: Path, make: str, code: int) -> None:
    """A directory on the way that is a symlink (``O_DIRECTORY | O_NOFOLLOW``: ENOTDIR), the
    file itself a symlink, a FIFO (opened without blocking), a hard link to a file elsewhere,
    a directory: each refused with its errno; nothing of the secret is read."""
    root, secret = _tree(tmp_path)
    parts = {"dir-link": ["lnk", "id_ed25519"], "file-link": ["key"], "fifo": ["pipe"],
             "hard-link": ["linked"], "directory": ["sub"]}[make]
    if make == "dir-link":
        (root / "lnk").symlink_to(secret)
    elif make == "file-link":
        (root / "key").symlink_to(secret / "id_ed25519")
    elif make == "fifo":
        os.mkfifo(root / "pipe")
    elif make == "hard-link":
        os.link(secret / "id_ed25519", root / "linked")
    with pytest.raises(OSError) as caught:
        os.close(open_beneath(root, parts))
    assert caught.value.errno == code


def test_a_plain_file_is_read_and_copied_within_its_bound(tmp_path: Path) -> None:
    """A regular file is read (at most the bound) and copied to a new 0600 file; past the
    bound the copy is ``EFBIG`` and leaves nothing; a missing one is None/False; ``..`` is
    no path to walk."""
    root, _ = _tree(tmp_path)
    assert head_beneath(root / "sub", "plain.txt", limit_bytes=3) == b"pla"
    assert head_beneath(root / "sub", "missing", limit_bytes=3) is None
    target = tmp_path / "copy"
    assert copy_beneath(root, ["sub", "plain.txt"], target, limit_bytes=100)
    assert target.read_text() == "plain\n" and target.stat().st_mode & 0o777 == 0o600
    with pytest.raises(OSError) as caught:
        copy_beneath(root, ["sub", "plain.txt"], tmp_path / "big", limit_bytes=3)
    assert caught.value.errno == errno.EFBIG and not (tmp_path / "big").exists()
    assert not copy_beneath(root, ["sub", "missing"], tmp_path / "none", limit_bytes=3)
    with pytest.raises(OSError):
        open_beneath(root, ["sub", "..", "sub", "plain.txt"])


def test_worktreeinclude_copies_the_checkouts_files_and_names_each_refusal(
        tmp_path: Path) -> None:
    """``lnk/*`` through a link to the secret dir copies nothing and is named once; a
    pattern leaving the repository is named; ``.env`` is copied with its mode; a file the
    worktree has already is left as it is; a link the worktree holds (a tracked symlink) is
    never written through."""
    root, secret = _tree(tmp_path)
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (root / "lnk").symlink_to(secret)
    (root / ".env").write_text("LOCAL=1\n")
    (root / ".env").chmod(0o640)
    (root / "conf").mkdir()
    (root / "conf" / "local.cfg").write_text("mine\n")
    (worktree / "conf").symlink_to(secret)
    (worktree / "sub").mkdir()
    (worktree / "sub" / "plain.txt").write_text("the worktree's own\n")
    (root / ".worktreeinclude").write_text(
        "# comment\nlnk/*\n../secret/*\n.env\nconf/*\nsub/plain.txt\nnode_modules/**\n")
    refused = copy_included(root, worktree)
    assert refused == [Refusal("lnk", "a symlink (never followed)"),
                       Refusal("../secret/*", "outside the repository"),
                       Refusal("conf/local.cfg",
                               "not written in the worktree: a symlink (never followed)")]
    assert (worktree / ".env").read_text() == "LOCAL=1\n"
    assert (worktree / ".env").stat().st_mode & 0o777 == 0o640
    assert (worktree / "sub" / "plain.txt").read_text() == "the worktree's own\n"
    assert sorted(p.name for p in secret.iterdir()) == ["id_ed25519"]
    assert not (worktree / "lnk").exists()
