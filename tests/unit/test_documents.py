"""Documents (issue 31, docs/documents.md): the route each recipient gets — native where the
runtime carries the document and the model reads it, else rendered pages plus page-marked text
where the model sees images, else text — the member's ``documents`` key refused (typed) where
its route cannot reach the member, the page caps, text encodings and the inline budget, and
deterministic variants (the same bytes give the same sha256s, again at rebuild)."""

from __future__ import annotations

import codecs
import hashlib
import tracemalloc
from dataclasses import replace

import pytest

from orchestrator.attachments.catalog import VisionEntry, load_catalog
from orchestrator.attachments.documents import (
    Derived,
    DocumentRules,
    Recipient,
    delivered_text,
    derive_document,
    rebuild,
)
from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.normalize import Limits
from orchestrator.attachments.sniff import sniff
from orchestrator.attachments.text import TEXT_INLINE_BYTES
from orchestrator.contracts import Capabilities
from runtimes.claude.runtime import ClaudeRuntime
from runtimes.codex.runtime import CodexRuntime
from tests.support import pdfs

PDF_MIME, TEXT_MIME = "application/pdf", "text/plain"
THREE = pdfs.text_pdf("one", "two", "three", size=pdfs.STRIP)
FIVE = pdfs.many_pages_pdf(5, size=pdfs.STRIP)
TEXT_ONLY_CAPS = Capabilities(image_input=False)


def _entry(runtime: str, **changes: object) -> VisionEntry:
    return replace(load_catalog().lookup(runtime, "default"), **changes)  # type: ignore[arg-type]


def claude(**rules: object) -> Recipient:
    """Claude-like: the runtime carries PDFs and text natively; the catalog says pdf = true."""
    return Recipient("claude", "lead", ClaudeRuntime.capabilities, _entry("claude"),
                     DocumentRules(**rules), "claude-inline-image")  # type: ignore[arg-type]


def codex(**rules: object) -> Recipient:
    """Codex-like: no native documents, a vision model."""
    return Recipient("codex", "coder", CodexRuntime.capabilities, _entry("codex"),
                     DocumentRules(**rules), "codex-image-file")  # type: ignore[arg-type]


def text_only(**rules: object) -> Recipient:
    """A model that sees no images, on a runtime that carries no document natively."""
    entry = VisionEntry("acp", "text-model", False, Limits(2000, 4.0, 5_000_000), "operator",
                        None)
    return Recipient("acp", "reader", TEXT_ONLY_CAPS, entry,
                     DocumentRules(**rules), "acp-image")  # type: ignore[arg-type]


def derive(data: bytes, to: Recipient, name: str = "spec.pdf") -> Derived:
    return derive_document(data, sniff(data[:1024]), name, to)


def refused(data: bytes, to: Recipient, name: str = "spec.pdf") -> AttachmentError:
    with pytest.raises(AttachmentError) as caught:
        derive(data, to, name)
    assert not caught.value.failure.retryable
    return caught.value


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the route matrix ----------------------------------------------------------------------------

def test_a_claude_like_member_gets_the_pdf_itself() -> None:
    """Native: the variant is the PDF's own bytes, the page count known, nothing rendered."""
    derived = derive(THREE, claude())
    assert derived.route == "native" and derived.pages == 3
    assert derived.variant.mime == PDF_MIME and derived.variant.sha256 == _sha(THREE)
    assert derived.page_variants == () and derived.warnings == ()


def test_a_codex_like_member_gets_page_images_and_the_page_marked_text() -> None:
    """No native PDF, a vision model: each page an image (through the image normaliser) and
    the text page by page."""
    derived = derive(THREE, codex())
    assert derived.route == "pages" and derived.pages == 3
    assert [v.mime for v in derived.page_variants] == ["image/png"] * 3
    assert all(v.purpose == "codex-image-file" for v in derived.page_variants)
    assert derived.variant.mime == TEXT_MIME
    assert derived.blobs[0].decode() == ("--- page 1 ---\none\n--- page 2 ---\ntwo\n"
                                         "--- page 3 ---\nthree\n")
    assert derived.warnings == ()


