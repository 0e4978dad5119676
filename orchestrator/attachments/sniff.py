"""An attachment's format from its bytes only — never from the file name or a declared MIME.

Three kinds: ``image`` (magic bytes), ``document`` (a PDF, by its ``%PDF-`` signature) and
``text`` (no signature, no NUL byte, and nearly all of its first KiB printable: UTF-8 is checked
on the whole file later, by ``text``, which refuses or converts other encodings explicitly)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ACCEPTED_MIMES", "SNIFF_BYTES", "Format", "Kind", "sniff"]

SNIFF_BYTES = 1024

Disposition = Literal["accept", "convert", "refuse"]
Kind = Literal["image", "document", "text"]
ACCEPTED_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_HEIF_BRANDS = {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1"}
_AVIF_BRANDS = {b"avif", b"avis"}


@dataclass(frozen=True)
class Format:
    name: str
    mime: str
    disposition: Disposition
    kind: Kind = "image"


def sniff(head: bytes) -> Format:
    """The format of a file from its first bytes (pass at least SNIFF_BYTES)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return Format("PNG", "image/png", "accept")
    if head.startswith(b"\xff\xd8\xff"):
        return Format("JPEG", "image/jpeg", "accept")
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return Format("GIF", "image/gif", "accept")
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return Format("WebP", "image/webp", "accept")
    if head.startswith(b"BM") and len(head) >= 26:
        return Format("BMP", "image/bmp", "convert")
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return Format("TIFF", "image/tiff", "convert")
    if head.startswith(b"%PDF-"):
        return Format("PDF", "application/pdf", "accept", "document")
    if head[4:8] == b"ftyp":
        return _iso_media(head)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith(b"<") and b"<svg" in text:
        return Format("SVG", "image/svg+xml", "refuse")
    if _looks_text(head):
        return Format("text", "text/plain", "accept", "text")
    return Format("unknown", "application/octet-stream", "refuse")


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CONTROL = frozenset(range(32)) - {9, 10, 12, 13, 27}


def _looks_text(head: bytes) -> bool:
    """Text, by content: a UTF-16 byte-order mark, or no NUL and at most 2 % control bytes
    (any byte ≥ 0x80 counts as text here: the encoding is checked on the whole file)."""
    if head.startswith(_UTF16_BOMS):
        return True
    if not head or b"\x00" in head:
        return False
    controls = sum(1 for byte in head if byte in _CONTROL)
    return controls * 50 <= len(head)


def _iso_media(head: bytes) -> Format:
    brands = {head[8:12]} | {head[i:i + 4] for i in range(16, min(len(head), 64), 4)}
    if brands & _AVIF_BRANDS:
        return Format("AVIF", "image/avif", "refuse")
    if brands & _HEIF_BRANDS:
        return Format("HEIC/HEIF", "image/heic", "refuse")
    return Format("ISO media (video?)", "video/mp4", "refuse")
