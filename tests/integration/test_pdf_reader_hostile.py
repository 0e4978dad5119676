"""Hostile PDFs (issue 31, docs/documents.md "Hostile files"): each is a typed refusal or a
bounded derivation, read in the PDF reader's child process — and this process (standing in for
the daemon) is alive afterwards with no reader left behind. The reader's limits are settings:
these tests give it small ones, so none waits out a production limit.

Which is which (the docs table says the same): encrypted → refused (decrypt hint); a million
pages → counted, at most ``render_pages`` rendered, the text stopped at its budget; a field-sized
page (also with /UserUnit) → rendered within the image limits; objects nested 100k deep →
read (PDFium caps its parser's depth); a 1 GiB decompression stream → refused on memory (the
address-space cap stops it); JavaScript and embedded files → counted, a plan warning, never run
or extracted; bytes after ``%PDF-`` that are no PDF → attachment_corrupt_document.

The subject is the reader's process — its address-space and CPU caps, its deadline, its kill —
so these are the integration layer's (docs/dev/testing.md), not the in-process unit layer's."""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING

import pypdfium2 as pdfium
import pytest
from PIL import Image

from orchestrator.attachments.catalog import load_catalog
from orchestrator.attachments.documents import DocumentRules, Recipient, derive_document
from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.pdf import FORK_SERVER, PdfLimits, PdfReading, read_pdf
from orchestrator.attachments.sniff import sniff
from orchestrator.attachments.text import TEXT_INLINE_BYTES
from runtimes.claude.runtime import ClaudeRuntime
from runtimes.codex.runtime import CodexRuntime
from tests.support import pdfs
from tests.support.processes import children_of

if TYPE_CHECKING:
    from collections.abc import Iterator

MIB = 1024 * 1024
# small limits: a runaway reader is stopped in a second or two, never at the production 60 s
LIMITS = PdfLimits(render_pages=2, memory_bytes=512 * MIB, cpu_seconds=10, deadline=60.0)
MILLION = 1_000_000


@pytest.fixture(autouse=True)
def _no_reader_left_behind() -> Iterator[None]:
    before = set(children_of(os.getpid()))
    yield
    server = FORK_SERVER.pid  # it stays, between reads; what it forked does not
    assert set(children_of(os.getpid())) <= before | {server}, \
        "a PDF reader outlived its read_pdf call"
    if server is not None:  # its status is told once reaped: nothing of it is left
        assert children_of(server) == [], "a forked PDF reader outlived its read_pdf call"


def _refused(data: bytes, limits: PdfLimits = LIMITS) -> AttachmentError:
    with pytest.raises(AttachmentError) as caught:
        read_pdf(data, "hostile.pdf", limits)
    return caught.value


def _read(data: bytes, limits: PdfLimits = LIMITS) -> PdfReading:
    return read_pdf(data, "hostile.pdf", limits)


def _recipient(runtime: str) -> Recipient:
    caps = {"claude": ClaudeRuntime.capabilities, "codex": CodexRuntime.capabilities}[runtime]
    entry = load_catalog().lookup(runtime, "default")
    return Recipient(runtime, "m", caps, entry, DocumentRules(rendered_pages=2),
                     caps.image_purpose)


def _derive(data: bytes, runtime: str = "codex") -> tuple[str, tuple[str, ...], bytes]:
    derived = derive_document(data, sniff(data[:1024]), "hostile.pdf", _recipient(runtime))
    return derived.route, derived.warnings, b"".join(derived.blobs)


def test_an_encrypted_pdf_is_refused_with_the_decrypt_hint() -> None:
    """A password-protected PDF is refused, typed, saying how to make a copy without it."""
    data = pdfs.encrypted_pdf("the secret plan", user_password="pw")
    with pdfium.PdfDocument(data, password="pw") as doc:  # the fixture is really encrypted
        assert "the secret plan" in doc[0].get_textpage().get_text_range()
    refusal = _refused(data)
    assert refusal.failure.code == "attachment_document_encrypted"
    assert "qpdf --decrypt" in refusal.failure.message
    assert not refusal.failure.retryable


def test_a_million_pages_in_a_tiny_file_are_counted_not_all_read() -> None:
    """A page tree whose /Kids repeat one page a million times (a 13 KB file): the count is
    reported, at most ``render_pages`` are rendered, the text stops at its byte budget."""
    data = pdfs.repeated_kids_pdf(MILLION)
    assert len(data) < 20_000
    reading = _read(data)
    assert reading.pages == MILLION
    assert len(reading.images) == LIMITS.render_pages
    assert sum(len(t.encode()) for t in reading.page_texts) <= LIMITS.max_text_bytes
    assert len(reading.page_texts) < MILLION and reading.text_truncated


def test_a_million_empty_pages_stop_at_the_text_budget_not_at_the_cpu_cap() -> None:
    """Pages with no text still cost the text budget (their page marker): a million empty
    pages are not each loaded looking for text until the CPU cap kills the reader."""
    data = pdfs.repeated_kids_pdf(MILLION).replace(b"(the same page, again)", b"()")
    reading = _read(data, PdfLimits(render_pages=0, cpu_seconds=5, memory_bytes=512 * MIB))
    assert reading.pages == MILLION
    assert reading.text_truncated
    assert len(reading.page_texts) <= LIMITS.max_text_bytes // len("--- page 1 ---\n")


def test_the_page_marked_text_of_a_million_pages_stays_within_the_inline_budget() -> None:
    """The text variant (page markers included) is within the 256 KiB inline budget, plus the
    one line saying where it stops."""
    derived = derive_document(pdfs.repeated_kids_pdf(MILLION), sniff(b"%PDF-"), "big.pdf",
                              _recipient("codex"))
    assert derived.route == "pages" and derived.pages == MILLION
    assert len(derived.page_variants) == 2
    assert derived.variant.bytes <= TEXT_INLINE_BYTES + 200
    text = derived.blobs[0].decode()
    assert text.rstrip().endswith("inline budget ---")
    assert any(f"pages 1–2 of {MILLION}" in w for w in derived.warnings)


