"""Reading a PDF — its pages, their text, rendered pages — in a bounded child process.

``read_pdf`` runs ``pdf_worker`` (PDFium through pypdfium2) with an address-space cap, a CPU cap
and a wall deadline, feeding it the bytes on stdin — forked by the fork server
(``pdf_forkserver``: PDFium loaded once, not once a read), or started afresh where that server
cannot be had or ``TEAMCTL_PDF_FORKSERVER=0`` says so. Whatever the PDF does to the renderer — a
decompression bomb, nesting past the stack, a crash — ends that process, never the daemon, and
comes back as a typed refusal that says what to do. Deterministic: the same bytes and settings
give the same page images and text (one PDFium build, fixed scale, lossless PNG).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.normalize import Limits
from orchestrator.attachments.pdf_forkserver import ForkedReader, ForkServer

__all__ = ["PdfLimits", "PdfReading", "read_pdf"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class PdfLimits:
    """How far a PDF is read: pages rendered (each within ``long_edge`` px, ``max_pixels`` and
    ``max_dpi``, then made into the image variant of ``purpose`` within ``image`` — the
    member's image limits), text kept (bytes of UTF-8), and each reader's memory, CPU seconds
    and wall deadline. Four or more pages are rendered by two readers at once (two cores)."""

    render_pages: int = 20
    long_edge: int = 2000
    max_pixels: int = 4_000_000
    max_dpi: int = 150
    max_text_bytes: int = 256 * 1024
    memory_bytes: int = 1024 * 1024 * 1024
    cpu_seconds: int = 60
    deadline: float = 90.0
    purpose: str = "document-page"
    image: Limits | None = None  # None: long_edge and max_pixels, 20 MiB


@dataclass(frozen=True)
class RenderedPage:
    """One rendered page, as its image variant (what the member receives)."""

    number: int
    mime: str
    width: int
    height: int
    data: bytes
    notes: tuple[str, ...]


@dataclass(frozen=True)
class PdfReading:
    pages: int
    page_texts: tuple[str, ...]  # from page 1, as far as the text budget went
    text_truncated: bool
    rendered: tuple[RenderedPage, ...]
    embedded_files: int
    javascript: int

    @property
    def images(self) -> tuple[bytes, ...]:
        return tuple(page.data for page in self.rendered)


_SPLIT_AT = 4  # pages: from here, two readers share the rendering


_Reader = subprocess.Popen[bytes] | ForkedReader


class _ReaderLost(Exception):
    """The fork server went away before it said how a reader ended (not the PDF's doing)."""


def read_pdf(data: bytes, name: str, limits: PdfLimits) -> PdfReading:
    """The PDF's facts, text and rendered pages; AttachmentError if it cannot be read within
    the limits (encrypted, corrupt, a bomb)."""
    try:
        return _read(data, name, limits, forked=_forking())
    except _ReaderLost:  # once more, each reader started afresh
        return _read(data, name, limits, forked=False)


def _read(data: bytes, name: str, limits: PdfLimits, *, forked: bool) -> PdfReading:
    half = (limits.render_pages + 1) // 2 if limits.render_pages >= _SPLIT_AT else None
    if half is None:
        return _parse(_run(data, name, limits, 0, limits.render_pages, limits.max_text_bytes,
                           forked=forked), name, limits)
    readers = [_start(limits, 0, half, limits.max_text_bytes, forked=forked),
               _start(limits, half, limits.render_pages - half, 0, forked=forked)]
    end = time.monotonic() + limits.deadline
    try:
        for reader in readers:  # both read the whole PDF before they answer: both work at once
            _feed(reader, data)
        outs = [_finish(reader, None, name, limits, end) for reader in readers]
    finally:
        for reader in readers:
            _reap(reader)
    first, second = (_parse(out, name, limits) for out in outs)
    return replace(first, rendered=first.rendered + second.rendered)


def _job(limits: PdfLimits, first: int, render: int, text: int) -> str:
    image = limits.image or Limits(limits.long_edge, limits.max_pixels / 1_000_000, 20 << 20)
    return json.dumps({
        "first": first, "render": render, "long_edge": limits.long_edge,
        "max_pixels": limits.max_pixels, "max_dpi": limits.max_dpi, "text": text,
        "memory": limits.memory_bytes, "cpu": limits.cpu_seconds, "purpose": limits.purpose,
        "limits": image.to_json()})


def _start(limits: PdfLimits, first: int, render: int, text: int, *, forked: bool) -> _Reader:
    job = _job(limits, first, render, text)
    if forked:
        reader = FORK_SERVER.reader(job)
        if reader is not None:
            return reader
    argv = [sys.executable, "-E", "-s", "-m", "orchestrator.attachments.pdf_worker", job]
    return subprocess.Popen(  # a fixed argv (numbers and our purpose), no shell
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=_PACKAGE_ROOT, env=_worker_env())


def _forking() -> bool:
    return os.environ.get("TEAMCTL_PDF_FORKSERVER", "1").strip() != "0"


def _feed(reader: _Reader, data: bytes) -> None:
    stdin, reader.stdin = reader.stdin, None  # communicate() then only reads
    assert stdin is not None
    try:
        stdin.write(data)
    except BrokenPipeError:  # it died at once: its exit status says why
        pass
    finally:
        with contextlib.suppress(BrokenPipeError):
            stdin.close()


def _finish(reader: _Reader, data: bytes | None, name: str, limits: PdfLimits,
            end: float) -> bytes:
    try:
        out, err = reader.communicate(data, timeout=max(0.0, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise _unreadable(name, f"reading it took longer than {limits.deadline:g} s") from None
    if reader.returncode is None:  # only a forked reader: its server went away
        raise _ReaderLost
    if reader.returncode != 0:
        raise _unreadable(name, _how_it_died(reader.returncode, limits),
                          diagnostic=err[-2000:].decode(errors="replace"))
    return out


def _run(data: bytes, name: str, limits: PdfLimits, first: int, render: int, text: int, *,
         forked: bool) -> bytes:
    reader = _start(limits, first, render, text, forked=forked)
    try:
        return _finish(reader, data, name, limits, time.monotonic() + limits.deadline)
    finally:
        _reap(reader)


_KILLED_DEADLINE = 10.0  # seconds for a killed reader to be reaped (one stuck in the kernel)


def _reap(reader: _Reader) -> None:
    """The reader gone and its pipes closed, whatever happened (a refusal, a deadline)."""
    if reader.poll() is None:
        reader.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            reader.wait(timeout=_KILLED_DEADLINE)
    for pipe in (reader.stdin, reader.stdout, reader.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _worker_env() -> dict[str, str]:
    """The reader gets nothing of the daemon's environment (no secret can reach a PDF reader);
    -E ignores PYTHON* variables: the package is found from its working directory."""
    return {"PATH": os.defpath, "LC_ALL": "C.UTF-8"}


# one per process, started by the first read that wants it
FORK_SERVER = ForkServer([sys.executable, "-E", "-s", "-m",
                          "orchestrator.attachments.pdf_forkserver"], _PACKAGE_ROOT, _worker_env())


def _parse(out: bytes, name: str, limits: PdfLimits) -> PdfReading:
    line, _, rest = out.partition(b"\n")
    try:
        header = json.loads(line)
    except ValueError:
        raise _unreadable(name, "the reader gave no answer") from None
    error = header.get("error")
    if error == "encrypted":
        raise AttachmentError(
            "attachment_document_encrypted",
            f"{name}: is encrypted (a password is needed to open it); save a copy without the "
            "password (e.g. qpdf --decrypt --password=… in.pdf out.pdf) and attach that")
    if error == "memory":
        raise _unreadable(name, f"reading it needs more than "
                          f"{limits.memory_bytes // (1024 * 1024)} MiB (a decompression bomb?)")
    if error is not None:
        raise AttachmentError("attachment_corrupt_document",
                              f"{name}: is not a readable PDF ({error}); export it again",
                              diagnostic=str(header.get("detail", "")))
    rendered, offset = [], 0
    for facts in header["rendered"]:
        size = int(facts["bytes"])
        rendered.append(RenderedPage(int(facts["page"]), str(facts["mime"]),
                                     int(facts["width"]), int(facts["height"]),
                                     rest[offset:offset + size],
                                     tuple(str(n) for n in facts["notes"])))
        offset += size
    return PdfReading(
        pages=int(header["pages"]),
        page_texts=tuple(str(t) for t in header["text"]),
        text_truncated=bool(header["truncated"]), rendered=tuple(rendered),
        embedded_files=int(header["embedded_files"]), javascript=int(header["javascript"]))


def _how_it_died(returncode: int, limits: PdfLimits) -> str:
    if returncode == -signal.SIGXCPU or returncode == -signal.SIGKILL:
        return f"reading it took more than {limits.cpu_seconds} s of CPU"
    if returncode == -signal.SIGABRT:  # PDFium's answer to a failed allocation
        return (f"reading it needs more than {limits.memory_bytes // (1024 * 1024)} MiB (a "
                "decompression bomb, or a page too complex to draw)")
    if returncode < 0:
        return (f"the reader crashed on it ({signal.Signals(-returncode).name}; a malformed or "
                "hostile PDF, or more than "
                f"{limits.memory_bytes // (1024 * 1024)} MiB to read it)")
    return (f"the reader failed on it (exit {returncode}; a malformed PDF, or more than "
            f"{limits.memory_bytes // (1024 * 1024)} MiB to read it)")


def _unreadable(name: str, why: str, *, diagnostic: str = "") -> AttachmentError:
    return AttachmentError(
        "attachment_document_unreadable",
        f"{name}: could not be read safely: {why}; print it to a new PDF (or export the pages "
        "you need) and attach that", diagnostic=diagnostic)
