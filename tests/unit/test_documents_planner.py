"""Documents through the planner, the journal, the loader and the turn (issue 31): the gate asks
about images only when there are images, each recipient gets its own route, the journal keeps
the route and the pages, a lost artifact is rebuilt to the same bytes, and the turn carries a
document natively or as its pages with its text after everything else."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.attachments.artifacts import ArtifactStore
from orchestrator.attachments.catalog import load_catalog
from orchestrator.attachments.failures import AttachmentRefused
from orchestrator.attachments.loader import VariantLoader
from orchestrator.attachments.planner import Planner, Target
from orchestrator.contracts import DocumentPart, DocumentText, ImagePart
from orchestrator.daemon.migrations import MIGRATIONS
from orchestrator.daemon.queue._delivery import ATTACHMENT_COLUMNS, attachment_of, attachment_row
from runtimes.claude.runtime import ClaudeRuntime
from runtimes.codex.runtime import CodexRuntime
from tests.support import images, pdfs

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.attachments.variants import PlannedAttachment


class _NoCache:
    async def get(self, *_: object) -> None:
        return None

    async def put(self, *_: object) -> None:
        return None


def _plan(tmp_path: Path, target: Target, paths: list[Path],
          text: str = "read it") -> list[PlannedAttachment]:
    planner = Planner(ArtifactStore(tmp_path / "artifacts"), load_catalog(), _NoCache())
    return anyio.run(planner.plan, target, text, paths)


def _claude(vision: bool | None = None) -> Target:
    return Target("t", "lead", "claude", "claude-sonnet-4-5", vision, ClaudeRuntime.capabilities)


def _codex(vision: bool | None = None) -> Target:
    return Target("t", "rev", "codex", "gpt-5.4-mini", vision, CodexRuntime.capabilities)


@pytest.fixture
def spec_pdf(tmp_path: Path) -> Path:
    path = tmp_path / "spec.pdf"
    path.write_bytes(pdfs.text_pdf("Page one", "Page two", "Page three", size=pdfs.STRIP))
    return path


def test_the_catalog_says_which_models_read_pdfs_and_who_says_so() -> None:
    catalog = load_catalog()
    claude = catalog.lookup("claude", "claude-sonnet-4-5")
    assert (claude.pdf, claude.pdf_source) == (True, "anthropic-pdf")
    assert catalog.lookup("claude", "some-future-model").pdf is True  # the runtime's default
    assert catalog.lookup("codex", "gpt-5.4-mini").pdf is False
    assert catalog.lookup("opencode", "anthropic/claude-sonnet-4-5").pdf is True
    assert catalog.lookup("opencode", "openrouter/moonshotai/kimi-k2.6").pdf is None
    assert catalog.lookup("claude", None, operator_vision=False).pdf is True


def test_a_pdf_to_a_text_only_member_is_its_text_not_a_vision_refusal(tmp_path: Path,
                                                                      spec_pdf: Path) -> None:
    """The vision gate is about images: a PDF alone reaches a member whose model cannot see
    images as its text; an image in the same message is still refused, naming the gate."""
    [planned] = _plan(tmp_path, _codex(vision=False), [spec_pdf])
    assert (planned.kind, planned.route, planned.pages) == ("document", "text", 3)
    assert planned.page_variants == ()
    shot = images.screenshot_png(tmp_path / "shot.png", 400, 300)
    with pytest.raises(AttachmentRefused) as info:
        _plan(tmp_path, _codex(vision=False), [spec_pdf, shot])
    assert [f.code for f in info.value.failures] == ["attachment_model_vision_unsupported"]


def test_each_recipient_gets_its_own_route(tmp_path: Path, spec_pdf: Path) -> None:
    [native] = _plan(tmp_path, _claude(), [spec_pdf])
    assert (native.route, native.variant.mime, native.variant.sha256) == (
        "native", "application/pdf", native.original_sha256)
    [pages] = _plan(tmp_path, _codex(), [spec_pdf])
    assert pages.route == "pages" and len(pages.page_variants) == 3
    assert {v.purpose for v in pages.page_variants} == {"codex-image-file"}
    assert pages.variant.mime == "text/plain"
    text = ArtifactStore(tmp_path / "artifacts").get(pages.variant.sha256).decode()
    assert "--- page 2 ---\nPage two" in text


def test_a_wrong_marker_word_is_refused_with_the_right_one(tmp_path: Path,
                                                           spec_pdf: Path) -> None:
    with pytest.raises(AttachmentRefused) as info:
        _plan(tmp_path, _claude(), [spec_pdf], text="look at [Image #1]")
    [failure] = info.value.failures
    assert failure.code == "attachment_marker_unknown"
    assert "[Doc #1]" in failure.message


def test_a_document_row_round_trips_through_the_journal(tmp_path: Path, spec_pdf: Path) -> None:
    [planned] = _plan(tmp_path, _codex(), [spec_pdf])
    db = sqlite3.connect(":memory:")
    db.row_factory = sqlite3.Row
    for script in MIGRATIONS:
        db.executescript(script.replace(";", ";\n"))
    db.execute("INSERT INTO messages (id, team, text, created_at) VALUES ('m', 't', 'x', 0)")
    db.execute(f"INSERT INTO message_attachments ({ATTACHMENT_COLUMNS}) VALUES "
               f"({','.join('?' * len(ATTACHMENT_COLUMNS.split(',')))})",
               attachment_row("m", "rev", planned))
    row = db.execute(f"SELECT {ATTACHMENT_COLUMNS} FROM message_attachments").fetchone()
    assert attachment_of(row) == planned


def test_a_lost_page_artifact_is_rebuilt_to_the_same_bytes(tmp_path: Path,
                                                           spec_pdf: Path) -> None:
    [planned] = _plan(tmp_path, _codex(), [spec_pdf])
    store = ArtifactStore(tmp_path / "artifacts")
    page = planned.page_variants[1]
    before = store.get(page.sha256)
    store.path(page.sha256).unlink()
    store.path(planned.variant.sha256).unlink()
    data, pages = anyio.run(VariantLoader(store).load_document, planned)
    assert [p.sha256 for p in pages] == [v.sha256 for v in planned.page_variants]
    assert pages[1].data == before and store.get(page.sha256) == before
    assert "--- page 1 ---" in data.decode()


def _turn_parts(tmp_path: Path, planned: list[PlannedAttachment], text: str
                ) -> tuple[object, ...]:
    from orchestrator.daemon.mailbox._turns import TurnDelivery
    from orchestrator.daemon.queue import Delivery

    runner = TurnDelivery.__new__(TurnDelivery)
    runner._loader = VariantLoader(ArtifactStore(tmp_path / "artifacts"))
    delivery = Delivery("m", "t", "rev", text, "prepared", 1, None, None, None, None, ())
    turn = anyio.run(runner._prepare, delivery, planned)
    return turn.parts


def test_a_native_document_is_one_part_at_its_marker(tmp_path: Path, spec_pdf: Path) -> None:
    [planned] = _plan(tmp_path, _claude(), [spec_pdf], text="see [Doc #1] please")
    _, document = _turn_parts(tmp_path, [planned], "see [Doc #1] please")
    assert isinstance(document, DocumentPart)
    assert (document.mime, document.pages, document.number) == ("application/pdf", 3, 1)
    assert document.anchor == len("see [Doc #1]")
    assert document.data == spec_pdf.read_bytes()


def test_derived_pages_come_at_the_marker_and_the_text_after_everything(
        tmp_path: Path, spec_pdf: Path) -> None:
    shot = images.screenshot_png(tmp_path / "shot.png", 400, 300)
    text = "[Doc #1] then [Image #2]"
    planned = _plan(tmp_path, _codex(), [spec_pdf, shot], text=text)
    parts = _turn_parts(tmp_path, planned, text)
    kinds = [type(p).__name__ for p in parts]
    assert kinds == ["TextPart", "ImagePart", "ImagePart", "ImagePart", "ImagePart",
                     "DocumentText"]
    pages = [p for p in parts[1:4] if isinstance(p, ImagePart)]
    assert [p.sha256 for p in pages] == [v.sha256 for v in planned[0].page_variants]
    assert {(p.number, p.anchor) for p in pages} == {(1, len("[Doc #1]"))}
    doc_text = parts[-1]
    assert isinstance(doc_text, DocumentText)
    assert doc_text.text.startswith("[Doc #1] spec.pdf (a PDF of 3 pages): pages 1 to 3")
    assert doc_text.text.endswith("--- end of [Doc #1] ---")
    assert doc_text.original == spec_pdf.read_bytes() and doc_text.path is not None


def test_a_pdf_too_big_for_one_turn_goes_as_pages_or_is_refused_when_native_is_asked(
        tmp_path: Path, spec_pdf: Path) -> None:
    """A PDF whose base64 is over what one turn of the runtime carries is not sent natively:
    it goes as its pages and text, the plan says why; with documents = "native" it is refused
    (typed) rather than sent in a way the runtime cannot carry."""
    from dataclasses import replace

    from orchestrator.attachments.documents import DocumentRules

    small = replace(ClaudeRuntime.capabilities, max_payload_bytes=4 * 1024 * 1024)
    big = tmp_path / "big.pdf"
    big.write_bytes(spec_pdf.read_bytes() + b"%" + b"x" * (3 * 1024 * 1024) + b"\n")
    target = Target("t", "lead", "claude", "claude-sonnet-4-5", None, small)
    [planned] = _plan(tmp_path, target, [big])
    assert planned.route == "pages" and len(planned.page_variants) == 3
    assert any("not sent natively" in w and "MiB one turn carries" in w
               for w in planned.warnings)
    native = replace(target, documents=DocumentRules(prefer="native"))
    with pytest.raises(AttachmentRefused) as info:
        _plan(tmp_path, native, [big])
    assert [f.code for f in info.value.failures] == ["attachment_document_route_unsupported"]
