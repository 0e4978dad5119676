"""How the CLI prints attachments (send --dry-run, history): a document as ``[Doc #N] name —
route (pages N, page images K)`` with short sha256s, never its bytes; an image as before."""

from __future__ import annotations

from typing import Any

from orchestrator.client.attachment_lines import plan_lines, sent_line
from orchestrator.protocol.messages import AttachmentRef, Original, PlannedDoc, VariantDoc

SHA = "ab" * 32


def _variant(purpose: str, mime: str, size: int, width: int = 0, height: int = 0,
             sha: str = SHA) -> dict[str, Any]:
    return VariantDoc(purpose=purpose, mime=mime, width=width, height=height,
                           bytes=size, sha256=sha).model_dump()


def _plan(**extra: Any) -> dict[str, Any]:
    doc = PlannedDoc(name="spec.pdf", number=2, original=Original(
        sha256=SHA, mime="application/pdf", bytes=9000), variants=[], **extra)
    return doc.model_dump()


def test_a_pdf_on_the_pages_route_says_its_route_pages_and_each_page_image() -> None:
    plan = _plan(kind="document", route="pages", pages=3)
    plan["variants"] = [_variant("document-text", "text/plain", 90, sha="cd" * 32),
                        *(_variant("codex-image-file", "image/png", 4000 + n, 1275, 1651,
                                   sha=f"{n}e" * 32) for n in (1, 2))]
    assert plan_lines(plan) == [
        "[Doc #2] spec.pdf — pages (pages 3, page images 2): text/plain 90 bytes "
        "sha256=cdcdcdcdcdcd",
        "  page 1: image/png 1275x1651 4001 bytes sha256=1e1e1e1e1e1e",
        "  page 2: image/png 1275x1651 4002 bytes sha256=2e2e2e2e2e2e"]


def test_a_native_pdf_and_a_text_file_have_one_line_each() -> None:
    native = _plan(kind="document", route="native", pages=3)
    native["variants"] = [_variant("claude-document", "application/pdf", 1125)]
    assert plan_lines(native) == [
        "[Doc #2] spec.pdf — native (pages 3): application/pdf 1125 bytes sha256=abababababab"]
    text = _plan(kind="text", route="text")
    text["variants"] = [_variant("document-text", "text/plain", 14)]
    assert plan_lines(text) == [
        "[Doc #2] spec.pdf — text: text/plain 14 bytes sha256=abababababab"]


def test_an_image_keeps_its_plan_line_with_the_full_sha256() -> None:
    plan = _plan()
    plan["variants"] = [_variant("claude-inline-image", "image/png", 500, 64, 32)]
    assert plan_lines(plan) == [
        f"[Image #2] spec.pdf: claude-inline-image image/png 64x32 500 bytes sha256={SHA}"]


def test_a_journaled_document_and_image_on_one_line_each_never_their_bytes() -> None:
    page = VariantDoc(purpose="claude-inline-image", mime="image/png", width=10,
                           height=10, bytes=5, sha256="ef" * 32)
    ref = AttachmentRef(name="spec.pdf", number=1, sha256=SHA, mime="text/plain",
                             width=0, height=0, bytes=90, original_sha256=SHA,
                             kind="document", route="pages", pages=7,
                             page_variants=[page, page]).model_dump()
    assert sent_line(ref) == ("[Doc #1] spec.pdf — pages (pages 7, page images 2): "
                              "text/plain 90 bytes sha256=abababababab")
    image = AttachmentRef(name="s.png", number=2, sha256=SHA, mime="image/png",
                               width=64, height=32, bytes=500, original_sha256=SHA,
                               described_by="claude:haiku").model_dump()
    assert sent_line(image) == ("[Image #2] s.png: image/png 64x32 500 bytes "
                                "sha256=abababababab (described by claude:haiku)")
