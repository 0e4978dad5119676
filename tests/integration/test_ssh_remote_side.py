"""The SSH remote side run locally, as the process it is (a child of this test; against a real
sshd: tests/e2e/test_ssh_members.py): its runtime dies with its channel, an earlier run of the
member is stopped, a signal to it leaves no zombie, images are kept verified on the host. The
remote side's subject is processes — their groups, their death, their reaping — so this is the
integration layer's (docs/dev/testing.md); the launcher's pure parts are tests/unit/test_ssh.py."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtimes.hosts.ssh import host as ssh

SIDE = Path(ssh.__file__).parents[1] / "remote_side.py"

def _side(home: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, str(SIDE), *args], input=stdin, capture_output=True,
                          timeout=30, env={"HOME": str(home), "PATH": os.environ["PATH"]},
                          check=False)


def test_images_are_kept_verified_on_the_host(tmp_path: Path) -> None:
    data = b"\x89PNG fake image bytes"
    sha = hashlib.sha256(data).hexdigest()
    kept = _side(tmp_path, "put", sha, str(len(data)), stdin=data)
    path = Path(kept.stdout.decode().strip())
    assert path == tmp_path / ".cache" / "teamctl" / "images" / sha[:2] / sha
    assert path.read_bytes() == data and path.stat().st_mode & 0o777 == 0o600
    again = _side(tmp_path, "put", sha, str(len(data)))  # intact: stdin is not even read
    assert again.returncode == 0 and again.stdout.decode().strip() == str(path)
    damaged = _side(tmp_path, "put", "0" * 64, str(len(data)), stdin=data)
    assert damaged.returncode == 3 and b"damaged" in damaged.stderr
    assert _side(tmp_path, "exists", str(path.parent / "*")).stdout.strip() == b"true"
    assert _side(tmp_path, "which", "no-such-cli-here").returncode == 127
    assert json.loads(_side(tmp_path, "probe").stdout)["home"] == str(tmp_path)


def _run(home: Path, root: Path, argv: list[str]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, str(SIDE), "run"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={"HOME": str(home), "PATH": os.environ["PATH"]})
    assert process.stdin is not None and process.stdout is not None
    header = {"root": str(root), "dirs": ["a"], "files": {"a/s.json": "{}"}, "links": {},
              "argv": argv, "cwd": str(home), "env": {"X_TOKEN": "secret"}, "grace": 0.1}
    process.stdin.write(json.dumps(header).encode() + b"\nhello\n")
    process.stdin.flush()
    return process


CHILD = [sys.executable, "-c", "import os, sys, time; print(os.getpid(), os.getpgid(0), "
         "sys.stdin.readline().strip(), os.environ['X_TOKEN'], flush=True); time.sleep(600)"]


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_the_runtime_dies_with_its_channel(tmp_path: Path) -> None:
    root = tmp_path / "root"
    side = _run(tmp_path, root, CHILD)
    assert side.stdout is not None and side.stdin is not None
    pid, pgid, first, token = side.stdout.readline().decode().split()
    assert (first, token) == ("hello", "secret"), "stdin after the header, env from it"
    assert pid == pgid, "its own process group"
    assert (root / "a" / "s.json").read_text() == "{}"
    assert (root / "a" / "s.json").stat().st_mode & 0o777 == 0o600
    side.stdin.close()  # the channel drops
    assert _gone(int(pid)), "the runtime is killed after the grace"
    side.wait(timeout=20)
    _close(side)


def test_an_earlier_run_of_the_member_is_stopped(tmp_path: Path) -> None:
    root = tmp_path / "root"
    first = _run(tmp_path, root, CHILD)
    assert first.stdout is not None
    old_pid = int(first.stdout.readline().decode().split()[0])
    second = _run(tmp_path, root, CHILD)  # the first channel hangs: never closed
    assert second.stdout is not None
    new_pid = int(second.stdout.readline().decode().split()[0])
    assert _gone(old_pid) and new_pid != old_pid
    for process in (first, second):
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
        _close(process)
    assert _gone(new_pid), "SIGTERM to the remote side takes its runtime with it"


def test_a_remote_side_stopped_by_a_signal_leaves_no_zombie_runtime(tmp_path: Path) -> None:
    """SIGTERM to the remote side (a stop) stops its runtime and reaps it before the remote side
    exits. Its handler runs inside the main thread's ``child.wait()``, where ``poll()`` cannot
    take Popen's lock and never saw the runtime end: the side waited out its whole SIGTERM grace,
    then exited leaving the runtime's zombie to init."""
    side = _run(tmp_path, tmp_path / "root", CHILD)
    assert side.stdout is not None
    pid = int(side.stdout.readline().decode().split()[0])
    side.send_signal(signal.SIGTERM)
    assert side.wait(timeout=20) == 128 + signal.SIGTERM
    _close(side)
    with pytest.raises(ProcessLookupError):  # reaped: not even a zombie is left
        os.kill(pid, 0)


def _close(process: subprocess.Popen[bytes]) -> None:
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None and not stream.closed:
            stream.close()


def test_the_mirror_the_pid_file_and_an_images_copy_never_go_through_a_members_link(
        tmp_path: Path) -> None:
    """The remote side runs as the host's user outside a member's sandbox there: what the
    member could plant in its mirror (a link where a mirrored directory goes, at a file's
    temp name, at the pid file, where its images' copy goes) is never followed — the entry
    is refused, said on stderr, and the runtime still starts; nothing outside changes."""
    home, root, outside = tmp_path / "home", tmp_path / "home" / "mirror", tmp_path / "outside"
    for path in (home, root, outside):
        path.mkdir(exist_ok=True)
    canary = outside / "authorized_keys"
    canary.write_text("the host user's own\n")
    (root / "a").symlink_to(outside)  # a mirrored dir's name
    (root / "remote.pid").symlink_to(canary)  # the pid file
    (root / "s.json").symlink_to(canary)  # a mirrored file's name
    process = subprocess.Popen([sys.executable, str(SIDE), "run"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={"HOME": str(home), "PATH": os.environ["PATH"]})
    header = {"root": str(root), "dirs": ["a"], "files": {"a/x.json": "{}", "s.json": "{}"},
              "links": {}, "argv": [sys.executable, "-c", "print('up', flush=True)"],
              "cwd": str(home), "env": {}, "grace": 0.1}
    out, err = process.communicate(json.dumps(header).encode() + b"\n", timeout=30)
    assert out.strip() == b"up"
    assert b"a not mirrored" in err and b"a/x.json not mirrored" in err
    assert canary.read_text() == "the host user's own\n"
    assert sorted(p.name for p in outside.iterdir()) == ["authorized_keys"]
    assert (root / "s.json").read_text() == "{}" and not (root / "s.json").is_symlink()
    into = root / "attachments"
    into.symlink_to(outside)
    data = b"\x89PNG image"
    sha = hashlib.sha256(data).hexdigest()
    refused = _side(home, "put", sha, str(len(data)), str(into), stdin=data)
    assert refused.returncode != 0 and not (outside / sha).exists()
