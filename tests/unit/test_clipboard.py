"""The clipboard readers, with hostile fakes on PATH: a reader that hangs is stopped at its
deadline, one that pours out 200 MB is cut at the limit, each outcome has its own code. (The
real xclip on a real X server: tests/e2e/test_clipboard_x11.py.)"""

from __future__ import annotations

import os
import shlex
import shutil
from typing import TYPE_CHECKING

import pytest

from orchestrator.client.clipboard import Clipped, read_clipboard, staged
from orchestrator.errors import ClipboardError
from tests.support import images
from tests.support.scripts import python_script

if TYPE_CHECKING:
    from pathlib import Path

PNG = images.png_bytes(images.screenshot(40, 30))


def _fake(bin_dir: Path, name: str, body: str) -> None:
    """A reader: Python (by absolute path: PATH holds only ``bin_dir``) with argv in ``args``."""
    python_script(bin_dir / name, f"import sys, os, time\nargs = sys.argv[1:]\n{body}\n")


def _read(bin_dir: Path, *, platform: str = "linux", timeout: float = 10.0,
          limit: int = 20 * 1024 * 1024, **env: str) -> Clipped:
    environ = {"PATH": str(bin_dir), **env}
    return read_clipboard(environ=environ, platform=platform, timeout=timeout,
                          limit_bytes=limit)


def _code(bin_dir: Path, *, platform: str = "linux", **env: str) -> str:
    with pytest.raises(ClipboardError) as caught:
        read_clipboard(environ={"PATH": str(bin_dir), **env}, platform=platform)
    assert caught.value.exit_code == 3
    return caught.value.code


XCLIP_PNG = f"""
if "TARGETS" in args:
    print("TARGETS\\nimage/jpeg\\nimage/png\\ntext/plain")
else:
    assert args[args.index("-t") + 1] == "image/png", args
    sys.stdout.buffer.write({PNG!r})
"""


def test_x11_prefers_png_among_the_advertised_types(tmp_path: Path) -> None:
    _fake(tmp_path, "xclip", XCLIP_PNG)
    clipped = _read(tmp_path, DISPLAY=":9")
    assert (clipped.data, clipped.mime, clipped.reader) == (PNG, "image/png", "xclip")


def test_each_kind_of_nothing_has_its_code(tmp_path: Path) -> None:
    assert _code(tmp_path, DISPLAY=":9") == "clipboard_reader_missing"
    assert _code(tmp_path) == "clipboard_reader_missing", "no display at all"
    _fake(tmp_path, "xclip", 'sys.stderr.write("Error: target TARGETS not available\\n")\n'
                             "sys.exit(1)")
    assert _code(tmp_path, DISPLAY=":9") == "clipboard_empty"
    _fake(tmp_path, "xclip", 'print("TARGETS\\nUTF8_STRING\\nTIMESTAMP")')
    with pytest.raises(ClipboardError) as caught:
        _read(tmp_path, DISPLAY=":9")
    assert caught.value.code == "clipboard_no_image"
    assert "UTF8_STRING" in caught.value.message and "TIMESTAMP" not in caught.value.message
    _fake(tmp_path, "xclip", 'sys.stderr.write("cannot open display; token=sk-ant-abcdefghijkl'
                             'mnopqrstuvwxyz0123\\n")\nsys.exit(2)')
    with pytest.raises(ClipboardError) as caught:
        _read(tmp_path, DISPLAY=":9")
    assert caught.value.code == "clipboard_read_failed" and caught.value.retryable
    assert "cannot open display" in caught.value.message
    assert "sk-ant-abcdefghijkl" not in caught.value.message, "the reader's stderr is redacted"


