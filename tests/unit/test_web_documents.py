"""Documents in the live view (docs/ui.md): the composer takes PDFs and text files; a PDF sent
as pages shows its first page's thumbnail (the only artifact of it served), a native one a
box with its name and page count (nothing rendered in the browser), a text file its name and
size — every name escaped."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.daemon.web import render
from orchestrator.daemon.web.app import MAX_UPLOAD_BYTES
from orchestrator.protocol.messages import AttachmentRef, MessageDoc
from tests.support import pdfs
from tests.support.web_page import SeeingRuntime, live_page

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.web_page import Page

pytestmark = pytest.mark.anyio
HOSTILE = '<img src=x onerror="alert(1)">'


async def _sent(page: Page, files: list[tuple[str, bytes, str]]) -> str:
    """Send ``files`` from the composer; the conversation fragment once it was answered."""
    sent = await page.post("/send", data={"member": "web/lead", "text": "read [Doc #1]"},
                           files=[("files", f) for f in files])
    assert sent.status_code == 200, sent.text
    with anyio.fail_after(10):
        await page.core.mailbox.wait_outcome(sent.json()["id"], "lead", 10)
    return (await page.client.get("/fragments/conversation?member=lead")).text


async def test_a_pdf_sent_as_pages_shows_its_first_page_and_serves_nothing_else_of_it(
        tmp_path: Path) -> None:
    async with live_page(tmp_path, SeeingRuntime(), vision=True, documents="pages") as page:
        await page.sign_in()
        three = pdfs.text_pdf("one", "two", "three", size=pdfs.STRIP)
        fragment = await _sent(page, [(f"{HOSTILE}.pdf", three, "application/pdf")])
        [message] = (await page.core.teams.history(None, "lead")).messages
        [doc] = message.attachments
        assert (doc.route, doc.pages, len(doc.page_variants)) == ("pages", 3, 3)
        assert "<img src=x" not in fragment and "&lt;img src=x onerror=" in fragment
        assert "[Doc #1]" in fragment and "PDF, 3 pages, sent as 3 page images" in fragment
        first = doc.page_variants[0].sha256
        assert fragment.count('src="/artifacts/') == 1 and f'src="/artifacts/{first}"' in fragment
        image = await page.client.get(f"/artifacts/{first}")
        assert image.status_code == 200 and image.headers["content-type"] == "image/png"
        for other in (doc.sha256, doc.page_variants[1].sha256, doc.original_sha256):
            assert (await page.client.get(f"/artifacts/{other}")).status_code == 404


async def test_a_native_pdf_is_a_box_and_a_text_file_its_name_and_size(tmp_path: Path) -> None:
    async with live_page(tmp_path, SeeingRuntime(), model="claude-sonnet-4-5") as page:
        await page.sign_in()
        notes = b"# notes\nhello\n"
        fragment = await _sent(page, [("spec.pdf", pdfs.text_pdf("one", "two"), "application/pdf"),
                                      (f"{HOSTILE}.md", notes, "text/markdown")])
        [message] = (await page.core.teams.history(None, "lead")).messages
        assert [(a.kind, a.route) for a in message.attachments] == [
            ("document", "native"), ("text", "native")]
        assert "/artifacts/" not in fragment, "a native document has no image to serve"
        assert '<span class="doc-icon">PDF</span>' in fragment
        assert "[Doc #1] spec.pdf — PDF, 2 pages, sent as the document itself" in fragment
        assert f"— text, {len(notes)} bytes, sent as the document itself" in fragment
        assert "<img src=x" not in fragment and "&lt;img src=x onerror=" in fragment
        pdf = message.attachments[0].sha256
        assert (await page.client.get(f"/artifacts/{pdf}")).status_code == 404


async def test_the_composer_accepts_pdfs_and_text_files_and_still_bounds_uploads(
        tmp_path: Path) -> None:
    async with live_page(tmp_path, SeeingRuntime(), vision=True) as page:
        await page.sign_in()
        shell = (await page.client.get("/")).text
        accept = shell.split('id="send-files" accept="')[1].split('"')[0]
        assert {"image/*", "application/pdf", "text/*", ".md"} <= set(accept.split(","))
        huge = await page.post("/send", data={"member": "web/lead", "text": "x"}, files={
            "files": ("big.pdf", b"%PDF-1.4\n" + b"\0" * MAX_UPLOAD_BYTES, "application/pdf")})
        assert huge.status_code == 413
        assert huge.json()["error"]["code"] == "request_too_large"
        preview = await page.post("/send", data={"member": "web/lead", "text": "x",
                                                 "preview": "1"},
                                  files={"files": ("n.md", b"# hi\n", "text/markdown")})
        assert preview.status_code == 200, preview.text
        [planned] = preview.json()["attachments"]
        assert (planned["kind"], planned["name"]) == ("text", "n.md")
        assert (await page.core.teams.history(None, "lead")).messages == []


def test_a_pdf_sent_as_text_is_a_box_and_serves_nothing() -> None:
    """A PDF that reached its member as text alone: its box says so; no artifact is served."""
    ref = AttachmentRef(name="a.pdf", number=1, sha256="ab" * 32, mime="text/plain", width=0,
                        height=0, bytes=3, original_sha256="cd" * 32, kind="document",
                        route="text", pages=1)
    message = MessageDoc(id="01J0000000000000000000000", text="t", state="answered",
                         reply=None, attempts=1, attachments=[ref], error=None)
    shown = render.conversation("lead", [message])
    assert "[Doc #1] a.pdf — PDF, 1 page, sent as its text" in shown
    assert render.shown_artifacts([message]) == set()
