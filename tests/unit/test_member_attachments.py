"""Reading a member's attachments in its own view (orchestrator/daemon/members/_attachments.py):
each path opened once (``O_PATH``), proven where it really is, what it is and that the member
may read it, then read through its descriptor — so a name swapped afterwards changes nothing.
The rules of docs/security.md's "A member's attachments are read with its own rights" that are
about *what* and *how* (the router's side: tests/unit/test_router.py)."""

from __future__ import annotations

import hashlib
import os
import threading
from typing import TYPE_CHECKING

import pytest

from orchestrator.attachments.failures import AttachmentRefused
from orchestrator.daemon.members._attachments import Credentials, open_in_view, read_in_view
from orchestrator.daemon.members._view import local_view
from orchestrator.errors import AttachmentOutsideMemberView

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.daemon.members._view import MemberView


def _view(tmp_path: Path) -> MemberView:
    """An unsandboxed member whose workdir is ``tmp_path/work``; teamctl's state beside it."""
    (tmp_path / "work").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("the operator's secret\n")
    return local_view("a", workdirs=(tmp_path / "work",) * 2,
                      runtime_home=tmp_path / "state" / "members" / "a", grants=[],
                      state_dir=tmp_path / "state")


def _refused(view: MemberView, path: str) -> AttachmentOutsideMemberView:
    with pytest.raises(AttachmentOutsideMemberView) as caught:
        read_in_view(view, [path])
    return caught.value


def test_a_file_in_the_view_is_read_with_its_name_and_bytes(tmp_path: Path) -> None:
    view = _view(tmp_path)
    (tmp_path / "work" / "notes.md").write_text("# notes\n")
    [original] = read_in_view(view, [str(tmp_path / "work" / "notes.md")])
    assert (original.name, original.path, original.data) == (
        "notes.md", str(tmp_path / "work" / "notes.md"), b"# notes\n")


def test_a_symlink_inside_the_view_to_a_file_inside_it_is_read(tmp_path: Path) -> None:
    view = _view(tmp_path)
    (tmp_path / "work" / "real.txt").write_text("inside\n")
    (tmp_path / "work" / "link.txt").symlink_to(tmp_path / "work" / "real.txt")
    [original] = read_in_view(view, [str(tmp_path / "work" / "link.txt")])
    assert original.data == b"inside\n" and original.name == "link.txt"


@pytest.mark.parametrize("where", ["symlink", "dotdot", "symlinked_dir"])
def test_a_path_that_leads_out_of_the_view_is_refused(tmp_path: Path, where: str) -> None:
    """A symlink pointing out, a ``..`` walking out, a directory symlink: where the opened
    object really is decides, not the name."""
    view = _view(tmp_path)
    secret = tmp_path / "outside" / "secret.txt"
    (tmp_path / "work" / "link").symlink_to(secret)
    (tmp_path / "work" / "dir").symlink_to(tmp_path / "outside")
    path = {"symlink": f"{tmp_path}/work/link",
            "dotdot": f"{tmp_path}/work/../outside/secret.txt",
            "symlinked_dir": f"{tmp_path}/work/dir/secret.txt"}[where]
    error = _refused(view, path)
    assert error.code == "attachment_outside_member_view" and error.rule == "outside"
    assert error.retryable is False and error.member == "a"
    assert "put the file in your workdir" in error.message.lower()
    assert "attach_paths" in error.message


@pytest.mark.parametrize("path", ["/etc/shadow", "/proc/self/environ",
                                  "/proc/self/root/etc/shadow", "/dev/zero", "/tmp"])
def test_system_and_process_files_are_outside_an_unsandboxed_members_view(
        tmp_path: Path, path: str) -> None:
    assert _refused(_view(tmp_path), path).rule == "outside"


def test_teamctls_own_files_are_outside_the_view(tmp_path: Path) -> None:
    """Another member's mcp.json (its token) and the daemon's log, in teamctl's state dir."""
    view = _view(tmp_path)
    for name in ("members/b/mcp.json", "logs/daemon.out"):
        (tmp_path / "state" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "state" / name).write_text("token\n")
        assert _refused(view, f"{tmp_path}/state/{name}").rule == "outside"


def test_a_relative_path_is_refused(tmp_path: Path) -> None:
    """The member's ``teamctl mcp`` makes its paths absolute; a raw caller's relative one
    would be the daemon's cwd's."""
    assert _refused(_view(tmp_path), "work/notes.md").rule == "not_absolute"


def test_a_fifo_in_the_view_is_refused_at_once_never_opened_for_reading(
        tmp_path: Path) -> None:
    """No writer ever comes: a FIFO opened for reading would block (or release a writer
    waiting on it). Refused by what the ``O_PATH`` descriptor is."""
    view = _view(tmp_path)
    os.mkfifo(tmp_path / "work" / "pipe")
    assert _refused(view, f"{tmp_path}/work/pipe").rule == "not_regular"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    assert _refused(_view(tmp_path), f"{tmp_path}/work").rule == "not_regular"


