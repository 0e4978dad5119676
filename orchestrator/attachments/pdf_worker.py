"""The PDF reader's own process: ``python -m orchestrator.attachments.pdf_worker``.

A PDF is a program for a renderer, and a hostile one (a decompression bomb, objects nested a
million deep, a page the size of a field) can take a renderer's memory or its stack. So PDFium
never runs in the daemon: this process reads the PDF from stdin, caps its own address space, CPU
time and file writes *before* it loads PDFium (forked by the fork server, ``pdf_forkserver``,
before it reads a byte: PDFium is already loaded, inside the same caps), and writes what it found
to stdout — one JSON header line, then the rendered pages' variants back to back. Each page is
made into its image variant here (``normalize.make_variant``, the image pipeline's own code,
with the member's limits and purpose), straight from PDFium's pixels: no intermediate PNG is
encoded, piped and decoded again. Its parent (``pdf``) gives it a deadline and reads a crash, a
kill or a limit as a typed refusal; the daemon stays up.

Nothing in the PDF is run or extracted beyond pages and their text: no form environment is
initialised (so no JavaScript runs), embedded files and attachments are only counted.

One argument: a JSON object (numbers and the variant's purpose): first page, pages to render,
long edge, max pixels, max DPI, text budget, memory bytes, CPU seconds, purpose, image limits.
"""

from __future__ import annotations

import faulthandler
import json
import re
import resource
import sys
from typing import Any

__all__ = ["main"]

_MAX_INPUT = 64 * 1024 * 1024
_JS_KEY = re.compile(rb"/(?:J|#4[aA])(?:S|#53)(?=[\s()<>\[\]{}/%]|$)")  # /JS, or escaped
# what page_marked (documents) puts around a page's text: charged to the text budget, so a
# million empty pages stop at the budget (not at the CPU cap) and the marked text fits it
_PAGE_FRAME = "--- page {} ---\n\n"


def _limit(memory_bytes: int, cpu_seconds: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # it writes no file
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _fail(code: str, detail: str = "") -> None:
    sys.stdout.buffer.write(json.dumps({"error": code, "detail": detail[:500]}).encode() + b"\n")
    sys.stdout.buffer.flush()


def _page_text(page: Any, budget: int) -> tuple[str, bool]:
    """The page's text within ``budget`` bytes of UTF-8 (cut at a character boundary), and
    whether it was cut."""
    textpage = page.get_textpage()
    try:
        text: str = textpage.get_text_range()
    finally:
        textpage.close()
    encoded = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").encode()
    kept = encoded[:max(budget, 0)]
    return kept.decode(errors="ignore"), len(kept) < len(encoded)


def _javascript(doc: Any, data: bytes) -> int:
    """JavaScript actions: PDFium counts the document-level name tree only, so a script run on
    open (/OpenAction) or on an event (/AA) is found by its /JS key in the file's bytes (a
    script inside a compressed object stream is counted only by the name tree). Counted for
    the plan's warning; nothing here runs one."""
    import pypdfium2.raw as pdfium_c

    return max(int(pdfium_c.FPDFDoc_GetJavaScriptActionCount(doc)),
               len(_JS_KEY.findall(data)))


def _render(page: Any, number: int, job: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The page's image variant, drawn at the scale that fits the variant's limits (so the
    normaliser need not resample it), never above ``max_dpi``."""
    from orchestrator.attachments.normalize import Decoded, Limits, make_variant
    from orchestrator.attachments.sniff import Format

    width, height = page.get_size()  # points (1/72 in)
    width, height = max(width, 1.0), max(height, 1.0)
    scale = min(job["long_edge"] / max(width, height),
                (job["max_pixels"] / (width * height)) ** 0.5, job["max_dpi"] / 72.0)
    bitmap = page.render(scale=scale, may_draw_forms=False, draw_annots=True)
    try:
        image = bitmap.to_pil()
    finally:
        bitmap.close()
    decoded = Decoded(image, Format("PNG", "image/png", "accept"), False, [], image.size)
    made = make_variant(b"", decoded, job["purpose"], Limits.from_json(job["limits"]),
                        f"page {number}")
    return ({"page": number, "mime": made.mime, "width": made.width, "height": made.height,
             "bytes": len(made.data), "notes": decoded.warnings}, made.data)


def preload() -> None:
    """What a reader loads before its first page, loaded once by the fork server
    (``pdf_forkserver``) so that each reader it forks starts with it: PDFium, Pillow's
    PNG and JPEG codecs, the image pipeline. Nothing here opens a PDF."""
    import pypdfium2  # noqa: F401 - loaded, and PDFium initialised
    from PIL import Image, JpegImagePlugin, PngImagePlugin  # noqa: F401

    from orchestrator.attachments import normalize, sniff  # noqa: F401

    Image.preinit()


def read(data: bytes, job: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
    # after the limits: PDFium's load (in a reader started afresh) and every allocation count;
    # a reader forked by the server was given it loaded, inside the same caps
    import pypdfium2 as pdfium

    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        text = str(exc).lower()
        return {"error": "encrypted" if "password" in text else "corrupt",
                "detail": str(exc)}, []
    pages = len(doc)
    header: dict[str, Any] = {
        "pages": pages, "text": [], "truncated": False,
        "embedded_files": int(pdfium.raw.FPDFDoc_GetAttachmentCount(doc)),
        "javascript": _javascript(doc, data),
    }
    images: list[bytes] = []
    rendered: list[dict[str, Any]] = []
    first, last = job["first"], job["first"] + job["render"]
    budget = job["text"]
    for index in range(first, pages):
        if index >= last and budget <= 0:
            break
        page = doc[index]
        try:
            if index < last:
                facts, image = _render(page, index + 1, job)
                rendered.append(facts)
                images.append(image)
            if budget > 0:
                frame = len(_PAGE_FRAME.format(index + 1))
                text, cut = _page_text(page, budget - frame)
                budget -= frame + len(text.encode())
                header["text"].append(text)
                if cut or (budget <= 0 and index + 1 < pages):
                    header["truncated"] = True
        finally:
            page.close()
    header["rendered"] = rendered
    return header, images


def main(argv: list[str]) -> int:
    job = json.loads(argv[0])
    faulthandler.enable()  # a crash (PDFium aborts when an allocation fails) says where
    _limit(int(job["memory"]), int(job["cpu"]))
    data = sys.stdin.buffer.read(_MAX_INPUT + 1)
    if len(data) > _MAX_INPUT:
        _fail("too_large")
        return 0
    try:
        header, images = read(data, job)
    except MemoryError:
        _fail("memory")
        return 0
    out = sys.stdout.buffer
    out.write(json.dumps(header).encode() + b"\n")
    for image in images:
        out.write(image)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
