"""Documents (PDFs and text files): the route each recipient gets, and its variants.

Three routes (docs/documents.md):
- ``native``: the runtime carries the document itself (Claude's ``document`` block, OpenCode's
  ``file`` part, an ACP embedded resource) and the member's model reads it (the catalog's
  ``pdf``, or the operator's ``documents = "native"``), within the native page cap;
- ``pages``: the first pages rendered (PDFium, in a bounded child process) and sent as images
  through the image normaliser, its limits and the vision gate — plus the text, page by page;
- ``text``: the text alone (a text file, or a PDF's text layer, page-marked).

The choice is per recipient: the member's ``documents`` key when set (refused, typed, if that
route cannot reach it), else native where possible, then pages where the model sees images,
then text. Every variant is deterministic (same bytes and settings → same sha256), so a lost
artifact is rebuilt at delivery and checked against the journal.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.normalize import OPTIMIZER_VERSION, Limits
from orchestrator.attachments.pdf import PdfLimits, PdfReading, RenderedPage, read_pdf
from orchestrator.attachments.text import TEXT_INLINE_BYTES, clip, decode_text
from orchestrator.attachments.variants import PlannedVariant, Route

if TYPE_CHECKING:
    from orchestrator.attachments.catalog import VisionEntry
    from orchestrator.attachments.sniff import Format
    from orchestrator.contracts import Capabilities

__all__ = ["DOCUMENT_VERSION", "Derived", "DocumentRules", "Recipient", "Route",
           "delivered_text", "derive_document", "page_marked", "rebuild"]

PDF = "application/pdf"
TEXT = "text/plain"
DOCUMENT_VERSION = f"teamctl-doc-1/{OPTIMIZER_VERSION}"


@dataclass(frozen=True)
class DocumentRules:
    """A member's document settings: the route it asked for (``documents``), and the page caps
    (``document_pages``: at most ``native`` pages sent natively, ``rendered`` rendered)."""

    prefer: Route | None = None
    native_pages: int = 100
    rendered_pages: int = 20


@dataclass(frozen=True)
class Derived:
    """What a recipient gets for one document: the route, the page count (PDFs), the main
    variant (the PDF or text itself when native; the page-marked text otherwise), the page
    images (``pages``), and each variant's bytes, to store."""

    route: Route
    pages: int | None
    variant: PlannedVariant
    page_variants: tuple[PlannedVariant, ...]
    warnings: tuple[str, ...]
    blobs: tuple[bytes, ...]


@dataclass(frozen=True)
class Recipient:
    runtime: str
    member: str
    capabilities: Capabilities
    entry: VisionEntry
    rules: DocumentRules
    image_purpose: str


def derive_document(data: bytes, fmt: Format, name: str, to: Recipient) -> Derived:
    """The route and variants of one document for one recipient; AttachmentError if none fits."""
    if fmt.kind == "text":
        return _text_file(data, name, to)
    return _pdf(data, name, to)


def page_marked(texts: tuple[str, ...], truncated: bool, pages: int) -> str:
    """A PDF's text with a marker before each page (``--- page N ---``), and a last line
    saying where the text stops when it does not reach the end."""
    body = "".join(f"--- page {n} ---\n{t.strip()}\n" for n, t in enumerate(texts, 1))
    if truncated or len(texts) < pages:
        body += (f"--- the text stops here (page {len(texts)} of {pages}): the rest is over "
                 f"the {TEXT_INLINE_BYTES // 1024} KiB inline budget ---\n")
    return body


def _text_file(data: bytes, name: str, to: Recipient) -> Derived:
    decoded = decode_text(data, name)
    text, cut = clip(decoded.text)
    warnings = decoded.warnings
    if cut:
        warnings += (f"{name}: {len(data):,} bytes of text; the first "
                     f"{len(text.encode()):,} are sent (the inline budget is "
                     f"{TEXT_INLINE_BYTES // 1024} KiB): attach an excerpt for the rest",)
    native = TEXT in to.capabilities.document_mimes and to.rules.prefer != "text"
    route: Route = "native" if native else "text"
    variant = _variant(data, f"{to.runtime}-document" if native else "document-text", TEXT,
                       text.encode())
    return Derived(route, None, variant, (), warnings, (text.encode(),))


