"""``send --paste``: one image from the operator's clipboard, through the platform's own reader.

Wayland: ``wl-paste``; X11: ``xclip``; macOS: ``osascript``; Windows: PowerShell. On Wayland and
X11 the advertised types are read first and an image is taken as PNG, JPEG, GIF or WebP, in that
order (an X11 owner that holds text answers any target with its text, so the types decide, not
the bytes). macOS is asked for PNG, JPEG, then GIF; Windows for its "PNG" format first, then the
bitmap (saved as PNG).

Every reader runs with a deadline and its output is read up to the 20 MiB attachment limit and no
further: a reader that hangs, or pours out 200 MB, is stopped and named. The bytes then go
through the same intake as a file (the daemon sniffs, decodes and plans them), so a clipboard is
trusted no more than a file. The readers are optional: only ``--paste`` needs one.

Errors are typed (``ClipboardError``): clipboard_reader_missing, clipboard_empty,
clipboard_no_image, clipboard_too_large, clipboard_read_failed (with the reader's redacted
stderr).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import ClipboardError
from orchestrator.limits import ORIGINAL_LIMIT_BYTES
from orchestrator.paths import ensure_private_dir
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

__all__ = ["CLIPBOARD_LIMIT_BYTES", "Clipped", "read_clipboard", "staged"]

CLIPBOARD_LIMIT_BYTES = ORIGINAL_LIMIT_BYTES  # the attachment intake's limit for an original
READ_TIMEOUT = 10.0
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif",
              "image/webp": "webp"}
_STDERR_LIMIT = 16 * 1024
_X11_META = frozenset({"TARGETS", "TIMESTAMP", "MULTIPLE", "SAVE_TARGETS", "DELETE"})


@dataclass(frozen=True)
class Clipped:
    data: bytes = b""
    mime: str = "image/png"
    reader: str = ""

    @property
    def filename(self) -> str:
        return f"clipboard.{EXTENSIONS.get(self.mime, 'img')}"


@contextlib.contextmanager
def staged(clipped: Clipped, home: Path) -> Iterator[Path]:
    """The pasted bytes as a 0600 file in a private (0700) directory of teamctl's home, for
    the daemon's intake to read as it reads any file; removed once the call is over (by then
    the daemon has stored what it planned in its artifact store)."""
    root = ensure_private_dir(home / "paste")
    folder = Path(tempfile.mkdtemp(dir=root))
    path = folder / clipped.filename
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(clipped.data)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def read_clipboard(*, environ: Mapping[str, str] | None = None, platform: str | None = None,
                   limit_bytes: int = CLIPBOARD_LIMIT_BYTES,
                   timeout: float = READ_TIMEOUT) -> Clipped:
    """The clipboard's image, or a ClipboardError saying why there is none."""
    env = dict(os.environ if environ is None else environ)
    system = platform or sys.platform
    reader = _Reader(env, limit_bytes, timeout)
    if system == "darwin":
        return reader.macos()
    if system in ("win32", "cygwin"):
        return reader.windows()
    if env.get("WAYLAND_DISPLAY"):
        return reader.wayland()
    if env.get("DISPLAY"):
        return reader.x11()
    raise ClipboardError(
        "clipboard_reader_missing",
        "no clipboard to read: neither WAYLAND_DISPLAY nor DISPLAY is set (on a remote shell, "
        "save the screenshot to a file and use --attach)")


@dataclass(frozen=True)
class _Run:
    code: int
    out: bytes
    err: str


