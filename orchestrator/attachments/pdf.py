"""Reading a PDF — its pages, their text, rendered pages — in a bounded child process.

``read_pdf`` runs ``pdf_worker`` (PDFium through pypdfium2) with an address-space cap, a CPU cap
and a wall deadline, feeding it the bytes on stdin. Whatever the PDF does to the renderer — a
decompression bomb, nesting past the stack, a crash — ends that process, never the daemon, and
comes back as a typed refusal that says what to do. Deterministic: the same bytes and settings
give the same page images and text (one PDFium build, fixed scale, lossless PNG).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from orchestrator.attachments.failures import AttachmentError

__all__ = ["PdfLimits", "PdfReading", "read_pdf"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class PdfLimits:
    """How far a PDF is read: pages rendered (each within ``long_edge`` px, ``max_pixels`` and
    ``max_dpi``),
    text kept (bytes of UTF-8), and the reader's memory, CPU seconds and wall deadline."""

    render_pages: int = 20
    long_edge: int = 2000
    max_pixels: int = 4_000_000
    max_dpi: int = 150
    max_text_bytes: int = 256 * 1024
    memory_bytes: int = 1024 * 1024 * 1024
    cpu_seconds: int = 60
    deadline: float = 90.0


@dataclass(frozen=True)
class PdfReading:
    pages: int
    page_texts: tuple[str, ...]  # from page 1, as far as the text budget went
    text_truncated: bool
    images: tuple[bytes, ...]  # PNG, one per rendered page
    embedded_files: int
    javascript: int


def read_pdf(data: bytes, name: str, limits: PdfLimits) -> PdfReading:
    """The PDF's facts, text and rendered pages; AttachmentError if it cannot be read within
    the limits (encrypted, corrupt, a bomb)."""
    argv = [sys.executable, "-E", "-s", "-m", "orchestrator.attachments.pdf_worker",
            str(limits.render_pages), str(limits.long_edge), str(limits.max_pixels),
            str(limits.max_dpi),
            str(limits.max_text_bytes), str(limits.memory_bytes), str(limits.cpu_seconds)]
    try:
        done = subprocess.run(
            argv, input=data, capture_output=True, timeout=limits.deadline, check=False,
            cwd=_PACKAGE_ROOT, env=_worker_env())
    except subprocess.TimeoutExpired:
        raise _unreadable(name, f"reading it took longer than {limits.deadline:g} s") from None
    if done.returncode != 0:
        raise _unreadable(name, _how_it_died(done.returncode, limits),
                          diagnostic=done.stderr[-2000:].decode(errors="replace"))
    return _parse(done.stdout, name, limits)


def _worker_env() -> dict[str, str]:
    """The reader gets nothing of the daemon's environment (no secret can reach a PDF reader);
    -E ignores PYTHON* variables: the package is found from its working directory."""
    return {"PATH": os.defpath, "LC_ALL": "C.UTF-8"}


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
    images, offset = [], 0
    for size in header["images"]:
        images.append(rest[offset:offset + size])
        offset += size
    return PdfReading(
        pages=int(header["pages"]),
        page_texts=tuple(str(t) for t in header["text"]),
        text_truncated=bool(header["truncated"]), images=tuple(images),
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