def _pdf(data: bytes, name: str, to: Recipient) -> Derived:
    route = _pdf_route(to)
    if route == "native":
        too_big = _over_payload(data, to.capabilities)
        reading = read_pdf(data, name, PdfLimits(render_pages=0, max_text_bytes=0))
        if reading.pages <= to.rules.native_pages and too_big is None:
            variant = _variant(data, f"{to.runtime}-document", PDF, data)
            return Derived("native", reading.pages, variant, (), _notes(name, reading), ())
        why = too_big or (f"it has {reading.pages} pages, over the {to.rules.native_pages} "
                          "this member takes natively (document_pages.native)")
        if to.rules.prefer == "native":
            raise _route_refused(to, name, why)
        derived = _derived(data, name, to, _derived_route(to))
        return replace(derived, warnings=(f"{name}: not sent natively: {why}",
                                          *derived.warnings))
    return _derived(data, name, to, route)


def _over_payload(data: bytes, caps: Capabilities) -> str | None:
    """Why the PDF cannot travel inline in one turn of this runtime (None: it can)."""
    if not caps.inline_base64 or caps.max_payload_bytes is None:
        return None
    size = 4 * -(-len(data) // 3)
    if size <= caps.max_payload_bytes:
        return None
    return (f"its base64 ({size // (1024 * 1024)} MiB) is over the "
            f"{caps.max_payload_bytes // (1024 * 1024)} MiB one turn carries")


def _pdf_route(to: Recipient) -> Route:
    caps, entry, prefer = to.capabilities, to.entry, to.rules.prefer
    if prefer == "native":
        if PDF not in caps.document_mimes:
            raise _route_refused(to, None, f"the {to.runtime} runtime cannot carry a PDF")
        if entry.pdf is False:
            raise _route_refused(to, None, f"{entry.model} cannot read PDFs "
                                 f"(source: {entry.pdf_source})")
        return "native"
    if prefer == "pages":
        if not _sees_images(to):
            raise _route_refused(to, None, "its model cannot see images (the pages route "
                                 "sends each page as an image)")
        return "pages"
    if prefer == "text":
        return "text"
    if PDF in caps.document_mimes and entry.pdf is True:
        return "native"
    return _derived_route(to)


def _derived_route(to: Recipient) -> Route:
    if to.rules.prefer == "text":
        return "text"
    return "pages" if _sees_images(to) else "text"


def _sees_images(to: Recipient) -> bool:
    return to.capabilities.image_input and to.entry.image_input is True


def _derived(data: bytes, name: str, to: Recipient, route: Route) -> Derived:
    render = to.rules.rendered_pages if route == "pages" else 0
    made = _pdf_variants(data, name, render, to.entry.limits, to.image_purpose)
    reading, has_text = made.reading, made.has_text
    warnings = _notes(name, reading)
    if route == "text" and not has_text:
        raise AttachmentError(
            "attachment_document_no_text",
            f"{name}: has no text layer (a scan?) and member {to.member!r} gets PDFs as text "
            "(its model cannot see images, or documents = \"text\"); run OCR on it (e.g. "
            "ocrmypdf) or send it to a member with a vision model")
    if not has_text:
        warnings += (f"{name}: has no text layer (a scan?): only its page images are sent",)
    if made.page_notes:  # one page's note stands for the rest (they differ only in the page)
        more = len(made.page_notes) - 1
        warnings += (made.page_notes[0] + (f" (and {more} more such note(s))" if more else ""),)
    if route == "pages" and reading.pages > len(made.page_variants):
        warnings += (f"{name}: pages 1–{len(made.page_variants)} of {reading.pages} are sent as "
                     f"images (document_pages.rendered = {to.rules.rendered_pages}); the text "
                     "covers the rest",)
    variant = _variant(data, "document-text", TEXT, made.text)
    return Derived(route, reading.pages, variant, made.page_variants, warnings,
                   (made.text, *made.page_blobs))


@dataclass(frozen=True)
class _PdfVariants:
    reading: PdfReading
    text: bytes
    has_text: bool
    page_variants: tuple[PlannedVariant, ...]
    page_blobs: tuple[bytes, ...]
    page_notes: tuple[str, ...]


def _pdf_variants(data: bytes, name: str, render: int, limits: Limits,
                  image_purpose: str) -> _PdfVariants:
    """A PDF's page-marked text and its first ``render`` pages as image variants (made by the
    reader from PDFium's pixels with the image pipeline's own code: ``pdf_worker``)."""
    reading = read_pdf(data, name, PdfLimits(
        render_pages=render, long_edge=limits.long_edge,
        max_pixels=int(limits.megapixels * 1_000_000), purpose=image_purpose, image=limits))
    text = page_marked(reading.page_texts, reading.text_truncated, reading.pages).encode()
    pdf_id = hashlib.sha256(data).hexdigest()
    variants = tuple(_page_variant(pdf_id, page, image_purpose, limits)
                     for page in reading.rendered)
    notes = tuple(f"{name} page {page.number}: {note}" for page in reading.rendered
                  for note in page.notes)
    return _PdfVariants(reading, text, any(t.strip() for t in reading.page_texts), variants,
                        reading.images, notes)


def _page_variant(pdf_id: str, page: RenderedPage, purpose: str,
                  limits: Limits) -> PlannedVariant:
    variant_id = hashlib.sha256("\0".join([
        pdf_id, f"page {page.number}", purpose, page.mime, str(page.width), str(page.height),
        str(len(page.data)), DOCUMENT_VERSION]).encode()).hexdigest()[:32]
    return PlannedVariant(variant_id, purpose, hashlib.sha256(page.data).hexdigest(), page.mime,
                          page.width, page.height, len(page.data), limits)


def rebuild(data: bytes, fmt: Format, name: str, main: PlannedVariant,
            pages: tuple[PlannedVariant, ...]) -> dict[str, bytes]:
    """A document's variants made again from its original (an artifact was lost): sha256 →
    bytes. Deterministic, so the caller compares them with the journal's sha256."""
    if fmt.kind == "text":
        return {main.sha256: clip(decode_text(data, name).text)[0].encode()}
    if main.mime == PDF:
        return {hashlib.sha256(data).hexdigest(): data}
    limits = pages[0].limits if pages else Limits(2000, 4.0, 0)
    made = _pdf_variants(data, name, len(pages), limits,
                         pages[0].purpose if pages else "document-page")
    blobs = (made.text, *made.page_blobs)
    return {hashlib.sha256(blob).hexdigest(): blob for blob in blobs}


def delivered_text(label: str, name: str, route: Route, pages: int | None, images: int,
                   text: str) -> str:
    """What a member reads for a document that reaches it as text (routes pages and text):
    a line saying what it is and what came as images, its text, and where it ends."""
    if pages is None:
        head = f"{label} {name} (a text file):"
    elif route == "pages" and images:
        head = (f"{label} {name} (a PDF of {pages} page{'s' if pages != 1 else ''}): pages 1 "
                f"to {images} are the {images} page image{'s' if images != 1 else ''} sent with "
                "this message, in order; its text, page by page:")
    else:
        head = f"{label} {name} (a PDF of {pages} page{'s' if pages != 1 else ''}), as text:"
    return f"{head}\n{text.rstrip()}\n--- end of {label} ---"


def _notes(name: str, reading: PdfReading) -> tuple[str, ...]:
    notes = []
    if reading.javascript:
        notes.append(f"{name}: holds JavaScript ({reading.javascript} action(s)): never run")
    if reading.embedded_files:
        notes.append(f"{name}: holds {reading.embedded_files} embedded file(s): not extracted, "
                     "not sent")
    return tuple(notes)


def _variant(original: bytes, purpose: str, mime: str, data: bytes) -> PlannedVariant:
    digest = hashlib.sha256(data).hexdigest()
    variant_id = hashlib.sha256("\0".join([
        hashlib.sha256(original).hexdigest(), purpose, mime, str(len(data)),
        DOCUMENT_VERSION]).encode()).hexdigest()[:32]
    return PlannedVariant(variant_id, purpose, digest, mime, 0, 0, len(data),
                          Limits(0, 0.0, 0))


def _route_refused(to: Recipient, name: str | None, why: str) -> AttachmentError:
    what = name or "a PDF"
    return AttachmentError(
        "attachment_document_route_unsupported",
        f"{what} cannot reach member {to.member!r} as documents = {to.rules.prefer!r}: {why}; "
        "change documents in the team file (native | pages | text), or remove it and let "
        "teamctl choose")
