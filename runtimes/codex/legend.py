"""Which image is which, in Codex's own numbering.

Codex labels the images of a turn ``[Image #1]``, ``[Image #2]``… by their order in the turn
(captured with codex 0.171.0: ``<image name=[Image #K] path=…>``), while teamctl numbers a
message's attachments as given, images and documents in one sequence, and sends them in the order
the text names them — and a PDF's rendered pages are images too. So "[Image #2]" in the text can
be another picture than Codex's [Image #2]. When the two numberings differ, the turn carries one
line that maps Codex's labels onto the message's (docs/documents.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.contracts import ImagePart

if TYPE_CHECKING:
    from orchestrator.contracts import Turn

__all__ = ["legend"]


def legend(turn: Turn) -> str | None:
    """The mapping line, or None when Codex's numbering is the message's."""
    images = [p for p in turn.parts if isinstance(p, ImagePart)]
    if all(p.page is None and p.number == k for k, p in enumerate(images, 1)):
        return None
    runs: list[tuple[int, int, ImagePart, ImagePart]] = []  # first, last position; parts
    for position, part in enumerate(images, 1):
        if runs:
            first, _, head, tail = runs[-1]
            if (part.page is not None and tail.page is not None and part.number == tail.number
                    and part.page == tail.page + 1):
                runs[-1] = (first, position, head, part)
                continue
        runs.append((position, position, part, part))
    said = [_said(first, last, head, tail) for first, last, head, tail in runs]
    return ("(The images of this message are numbered here by their order, which is not the "
            "text's numbering: " + "; ".join(said) + ".)")


def _said(first: int, last: int, head: ImagePart, tail: ImagePart) -> str:
    which = f"[Image #{first}]" if first == last else f"[Image #{first}] to [Image #{last}]"
    if head.page is None:
        return f"{which} is the text's [Image #{head.number}]"
    pages = f"page {head.page}" if head is tail else f"pages {head.page}–{tail.page}"
    return f"{which} {'is' if first == last else 'are'} {pages} of [Doc #{head.number}]"