@pytest.mark.parametrize("user_unit", [None, 75000.0])
def test_a_field_sized_page_is_rendered_within_the_image_limits(user_unit: float | None) -> None:
    """A 14400 × 14400 pt page (200 in; with /UserUnit 75000, ~16 km on a side) renders at the
    scale that fits ``long_edge`` and ``max_pixels``, never at its own size."""
    limits = PdfLimits(render_pages=1, long_edge=2000, max_pixels=4_000_000,
                       memory_bytes=512 * MIB, cpu_seconds=10)
    reading = _read(pdfs.huge_page_pdf(14400, 14400, user_unit=user_unit), limits)
    with Image.open(io.BytesIO(reading.images[0])) as page:
        width, height = page.size
    assert max(width, height) <= limits.long_edge
    assert width * height <= limits.max_pixels
    assert reading.page_texts == ("a field-sized page",)


def test_objects_nested_100k_deep_are_read_bounded() -> None:
    """Arrays and dictionaries nested 100,000 deep, in the page and in its content stream: the
    reader survives them (PDFium caps its parser's depth) and reads the page."""
    reading = _read(pdfs.nested_pdf(100_000))
    assert reading.pages == 1
    assert reading.page_texts[0].strip() == "nested"
    assert len(reading.images) == 1


def test_a_1_gib_decompression_stream_is_refused_on_memory_saying_where() -> None:
    """A ~1 MB file whose content stream inflates to 1 GiB: the address-space cap stops the
    reader (PDFium aborts when an allocation fails) — refused, typed, naming the memory cap,
    with where it stopped in the diagnostic (logged, redacted)."""
    data = pdfs.flate_bomb_pdf(1 << 30)
    assert len(data) < 1_100_000
    refusal = _refused(data, PdfLimits(render_pages=1, memory_bytes=512 * MIB, cpu_seconds=10))
    assert refusal.failure.code == "attachment_document_unreadable"
    assert "more than 512 MiB" in refusal.failure.message
    assert "decompression bomb" in refusal.failure.message
    assert "get_page" in refusal.failure.diagnostic


def test_a_decompression_bomb_sent_natively_is_never_inflated_here() -> None:
    """The native route reads only the page count: the bomb's pages are never loaded by
    teamctl (the model's API reads the PDF itself)."""
    route, warnings, _ = _derive(pdfs.flate_bomb_pdf(1 << 30), runtime="claude")
    assert route == "native" and warnings == ()


def test_javascript_is_counted_never_run() -> None:
    """A script run on open and a document-level script: the plan warns, the page is read."""
    route, warnings, blobs = _derive(pdfs.javascript_pdf("has a script"))
    assert route == "pages"
    assert [w for w in warnings if "JavaScript" in w] == [
        "hostile.pdf: holds JavaScript (2 action(s)): never run"]
    assert b"has a script" in blobs


def test_javascript_run_on_open_alone_is_warned_about() -> None:
    """A script only in the catalog's /OpenAction (not in the /JavaScript name tree, the one
    place PDFium's count looks) is still warned about."""
    data = pdfs.javascript_pdf("opens a script", document_level=False)
    route, warnings, _ = _derive(data)
    assert route == "pages"
    assert "hostile.pdf: holds JavaScript (1 action(s)): never run" in warnings


def test_an_embedded_file_is_counted_never_extracted() -> None:
    """An embedded file is a plan warning; its bytes are in no variant."""
    data = pdfs.embedded_file_pdf("has an attachment", payload=b"echo pwned-by-attachment")
    for runtime in ("claude", "codex"):
        route, warnings, blobs = _derive(data, runtime)
        assert "hostile.pdf: holds 1 embedded file(s): not extracted, not sent" in warnings
        assert b"pwned-by-attachment" not in blobs
        assert route == ("native" if runtime == "claude" else "pages")


@pytest.mark.parametrize("data", [
    b"%PDF-1.7\n" + bytes(range(256)) * 40,
    pdfs.text_pdf("one", "two", "three")[:300],
], ids=["garbage", "truncated"])
def test_bytes_after_the_signature_that_are_no_pdf_are_a_corrupt_document(data: bytes) -> None:
    """A file that starts ``%PDF-`` but is no PDF (garbage, or cut short) is refused, typed."""
    refusal = _refused(data)
    assert refusal.failure.code == "attachment_corrupt_document"
    assert "export it again" in refusal.failure.message


def test_a_reader_over_its_cpu_cap_is_refused() -> None:
    """A reader asked to read every page's text of a million pages runs into its CPU cap (a
    setting: 1 s here) and is refused, typed."""
    refusal = _refused(pdfs.repeated_kids_pdf(MILLION), PdfLimits(
        render_pages=0, max_text_bytes=1 << 30, memory_bytes=512 * MIB, cpu_seconds=1))
    assert refusal.failure.code == "attachment_document_unreadable"
    assert "more than 1 s of CPU" in refusal.failure.message


def test_a_reader_past_its_deadline_is_killed_and_refused() -> None:
    """The wall deadline (a setting) ends a reader that is still going: refused, and the
    reader is gone (the autouse check)."""
    refusal = _refused(pdfs.repeated_kids_pdf(MILLION), PdfLimits(
        render_pages=0, max_text_bytes=1 << 30, memory_bytes=512 * MIB, cpu_seconds=60,
        deadline=0.5))
    assert refusal.failure.code == "attachment_document_unreadable"
    assert "longer than 0.5 s" in refusal.failure.message