def test_a_text_only_model_gets_the_text() -> None:
    derived = derive(THREE, text_only())
    assert derived.route == "text" and derived.page_variants == ()
    assert b"--- page 3 ---\nthree\n" in derived.blobs[0]


@pytest.mark.parametrize(("to", "why"), [
    (codex(prefer="native"), "the codex runtime cannot carry a PDF"),
    (replace(claude(prefer="native"), entry=_entry("claude", pdf=False, pdf_source="operator")),
     "cannot read PDFs (source: operator)"),
    (text_only(prefer="pages"), "its model cannot see images"),
], ids=["native-runtime-cannot", "native-model-pdf-false", "pages-text-only-model"])
def test_a_documents_key_the_member_cannot_take_is_refused(to: Recipient, why: str) -> None:
    """``documents = "native"`` where the runtime cannot carry a PDF or the model's pdf is
    false, ``"pages"`` for a model that sees no images: refused, saying why and what to set."""
    refusal = refused(THREE, to)
    assert refusal.failure.code == "attachment_document_route_unsupported"
    assert why in refusal.failure.message
    assert "change documents in the team file" in refusal.failure.message


def test_documents_text_sends_a_claude_member_the_text() -> None:
    derived = derive(THREE, claude(prefer="text"))
    assert derived.route == "text" and derived.variant.mime == TEXT_MIME


def test_over_the_native_page_cap_a_pdf_is_derived_with_a_warning() -> None:
    """Over ``document_pages.native`` (teamctl choosing): the pages route, and the plan says
    why the PDF was not sent itself."""
    derived = derive(FIVE, claude(native_pages=3))
    assert derived.route == "pages" and derived.pages == 5
    assert derived.warnings[0] == ("spec.pdf: not sent natively: it has 5 pages, over the 3 "
                                   "this member takes natively (document_pages.native)")


def test_over_the_native_page_cap_documents_native_is_refused() -> None:
    refusal = refused(FIVE, claude(prefer="native", native_pages=3))
    assert refusal.failure.code == "attachment_document_route_unsupported"
    assert "it has 5 pages, over the 3 this member takes natively" in refusal.failure.message


def test_the_rendered_page_cap_renders_the_first_pages_and_says_so() -> None:
    derived = derive(FIVE, codex(rendered_pages=2))
    assert len(derived.page_variants) == 2 and derived.pages == 5
    assert ("spec.pdf: pages 1–2 of 5 are sent as images (document_pages.rendered = 2); the "
            "text covers the rest") in derived.warnings
    assert b"--- page 5 ---\nPage 5 of 5\n" in derived.blobs[0]


def test_a_pdf_without_a_text_layer_warns_on_pages_and_is_refused_as_text() -> None:
    """A scan (image-only pages): its page images go with a warning; a member that would get
    only its text is refused, told to run OCR."""
    scan = pdfs.image_only_pdf(2)
    derived = derive(scan, codex(), "scan.pdf")
    assert derived.route == "pages" and len(derived.page_variants) == 2
    assert ("scan.pdf: has no text layer (a scan?): only its page images are sent"
            in derived.warnings)
    refusal = refused(scan, text_only(), "scan.pdf")
    assert refusal.failure.code == "attachment_document_no_text"
    assert "ocrmypdf" in refusal.failure.message


# -- text files ----------------------------------------------------------------------------------

def test_utf8_with_a_byte_order_mark_is_sent_without_it() -> None:
    data = codecs.BOM_UTF8 + "naïve café\n".encode()
    for to, route in ((claude(), "native"), (codex(), "text")):
        derived = derive(data, to, "notes.md")
        assert derived.route == route and derived.pages is None
        assert derived.blobs == ("naïve café\n".encode(),) and derived.warnings == ()


def test_utf16_with_a_byte_order_mark_is_converted_and_the_plan_says_so() -> None:
    derived = derive(codecs.BOM_UTF16_LE + "日本語 notes\n".encode("utf-16-le"), codex(), "n.txt")
    assert derived.blobs == ("日本語 notes\n".encode(),)
    assert derived.warnings == ("n.txt: converted from UTF-16 to UTF-8",)