class _Reader:
    def __init__(self, env: dict[str, str], limit_bytes: int, timeout: float) -> None:
        self._env = env
        self._limit = limit_bytes
        self._deadline = time.monotonic() + timeout
        self._timeout = timeout

    # -- the platforms -----------------------------------------------------------------------

    def x11(self) -> Clipped:
        tool = self._tool("xclip", "install xclip (Debian/Ubuntu: apt install xclip)")
        listed = self._run([tool, "-selection", "clipboard", "-t", "TARGETS", "-o"], small=True)
        if listed.code != 0:
            if "not available" in listed.err or not listed.err:
                raise _empty()
            raise self._failed("xclip", listed)
        mime = self._pick(listed.out.decode("utf-8", "replace").split())
        got = self._run([tool, "-selection", "clipboard", "-t", mime, "-o"])
        return self._image("xclip", mime, got)

    def wayland(self) -> Clipped:
        tool = self._tool("wl-paste", "install wl-clipboard (Debian/Ubuntu: apt install "
                          "wl-clipboard)")
        listed = self._run([tool, "--list-types"], small=True)
        if listed.code != 0:
            if "no selection" in listed.err.lower() or "nothing is copied" in listed.err.lower():
                raise _empty()
            raise self._failed("wl-paste", listed)
        mime = self._pick(listed.out.decode("utf-8", "replace").split())
        got = self._run([tool, "--no-newline", "--type", mime])
        return self._image("wl-paste", mime, got)

    def macos(self) -> Clipped:
        tool = self._tool("osascript", "osascript ships with macOS; is /usr/bin on PATH?")
        for mime, klass in (("image/png", "PNGf"), ("image/jpeg", "JPEG"), ("image/gif", "GIFf")):
            # the answer is «data PNGf89504E47…»: hex, twice the bytes, so twice the limit
            got = self._run([tool, "-e", f"the clipboard as «class {klass}»"], hex_limit=True)
            if got.code == 0:
                return self._image("osascript", mime, _Run(0, _unhex(got.out, klass), ""))
        info = self._run([tool, "-e", "clipboard info"], small=True)
        if info.code == 0 and not info.out.strip():
            raise _empty()
        raise _no_image("the clipboard holds no PNG, JPEG or GIF")

    def windows(self) -> Clipped:
        tool = self._tool("powershell", "PowerShell ships with Windows; is it on PATH?")
        got = self._run([tool, "-NoProfile", "-NonInteractive", "-STA", "-Command", _PS_SCRIPT])
        if got.code == 3:
            raise _empty()
        if got.code == 4:
            raise _no_image("the clipboard holds no image")
        return self._image("powershell", "image/png", got)

    # -- shared ------------------------------------------------------------------------------

    def _tool(self, name: str, hint: str) -> str:
        found = shutil.which(name, path=self._env.get("PATH"))
        if found is None:
            raise ClipboardError("clipboard_reader_missing",
                                 f"--paste needs {name} to read the clipboard; {hint}, or save "
                                 "the screenshot to a file and use --attach", reader=name)
        return found

    def _pick(self, types: list[str]) -> str:
        if not types:
            raise _empty()
        for mime in IMAGE_TYPES:
            if mime in types:
                return mime
        shown = ", ".join(t for t in types if t.isprintable() and t not in _X11_META)[:200]
        raise _no_image(f"the clipboard holds {shown}, not an image")

    def _image(self, reader: str, mime: str, got: _Run) -> Clipped:
        if got.code != 0:
            raise self._failed(reader, got)
        if not got.out:
            raise _empty()
        if len(got.out) > self._limit:
            raise self._too_large()
        return Clipped(got.out, mime, reader)

    def _too_large(self) -> ClipboardError:
        return ClipboardError("clipboard_too_large",
                              f"the clipboard's image is larger than "
                              f"{self._limit // (1024 * 1024)} MiB; crop it, or save a smaller "
                              "screenshot and use --attach", limit_bytes=self._limit)

    def _failed(self, reader: str, got: _Run) -> ClipboardError:
        detail = redact(got.err.strip())[-500:] or f"exit status {got.code}"
        return ClipboardError("clipboard_read_failed",
                              f"{reader} could not read the clipboard: {detail}", retryable=True,
                              reader=reader)

    def _run(self, argv: list[str], *, small: bool = False, hex_limit: bool = False) -> _Run:
        """Run a reader with what is left of the deadline, reading at most the limit."""
        limit = 1 << 20 if small else self._limit * 2 + 64 if hex_limit else self._limit
        try:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=self._env,
                                       start_new_session=True)
        except OSError as exc:
            raise ClipboardError("clipboard_read_failed",
                                 f"cannot start {argv[0]}: {exc.strerror}",
                                 reader=argv[0]) from None
        try:
            out, err = self._collect(process, argv, limit)
            code = process.wait(timeout=max(self._deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            raise self._hung(argv) from None
        finally:
            _stop(process)
        return _Run(code, out, err.decode("utf-8", "replace"))

    def _collect(self, process: subprocess.Popen[bytes], argv: list[str],
                 limit: int) -> tuple[bytes, bytes]:
        assert process.stdout is not None and process.stderr is not None
        chunks: dict[int, list[bytes]] = {1: [], 2: []}
        sizes = {1: 0, 2: 0}
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ, 1)
            selector.register(process.stderr, selectors.EVENT_READ, 2)
            while selector.get_map():
                left = self._deadline - time.monotonic()
                if left <= 0:
                    raise self._hung(argv)
                for key, _ in selector.select(timeout=left):
                    chunk = os.read(key.fd, 1 << 20)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    if key.data == 2 and sizes[2] >= _STDERR_LIMIT:
                        continue
                    chunks[key.data].append(chunk)
                    sizes[key.data] += len(chunk)
                    if key.data == 1 and sizes[1] > limit:
                        raise self._too_large()
        return b"".join(chunks[1]), b"".join(chunks[2])

    def _hung(self, argv: list[str]) -> ClipboardError:
        name = os.path.basename(argv[0])
        return ClipboardError("clipboard_read_failed",
                              f"{name} did not answer within {self._timeout:g}s (is the "
                              "application that owns the clipboard still running?)",
                              retryable=True, reader=name)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Kill the reader's whole group if it is still there, and reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def _empty() -> ClipboardError:
    return ClipboardError("clipboard_empty",
                          "the clipboard is empty: copy a screenshot first, then --paste")


def _no_image(what: str) -> ClipboardError:
    return ClipboardError("clipboard_no_image",
                          f"{what}; copy a screenshot (not its file or text), or use --attach")


def _unhex(out: bytes, klass: str) -> bytes:
    """``«data PNGf89504E…»`` → the bytes."""
    text = out.decode("utf-8", "replace").strip()
    prefix = f"«data {klass}"
    if not (text.startswith(prefix) and text.endswith("»")):
        raise ClipboardError("clipboard_read_failed",
                             "osascript answered something that is not image data",
                             reader="osascript")
    try:
        return bytes.fromhex(text[len(prefix):-1])
    except ValueError:
        raise ClipboardError("clipboard_read_failed", "osascript's image data is not hex",
                             reader="osascript") from None


# PNG bytes when an application put a "PNG" format on the clipboard (browsers, Snipping Tool),
# else the bitmap saved as PNG; exit 3: empty clipboard, 4: no image.
_PS_SCRIPT = r"""
Add-Type -AssemblyName System.Windows.Forms, System.Drawing
$out = [Console]::OpenStandardOutput()
$data = [System.Windows.Forms.Clipboard]::GetDataObject()
if ($null -eq $data -or $data.GetFormats().Length -eq 0) { exit 3 }
if ($data.GetDataPresent('PNG')) {
  $png = $data.GetData('PNG'); $png.CopyTo($out); $out.Flush(); exit 0
}
$image = [System.Windows.Forms.Clipboard]::GetImage()
if ($null -eq $image) { exit 4 }
$image.Save($out, [System.Drawing.Imaging.ImageFormat]::Png); $out.Flush(); exit 0
"""