def test_a_hard_link_is_refused_whatever_its_other_name(tmp_path: Path) -> None:
    """A file with two names: teamctl cannot tell where the other one is (here: outside)."""
    view = _view(tmp_path)
    os.link(tmp_path / "outside" / "secret.txt", tmp_path / "work" / "hard.txt")
    assert _refused(view, f"{tmp_path}/work/hard.txt").rule == "hard_link"


def test_a_file_the_members_uid_may_not_read_by_its_mode_is_refused(tmp_path: Path) -> None:
    """The daemon may be root (DAC would not stop it); the member's rights are the mode's:
    the owner's bits for its owner (0044: others may read, the owner may not), and every
    directory above must let it through."""
    view = _view(tmp_path)
    path = tmp_path / "work" / "private.txt"
    path.write_text("not yours\n")
    owner = Credentials(uid=os.geteuid(), gids=frozenset())
    path.chmod(0o044)
    with pytest.raises(AttachmentOutsideMemberView) as caught:
        read_in_view(view, [str(path)], owner)
    assert caught.value.rule == "unreadable"
    path.chmod(0o400)
    assert read_in_view(view, [str(path)], owner)[0].data == b"not yours\n"
    (tmp_path / "work").chmod(0o600)  # its directory: no search for its owner
    try:
        with pytest.raises(AttachmentOutsideMemberView) as caught:
            read_in_view(view, [str(path)], owner)
    finally:
        (tmp_path / "work").chmod(0o700)
    assert caught.value.rule == "unreadable"


def test_a_missing_file_in_the_view_is_not_found_but_outside_says_nothing_of_existence(
        tmp_path: Path) -> None:
    """A missing file in the view is ``attachment_not_found``; a symlink to a missing path
    outside is refused as outside — no answer tells the member what exists out there."""
    view = _view(tmp_path)
    with pytest.raises(AttachmentRefused) as caught:
        read_in_view(view, [f"{tmp_path}/work/nothing.png"])
    assert [f.code for f in caught.value.failures] == ["attachment_not_found"]
    (tmp_path / "work" / "probe").symlink_to(tmp_path / "outside" / "nothing")
    assert _refused(view, f"{tmp_path}/work/probe").rule == "outside"


def test_a_name_swapped_after_the_check_still_reads_the_checked_file(tmp_path: Path) -> None:
    """The time-of-check/time-of-use race: between the check and the read the member swaps
    its file for a symlink to a secret. The read is of the object opened and checked."""
    view = _view(tmp_path)
    path = tmp_path / "work" / "shot.txt"
    path.write_text("what was checked\n")
    with open_in_view(view, [str(path)]) as opened:
        path.unlink()
        path.symlink_to(tmp_path / "outside" / "secret.txt")
        [original] = opened.read()
    assert original.data == b"what was checked\n"


def test_one_path_outside_refuses_the_message_before_any_is_read(tmp_path: Path) -> None:
    """The first path is fine, the second outside: every descriptor is closed and the
    refusal names the second."""
    view = _view(tmp_path)
    (tmp_path / "work" / "ok.txt").write_text("ok\n")
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(AttachmentOutsideMemberView) as caught:
        open_in_view(view, [f"{tmp_path}/work/ok.txt", f"{tmp_path}/outside/secret.txt"])
    assert caught.value.path == f"{tmp_path}/outside/secret.txt"
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_closed_view_refuses_every_path_with_its_reason(tmp_path: Path) -> None:
    from orchestrator.daemon.members._view import MemberView

    view = MemberView("a", "~", closed=("elsewhere", "you run on host box"))
    error = _refused(view, "/home/u/x.png")
    assert error.rule == "elsewhere" and "host box" in error.message


def test_a_symlink_swapped_during_the_open_never_reads_outside(tmp_path: Path) -> None:
    """A member flips a name between a file of its own and a symlink to a secret while its
    attachment is opened, many times over: each open ends either reading its own file or
    refused — never with the secret's bytes."""
    view = _view(tmp_path)
    mine, flip = tmp_path / "work" / "mine.txt", tmp_path / "work" / "flip"
    mine.write_text("mine\n")
    secret = (tmp_path / "outside" / "secret.txt").read_bytes()
    done = threading.Event()

    def flipper() -> None:
        while not done.is_set():
            for target in (mine, tmp_path / "outside" / "secret.txt"):
                tmp = tmp_path / "work" / ".flip"
                tmp.unlink(missing_ok=True)
                tmp.symlink_to(target)
                os.replace(tmp, flip)

    thread = threading.Thread(target=flipper)
    thread.start()
    outcomes: set[str] = set()
    try:
        for _ in range(300):
            try:
                [original] = read_in_view(view, [str(flip)])
            except (AttachmentOutsideMemberView, AttachmentRefused):
                outcomes.add("refused")
                continue
            assert original.data != secret
            outcomes.add(hashlib.sha256(original.data).hexdigest())
    finally:
        done.set()
        thread.join()
    assert outcomes <= {"refused", hashlib.sha256(b"mine\n").hexdigest()}
