"""``[Image #N]`` and ``[Doc #N]`` markers: how a message's text points at its attachments.

Attachments are numbered from 1 in the order they were given, images and documents in one
sequence (``--attach shot.png --attach spec.pdf``: ``[Image #1]``, ``[Doc #2]``); the word says
the kind, and a marker whose word does not match its attachment is refused with the right one
(``--attach``/``--paste``, or a teammate's ``send_message`` attachments). Text may name them as
``[Image #N]``; the runtime then receives the images in the order the text first names them,
each right after the text that names it (Claude), or in that order with the marker text kept
(Codex, OpenCode); images the text never names follow, in the order given. A marker naming no
attachment is refused before send. In a message with no attachments, text that merely looks like
a marker is text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MARKER", "Placement", "label", "place", "unknown_markers"]

MARKER = re.compile(r"\[(Image|Doc) #(\d{1,9})\]")
_WORD = {"image": "Image", "document": "Doc", "text": "Doc"}


def label(kind: str, number: int) -> str:
    """The marker of attachment ``number`` of ``kind`` (image | document | text)."""
    return f"[{_WORD.get(kind, 'Image')} #{number}]"


@dataclass(frozen=True)
class Placement:
    """Where one attachment goes: its position as given (0-based) and the offset in the text
    right after the marker that first names it (None: after the text)."""

    position: int
    anchor: int | None


def unknown_markers(text: str, kinds: list[str]) -> list[str]:
    """The markers in ``text`` that name no attachment of theirs — a number past the last, or
    the wrong word (``[Image #2]`` for a document: the right marker is said) — in order, each
    once (none when there are no attachments: such text is just text). ``kinds``: each
    attachment's kind, in the order given."""
    if not kinds:
        return []
    unknown: list[str] = []
    for match in MARKER.finditer(text):
        number = int(match.group(2))
        wrong = match.group(0)
        if 1 <= number <= len(kinds):
            right = label(kinds[number - 1], number)
            if right == wrong:
                continue
            wrong = f"{wrong} (attachment {number} is {right})"
        if wrong not in unknown:
            unknown.append(wrong)
    return unknown


def place(text: str, count: int) -> list[Placement]:
    """The delivery order of ``count`` attachments: first-named first, then the rest as given."""
    anchors: dict[int, int] = {}
    for match in MARKER.finditer(text):
        position = int(match.group(2)) - 1
        if 0 <= position < count and position not in anchors:
            anchors[position] = match.end()
    named = [Placement(p, a) for p, a in sorted(anchors.items(), key=lambda item: item[1])]
    return named + [Placement(p, None) for p in range(count) if p not in anchors]
