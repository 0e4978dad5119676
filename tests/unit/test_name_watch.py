"""The control socket's watch (daemon/control/_name_watch.py): the kernel tells the daemon
when its socket's name is removed or replaced — an idle daemon does not poll for it."""

from __future__ import annotations

import ctypes
import os
import struct
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.daemon.control import _name_watch as name_watch
from orchestrator.daemon.control._name_watch import NameWatch

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio

_NEVER = 3600.0  # a poll this slow never answers within a test: an answer is the kernel's


async def test_a_removed_name_is_told_by_the_kernel(tmp_path: Path) -> None:
    target = tmp_path / "teamctl.sock"
    target.write_bytes(b"")
    with NameWatch(target, _NEVER) as watch:
        assert not watch.polling
        target.unlink()
        with anyio.fail_after(10):
            await watch.touched()


async def test_a_name_renamed_over_is_told(tmp_path: Path) -> None:
    target, other = tmp_path / "teamctl.sock", tmp_path / "other"
    target.write_bytes(b"")
    other.write_bytes(b"")
    with NameWatch(target, _NEVER) as watch:
        other.replace(target)
        with anyio.fail_after(10):
            await watch.touched()


async def test_the_directory_going_is_told(tmp_path: Path) -> None:
    directory = tmp_path / "home"
    directory.mkdir()
    with NameWatch(directory / "teamctl.sock", _NEVER) as watch:
        directory.rmdir()
        with anyio.fail_after(10):
            await watch.touched()


def _event(mask: int, name: bytes) -> bytes:
    padded = name + b"\0" * (16 - len(name) % 16) if name else b""
    return struct.pack("iIII", 1, mask, 0, len(padded)) + padded


def test_other_names_and_writes_are_not_the_name(tmp_path: Path) -> None:
    """The journal and the pid file beside the socket come and go: their events are read
    and dropped; the socket's own, a lost-events overflow and the directory's going are not."""
    watch = NameWatch(tmp_path / "teamctl.sock", _NEVER)
    create, delete, overflow, gone = 0x100, 0x200, 0x4000, 0x400
    assert not watch._names(_event(create, b"state.db-wal") + _event(delete, b"daemon.pid.tmp"))
    assert not watch._names(_event(create, b"teamctl.sock.old"))  # a prefix is another name
    assert watch._names(_event(create, b"x") + _event(delete, b"teamctl.sock"))
    assert watch._names(_event(overflow, b""))
    assert watch._names(_event(gone, b""))
    assert not watch._names(b"\x01\x02\x03")  # shorter than an event: nothing in it


async def test_without_inotify_it_polls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libc(*args: object, **kwargs: object) -> object:
        raise OSError("no libc here")
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    with NameWatch(tmp_path / "teamctl.sock", 0.01) as watch:
        assert watch.polling
        with anyio.fail_after(10):
            await watch.touched()  # the interval passed: the caller looks itself


async def test_a_directory_it_cannot_watch_falls_back_to_polling(tmp_path: Path) -> None:
    with NameWatch(tmp_path / "missing" / "teamctl.sock", 0.01) as watch:
        assert watch.polling
        with anyio.fail_after(10):
            await watch.touched()


def test_the_descriptor_is_closed_on_exit(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with NameWatch(tmp_path / "teamctl.sock", _NEVER):
        assert len(os.listdir("/proc/self/fd")) == before + 1
    assert len(os.listdir("/proc/self/fd")) == before
    fd = name_watch._inotify(tmp_path)  # and another can be had after
    assert fd is not None
    os.close(fd)
