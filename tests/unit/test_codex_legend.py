"""Codex numbers a turn's images by their order (``<image name=[Image #K]>``, captured with
codex 0.171.0); teamctl numbers a message's attachments as given and sends them in the order the
text names them, a PDF's pages being images too. When the numberings differ, the turn says
which of Codex's images is which — and only then."""

from __future__ import annotations

from pathlib import Path

from orchestrator.contracts import ImagePart, TextPart, Turn
from runtimes.codex.legend import legend


def _image(number: int, page: int | None = None) -> ImagePart:
    return ImagePart("image/png", 10, 10, f"{number}{page}".ljust(64, "0"), b"x",
                     Path("/x.png"), number=number, page=page)


def test_images_in_their_own_order_need_no_mapping() -> None:
    turn = Turn("m", (TextPart("look at [Image #1] and [Image #2]"), _image(1), _image(2)))
    assert legend(turn) is None


def test_images_named_out_of_order_are_mapped_to_the_texts_numbers() -> None:
    """'is [Image #3] wider than [Image #1]?' reached codex as its [Image #1] = the text's #3
    (found by the documents e2e): the line says so."""
    turn = Turn("m", (TextPart("is [Image #3] wider than [Image #1]?"), _image(3), _image(1),
                      _image(2)))
    assert legend(turn) == (
        "(The images of this message are numbered here by their order, which is not the "
        "text's numbering: [Image #1] is the text's [Image #3]; [Image #2] is the text's "
        "[Image #1]; [Image #3] is the text's [Image #2].)")


def test_a_documents_pages_are_one_run_and_a_later_image_keeps_the_texts_number() -> None:
    turn = Turn("m", (TextPart("compare [Doc #1] with [Image #2]"), _image(1, 1), _image(1, 2),
                      _image(1, 3), _image(2)))
    assert legend(turn) == (
        "(The images of this message are numbered here by their order, which is not the "
        "text's numbering: [Image #1] to [Image #3] are pages 1–3 of [Doc #1]; [Image #4] is "
        "the text's [Image #2].)")


def test_both_transports_put_the_mapping_right_after_the_message_text(tmp_path: Path) -> None:
    from runtimes.codex.app_server import CodexAppServer
    from runtimes.codex.exec import CodexMember

    turn = Turn("m", (TextPart("see [Image #2]"), _image(2), _image(1),
                      TextPart("[Doc #3] notes.md (a text file):\nhi")))
    items = CodexAppServer._input(CodexAppServer.__new__(CodexAppServer), turn)
    assert [i["type"] for i in items] == ["text", "text", "localImage", "localImage", "text"]
    assert items[1]["text"].startswith("(The images of this message")
    process = CodexMember.__new__(CodexMember)
    text, images = CodexMember._split(process, turn)
    assert text.split("\n\n")[1].startswith("(The images of this message")
    assert len(images) == 2
