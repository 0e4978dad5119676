"""``[Image #N]`` and ``[Doc #N]`` markers: unknown ones are named, the delivery order
follows the text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.attachments.markers import Placement, label, place, unknown_markers


def test_markers_out_of_range_are_unknown_each_once_in_order() -> None:
    text = "see [Image #0], [Image #99], [Image #2] and [Image #0] again"
    assert unknown_markers(text, ["image"] * 2) == ["[Image #0]", "[Image #99]"]
    assert unknown_markers("[Image #1] [Image #2]", ["image"] * 2) == []


def test_text_that_looks_like_a_marker_is_text_without_attachments() -> None:
    assert unknown_markers("the log says [Image #7]", []) == []
    assert place("the log says [Image #7]", 0) == []


def test_first_named_image_comes_first_and_unnamed_ones_follow_as_given() -> None:
    text = "[Image #3] is after [Image #1]; [Image #3] again"
    assert place(text, 4) == [Placement(2, len("[Image #3]")),
                              Placement(0, text.index("[Image #1]") + len("[Image #1]")),
                              Placement(1, None), Placement(3, None)]


def test_near_misses_are_not_markers() -> None:
    for text in ("[image #1]", "[Image 1]", "[Image #]", "[Image #-1]", "Image #1"):
        assert unknown_markers(text, ["image"]) == []
        assert place(text, 1) == [Placement(0, None)]


@given(st.lists(st.integers(1, 6), max_size=8), st.integers(0, 6), st.text(max_size=20))
def test_every_attachment_is_placed_exactly_once(numbers: list[int], count: int,
                                                 filler: str) -> None:
    text = filler.join(label("image" if n % 2 else "document", n) for n in numbers)
    placements = place(text, count)
    assert sorted(p.position for p in placements) == list(range(count))
    anchors = [p.anchor for p in placements if p.anchor is not None]
    assert anchors == sorted(anchors)
    for p in placements:
        if p.anchor is not None:
            number = p.position + 1
            assert text[:p.anchor].endswith(label("image" if number % 2 else "document",
                                                  number))


def test_a_document_is_named_doc_and_the_wrong_word_is_refused_with_the_right_marker() -> None:
    """Images and documents share one numbering; the marker's word says the kind, and a
    marker with the wrong word is refused naming the right one (never silently matched)."""
    kinds = ["image", "document", "text"]
    assert unknown_markers("[Image #1] then [Doc #2] and [Doc #3]", kinds) == []
    assert unknown_markers("[Image #2] and [Doc #1]", kinds) == [
        "[Image #2] (attachment 2 is [Doc #2])", "[Doc #1] (attachment 1 is [Image #1])"]
    text = "read [Doc #2] first"
    assert place(text, 3)[0] == Placement(1, text.index("[Doc #2]") + len("[Doc #2]"))
