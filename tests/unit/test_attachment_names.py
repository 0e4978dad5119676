"""A file whose name and content disagree (issue 45): sent as what its bytes are, and the
dry-run, the receipt and history say so (orchestrator/attachments/names.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.attachments.artifacts import ArtifactStore
from orchestrator.attachments.catalog import load_catalog
from orchestrator.attachments.names import name_warning
from orchestrator.attachments.planner import Planner, Target
from orchestrator.client.attachment_lines import sent_line
from runtimes.claude.runtime import ClaudeRuntime
from tests.support import images, pdfs
from tests.support.driver import REPO

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.attachments.variants import PlannedAttachment

NOTES = REPO / "fixtures" / "images" / "notes.png"  # "meeting notes, not an image\n"


class _NoCache:
    async def get(self, *_: object) -> None:
        return None

    async def put(self, *_: object) -> None:
        return None


def _plan(tmp_path: Path, *paths: Path) -> list[PlannedAttachment]:
    planner = Planner(ArtifactStore(tmp_path / "artifacts"), load_catalog(), _NoCache())
    target = Target("t", "lead", "claude", "claude-sonnet-4-5", None,
                    ClaudeRuntime.capabilities)
    return anyio.run(planner.plan, target, "look", list(paths))


@pytest.mark.parametrize(("name", "kind", "mime", "said"), [
    ("notes.png", "text", "text/plain", "notes.png holds text: sent as text"),
    ("scan.JPG", "document", "application/pdf", "scan.JPG holds a PDF: sent as a PDF"),
    ("shot.pdf", "image", "image/png", "shot.pdf holds a PNG image: sent as an image"),
    ("readme.md", "image", "image/webp", "readme.md holds a WebP image: sent as an image"),
    ("photo.png", "image", "image/jpeg", None),  # an image either way: it goes as one
    ("notes.txt", "text", "text/plain", None),
    ("spec.pdf", "document", "application/pdf", None),
    ("Makefile", "text", "text/plain", None),  # no extension claims nothing
    ("data.bin", "image", "image/png", None),  # nor one the table does not know
    (".png", "text", "text/plain", None),  # a dot file's name is no extension
])
def test_a_name_that_claims_another_kind_than_its_bytes_is_named_and_one_that_agrees_not(
        name: str, kind: str, mime: str, said: str | None) -> None:
    assert name_warning(name, kind, mime) == said  # type: ignore[arg-type]


def test_the_warning_shows_a_hostile_name_on_one_line_with_its_controls_as_marks() -> None:
    """A name is the sender's (or a teammate's) text: it cannot forge a second line or act on
    the terminal that prints the warning."""
    said = name_warning("a\nwarning: all clear\x1b[2J.png", "text", "text/plain")
    assert said is not None and "\n" not in said and "\x1b" not in said
    assert said.endswith("holds text: sent as text")


def test_a_text_file_named_png_is_planned_as_text_with_the_warning_on_plan_and_receipt(
        tmp_path: Path) -> None:
    """The dry-run's warnings and the journaled attachment (history, send --wait --json)
    carry it; the receipt line ends with it. A file whose name agrees carries none."""
    shot = images.screenshot_png(tmp_path / "shot.png", 400, 300)
    spec = tmp_path / "spec.pdf"
    spec.write_bytes(pdfs.text_pdf("Page one"))
    notes, image, pdf = _plan(tmp_path, NOTES, shot, spec)
    assert (notes.kind, notes.original_mime) == ("text", "text/plain")
    said = "notes.png holds text: sent as text"
    assert notes.to_wire().warnings[0] == said
    ref = notes.to_ref()
    assert ref.name_warning == said
    assert sent_line(ref.model_dump()).endswith(f"; warning: {said}")
    for agreeing in (image, pdf):
        assert agreeing.name_warning is None and agreeing.to_ref().name_warning is None
        assert "warning" not in sent_line(agreeing.to_ref().model_dump())