def test_a_reader_that_hangs_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    # a shell, not an interpreter: its pid is written a few milliseconds in, well within the
    # deadline, and it is the process the deadline kills (exec)
    pid_file = tmp_path / "pid"
    xclip = tmp_path / "xclip"
    sleep = shutil.which("sleep")  # by absolute path: PATH holds only tmp_path
    assert sleep is not None
    xclip.write_text(f"#!/bin/sh\necho $$ > {shlex.quote(str(pid_file))}\n"
                     f"exec {shlex.quote(sleep)} 3600\n")
    xclip.chmod(0o700)
    with pytest.raises(ClipboardError) as caught:
        _read(tmp_path, DISPLAY=":9", timeout=0.2)
    assert caught.value.code == "clipboard_read_failed"
    assert "did not answer within 0.2s" in caught.value.message
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped, not left behind


def test_a_reader_that_pours_out_200_mb_is_cut_at_the_limit(tmp_path: Path) -> None:
    _fake(tmp_path, "xclip", 'if "TARGETS" in args: print("image/png"); sys.exit(0)\n'
                             "chunk = b'\\0' * (1 << 20)\n"
                             "for _ in range(200): sys.stdout.buffer.write(chunk)")
    with pytest.raises(ClipboardError) as caught:
        _read(tmp_path, DISPLAY=":9", limit=4 * 1024 * 1024)
    assert caught.value.code == "clipboard_too_large"
    assert "larger than 4 MiB" in caught.value.message


def test_wayland_lists_types_then_reads_the_image(tmp_path: Path) -> None:
    _fake(tmp_path, "wl-paste", """
if args == ["--list-types"]:
    print("text/plain\\nimage/webp\\nimage/gif")
else:
    assert args == ["--no-newline", "--type", "image/gif"], args
    sys.stdout.buffer.write(b"GIF89a-bytes")
""")
    clipped = _read(tmp_path, WAYLAND_DISPLAY="wayland-0", DISPLAY=":9")
    assert (clipped.mime, clipped.data) == ("image/gif", b"GIF89a-bytes")
    _fake(tmp_path, "wl-paste", 'sys.stderr.write("No selection\\n"); sys.exit(1)')
    assert _code(tmp_path, WAYLAND_DISPLAY="wayland-0") == "clipboard_empty"


def test_macos_asks_for_png_then_jpeg_and_unhexes_the_answer(tmp_path: Path) -> None:
    _fake(tmp_path, "osascript", f"""
script = args[1]
if "PNGf" in script:
    sys.stderr.write("Can't make some data into the expected type. (-1700)\\n"); sys.exit(1)
if "JPEG" in script:
    print("«data JPEG" + {PNG.hex().upper()!r} + "»")
""")
    clipped = _read(tmp_path, platform="darwin")
    assert (clipped.mime, clipped.data) == ("image/jpeg", PNG)
    _fake(tmp_path, "osascript", 'if "clipboard info" in args[1]: print("")\nelse: sys.exit(1)')
    assert _code(tmp_path, platform="darwin") == "clipboard_empty"
    _fake(tmp_path, "osascript", 'if "clipboard info" in args[1]: print("«class utf8», 5")\n'
                                 "else: sys.exit(1)")
    assert _code(tmp_path, platform="darwin") == "clipboard_no_image"


def test_windows_powershell_exit_codes(tmp_path: Path) -> None:
    _fake(tmp_path, "powershell", f"sys.stdout.buffer.write({PNG!r})")
    assert _read(tmp_path, platform="win32").data == PNG
    _fake(tmp_path, "powershell", "sys.exit(3)")
    assert _code(tmp_path, platform="win32") == "clipboard_empty"
    _fake(tmp_path, "powershell", "sys.exit(4)")
    assert _code(tmp_path, platform="win32") == "clipboard_no_image"


def test_the_staged_file_is_private_and_gone_afterwards(tmp_path: Path) -> None:
    _fake(tmp_path, "xclip", XCLIP_PNG)
    clipped = _read(tmp_path, DISPLAY=":9")
    with staged(clipped, tmp_path / "home") as path:
        assert path.name == "clipboard.png" and path.read_bytes() == PNG
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.parent.stat().st_mode & 0o777 == 0o700
    assert not path.exists() and not path.parent.exists()
