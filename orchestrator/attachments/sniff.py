"""Image format from magic bytes only — never from the file name or a declared MIME."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ACCEPTED_MIMES", "SNIFF_BYTES", "Format", "sniff"]

SNIFF_BYTES = 1024

Disposition = Literal["accept", "convert", "refuse"]
ACCEPTED_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_HEIF_BRANDS = {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1"}
_AVIF_BRANDS = {b"avif", b"avis"}


@dataclass(frozen=True)
class Format:
    name: str
    mime: str
    disposition: Disposition


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
        return Format("PDF", "application/pdf", "refuse")
    if head[4:8] == b"ftyp":
        return _iso_media(head)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith(b"<") and b"<svg" in text:
        return Format("SVG", "image/svg+xml", "refuse")
    if text.startswith(b"<?xml"):
        return Format("XML", "application/xml", "refuse")
    return Format("unknown", "application/octet-stream", "refuse")


def _iso_media(head: bytes) -> Format:
    brands = {head[8:12]} | {head[i:i + 4] for i in range(16, min(len(head), 64), 4)}
    if brands & _AVIF_BRANDS:
        return Format("AVIF", "image/avif", "refuse")
    if brands & _HEIF_BRANDS:
        return Format("HEIC/HEIF", "image/heic", "refuse")
    return Format("ISO media (video?)", "video/mp4", "refuse")
