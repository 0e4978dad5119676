"""Text attachments: UTF-8 checked on the whole file, other encodings refused or converted
explicitly, and a bounded variant.

UTF-8 passes (its byte-order mark dropped); UTF-16 with a byte-order mark is converted to UTF-8
and the plan says so; anything else that is not valid UTF-8 is refused with the offset of the
first bad byte and the command that converts it — teamctl never guesses an encoding. A text
larger than the inline budget is cut (at a line end where one is near) and the plan says how
much was kept: a model's context is the real limit, and a silent cut would be a lie.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from orchestrator.attachments.failures import AttachmentError

__all__ = ["TEXT_INLINE_BYTES", "DecodedText", "clip", "decode_text"]

TEXT_INLINE_BYTES = 256 * 1024  # of one document's text sent inline (~64k tokens)


@dataclass(frozen=True)
class DecodedText:
    text: str
    warnings: tuple[str, ...]


def decode_text(data: bytes, name: str) -> DecodedText:
    """The file as text; AttachmentError (``attachment_text_encoding``) if it is not UTF-8
    (or UTF-16 with a byte-order mark), or holds NUL characters (binary, not text)."""
    warnings: tuple[str, ...] = ()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise _not_utf8(name, exc, "UTF-16") from None
        warnings = (f"{name}: converted from UTF-16 to UTF-8",)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _not_utf8(name, exc, "UTF-8") from None
    if "\x00" in text:
        raise AttachmentError(
            "attachment_unsupported_mime",
            f"{name}: holds NUL characters: it is binary, not text; teamctl sends images, PDFs "
            "and UTF-8 text")
    return DecodedText(text, warnings)


def clip(text: str, limit_bytes: int = TEXT_INLINE_BYTES) -> tuple[str, bool]:
    """``text`` within ``limit_bytes`` of UTF-8, cut after a line end in its last quarter if
    there is one (else at a character boundary); and whether anything was cut."""
    encoded = text.encode()
    if len(encoded) <= limit_bytes:
        return text, False
    head = encoded[:limit_bytes].decode("utf-8", errors="ignore")  # drops a split character
    line_end = head.rfind("\n")
    if line_end >= len(head) * 3 // 4:
        head = head[:line_end + 1]
    return head, True


def _not_utf8(name: str, exc: UnicodeDecodeError, expected: str) -> AttachmentError:
    bad = exc.object[exc.start:exc.start + 1].hex()
    return AttachmentError(
        "attachment_text_encoding",
        f"{name}: is not {expected} text (byte 0x{bad} at offset {exc.start}); teamctl does not "
        f"guess encodings: convert it (e.g. iconv -f LATIN1 -t UTF-8 {name} > converted.txt) "
        "and attach the converted file")