def test_latin1_text_is_refused_with_the_offset_and_the_iconv_hint() -> None:
    refusal = refused("façade\n".encode("latin-1"), codex(), "old.txt")
    assert refusal.failure.code == "attachment_text_encoding"
    assert "byte 0xe7 at offset 2" in refusal.failure.message
    assert "iconv -f LATIN1 -t UTF-8 old.txt" in refusal.failure.message


def test_text_holding_nul_is_refused_as_binary() -> None:
    """(A NUL in the first KiB already fails the sniff: this one comes later.)"""
    refusal = refused(b"text\n" * 400 + b"then\x00binary\n", codex(), "blob.txt")
    assert refusal.failure.code == "attachment_unsupported_mime"
    assert "NUL" in refusal.failure.message


def test_five_mb_of_text_is_clipped_to_the_budget_at_a_line_end() -> None:
    line = "a log line of some length, with a number: 12345\n"
    data = (line * (5_000_000 // len(line))).encode()
    derived = derive(data, codex(), "big.log")
    sent = derived.blobs[0]
    assert TEXT_INLINE_BYTES * 3 // 4 <= len(sent) <= TEXT_INLINE_BYTES
    assert sent.endswith(b"\n") and data.startswith(sent)
    assert derived.warnings == (f"big.log: {len(data):,} bytes of text; the first "
                                f"{len(sent):,} are sent (the inline budget is 256 KiB): "
                                "attach an excerpt for the rest",)


def test_a_19_mib_single_line_is_clipped_at_a_character_boundary_in_bounded_memory() -> None:
    """No newline to cut at: the cut falls on a character boundary (never half of a 2-byte
    character), and planning holds a bounded multiple of the file (tracemalloc: ~2×, the peak
    of Python's UTF-8 decoder; the intake caps an original at 20 MiB)."""
    data = b"x" + "é".encode() * (19 * 1024 * 1024 // 2)  # the budget's end splits an é
    assert len(data[:TEXT_INLINE_BYTES].decode(errors="ignore").encode()) < TEXT_INLINE_BYTES
    tracemalloc.start()
    try:
        derived = derive(data, codex(), "one-line.txt")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    sent = derived.blobs[0]
    assert len(sent) == TEXT_INLINE_BYTES - 1 and data.startswith(sent)
    assert sent.decode() == "x" + "é" * ((TEXT_INLINE_BYTES - 2) // 2)
    assert peak < 2.5 * len(data)


def test_what_a_member_reads_for_a_derived_document() -> None:
    """The pages route says which images are the pages; the text route says it is text."""
    pages = delivered_text("[Doc #2]", "spec.pdf", "pages", 3, 2, "--- page 1 ---\none\n")
    assert pages == ("[Doc #2] spec.pdf (a PDF of 3 pages): pages 1 to 2 are the 2 page images "
                     "sent with this message, in order; its text, page by page:\n"
                     "--- page 1 ---\none\n--- end of [Doc #2] ---")
    assert delivered_text("[Doc #1]", "n.md", "text", None, 0, "hi\n") == (
        "[Doc #1] n.md (a text file):\nhi\n--- end of [Doc #1] ---")


# -- determinism and rebuild ---------------------------------------------------------------------

def _hashes(derived: Derived) -> list[str]:
    return [v.sha256 for v in (derived.variant, *derived.page_variants)]


@pytest.mark.parametrize(("data", "to"), [
    (THREE, codex()), (THREE, claude()), (THREE, text_only()),
    ("notes ✓\n".encode(), claude()), ("notes ✓\n".encode(), codex()),
], ids=["pages", "native-pdf", "text-pdf", "native-text", "text-file"])
def test_the_same_document_derives_the_same_sha256s_and_rebuilds_them(
        data: bytes, to: Recipient) -> None:
    """Deterministic: derived twice, the same sha256s (page images included); ``rebuild`` (a
    lost artifact) gives back every planned sha256, and its bytes hash to it."""
    first, second = derive(data, to), derive(data, to)
    assert _hashes(first) == _hashes(second)
    made = rebuild(data, sniff(data[:1024]), "spec.pdf", first.variant, first.page_variants)
    for digest in _hashes(first):
        assert _sha(made[digest]) == digest

