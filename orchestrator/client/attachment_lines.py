"""How the CLI prints an attachment: the dry-run plan (``send --dry-run``) and a journaled
message's attachments (``history``). A document reads ``[Doc #N] name — route (pages N, page
images K)`` with what was (or would be) sent and its sha256's short form; an image its
``[Image #N]`` line; either ends with the warning of a name that claims another kind than the
bytes (docs/attachments.md). Metadata only: never the bytes, never base64 (docs/documents.md).
"""

from __future__ import annotations

from typing import Any

from orchestrator.visible import visible_line

__all__ = ["plan_lines", "sent_line"]

SHORT = 12  # a sha256's short form: its first 12 hex digits


def _name(attachment: dict[str, Any]) -> str:
    """The file's name on its line (a name may hold a newline or a control character)."""
    return visible_line(str(attachment["name"]))


def _label(attachment: dict[str, Any]) -> str:
    word = "Image" if attachment.get("kind", "image") == "image" else "Doc"
    return f"[{word} #{attachment.get('number', 1)}]"


def _document_head(attachment: dict[str, Any], page_images: int) -> str:
    """``[Doc #N] name — route (pages N, page images K)``; the parenthesis says only what
    there is (a text file has no pages, a native PDF no page images)."""
    facts = []
    if attachment.get("pages") is not None:
        facts.append(f"pages {attachment['pages']}")
    if page_images:
        facts.append(f"page images {page_images}")
    said = f" ({', '.join(facts)})" if facts else ""
    return f"{_label(attachment)} {_name(attachment)} — {attachment.get('route')}{said}"


def _variant(v: dict[str, Any], *, short: bool) -> str:
    size = f" {v['width']}x{v['height']}" if v.get("width") else ""
    sha256 = str(v["sha256"])
    return f"{v['mime']}{size} {v.get('bytes')} bytes sha256={sha256[:SHORT] if short else sha256}"


def plan_lines(attachment: dict[str, Any]) -> list[str]:
    """A planned attachment (a ``PlannedDoc``): an image's variant line (its full sha256, as
    before documents), or a document's head with what it sends, then its page images."""
    variants = attachment["variants"]
    if attachment.get("kind", "image") == "image":
        return [f"{_label(attachment)} {_name(attachment)}: {v['purpose']} "
                + _variant(v, short=False) for v in variants]
    main, pages = variants[0], variants[1:]
    lines = [f"{_document_head(attachment, len(pages))}: {_variant(main, short=True)}"]
    lines += [f"  page {n}: {_variant(v, short=True)}" for n, v in enumerate(pages, 1)]
    return lines


def sent_line(attachment: dict[str, Any]) -> str:
    """A journaled attachment (an ``AttachmentRef``) on one line, with the warning its name
    earned (``notes.png holds text: sent as text``)."""
    warning = attachment.get("name_warning")
    said = f"; warning: {visible_line(str(warning))}" if warning else ""
    if attachment.get("kind", "image") == "image":
        described = (f" (described by {attachment['described_by']})"
                     if attachment.get("described_by") else "")
        return f"{_label(attachment)} {_name(attachment)}: {_variant(attachment, short=True)}" \
            + described + said
    pages = attachment.get("page_variants") or []
    return f"{_document_head(attachment, len(pages))}: {_variant(attachment, short=True)}" \
        + said
