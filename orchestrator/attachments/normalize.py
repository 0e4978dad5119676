"""Safe decoding and deterministic variants.

Decoding reads the header first and refuses an image above MAX_PIXELS before any pixel is
decoded (decompression bombs), then decodes fully (a truncated file is refused, never padded
with grey), applies the EXIF orientation, and normalizes the mode (CMYK, 16-bit, palette) while
keeping alpha. Variants are re-encoded without metadata (no EXIF, no GPS), sized to the model's
limits, and encoded deterministically: the same input bytes and OPTIMIZER_VERSION give the same
output bytes in any process. Screenshots stay legible: a variant that would need heavy lossy
compression or an extreme downscale is refused rather than sent as mush.
"""

from __future__ import annotations

import hashlib
import io
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import PIL
from PIL import Image, ImageOps, UnidentifiedImageError

from orchestrator.attachments.failures import AttachmentError

if TYPE_CHECKING:
    from orchestrator.attachments.sniff import Format

__all__ = [
    "MAX_PIXELS",
    "OPTIMIZER_VERSION",
    "Decoded",
    "Limits",
    "Variant",
    "decode",
    "make_variant",
]

OPTIMIZER_VERSION = f"teamctl-1/pillow-{PIL.__version__}"
MAX_PIXELS = 64_000_000
# The smallest downscale factor for a lossless source (a screenshot): below it, text would be
# unreadable, so the operator is asked to crop or split instead.
MIN_SCREENSHOT_SCALE = 0.18
_JPEG_QUALITIES = (90, 85)
_PNG_COMPRESS_LEVEL = 6

Image.MAX_IMAGE_PIXELS = None  # teamctl checks MAX_PIXELS itself, from the header, before decode


@dataclass(frozen=True)
class Limits:
    """What a model accepts for one image: long edge (px), megapixels, encoded bytes."""

    long_edge: int
    megapixels: float
    max_bytes: int

    def key(self) -> str:
        return f"{self.long_edge}px/{self.megapixels:g}MP/{self.max_bytes}B"


@dataclass(frozen=True)
class Variant:
    purpose: str
    mime: str
    width: int
    height: int
    data: bytes = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def variant_id(self, attachment_id: str) -> str:
        """``sha256(attachment_id, purpose, mime, w, h, bytes, optimizer_version)``."""
        parts = [attachment_id, self.purpose, self.mime, str(self.width), str(self.height),
                 str(len(self.data)), OPTIMIZER_VERSION]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


@dataclass
class Decoded:
    image: Image.Image
    source: Format
    animated: bool
    warnings: list[str] = field(default_factory=list)

    @property
    def has_alpha(self) -> bool:
        return self.image.mode in ("RGBA", "LA")


def decode(data: bytes, source: Format, name: str) -> Decoded:
    """Decode an accepted (or convertible) image safely; AttachmentError on any problem."""
    try:
        image = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise _corrupt(name, source, exc) from None
    width, height = image.size
    if width <= 0 or height <= 0 or width * height > MAX_PIXELS:
        raise AttachmentError(
            "attachment_dimensions_too_large",
            f"{name}: {width}×{height} pixels is more than teamctl decodes "
            f"({MAX_PIXELS // 1_000_000} megapixels); crop or resize it first",
        )
    animated = bool(getattr(image, "is_animated", False))
    if not animated:
        _draft_jpeg(image)
    try:
        if animated:
            _load_all_frames(image, name)
        else:
            image.load()
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise _corrupt(name, source, exc) from None
    warnings = []
    if source.disposition == "convert":
        warnings.append(f"format_converted: {source.name} converted to PNG")
    decoded: Image.Image = image
    if not animated:
        decoded = _normalize_mode(ImageOps.exif_transpose(image) or image)
    return Decoded(decoded, source, animated, warnings)


def _load_all_frames(image: Image.Image, name: str) -> None:
    """Decode every frame (a truncated last frame is still a corrupt file), bounded in total."""
    frames = int(getattr(image, "n_frames", 1))
    width, height = image.size
    if frames * width * height > 4 * MAX_PIXELS:
        raise AttachmentError(
            "attachment_animated_too_large",
            f"{name}: {frames} frames of {width}×{height} is too much animation to send; "
            "send a still screenshot instead",
        )
    for index in range(frames):
        image.seek(index)
        image.load()
    image.seek(0)


def _draft_jpeg(image: Image.Image) -> None:
    """Let libjpeg decode at 1/2, 1/4 or 1/8 scale when the variant will be that small anyway.

    Never below what the largest variant needs (2048 px long edge); the DCT scaling keeps the
    whole file parsed, so truncation is still caught."""
    if image.format != "JPEG":
        return
    width, height = image.size
    scale = min(1.0, 2048 / max(width, height))
    image.draft("RGB" if image.mode != "L" else "L", (math.ceil(width * scale),
                                                       math.ceil(height * scale)))


def _normalize_mode(image: Image.Image) -> Image.Image:
    mode = image.mode
    if mode in ("RGB", "RGBA", "L"):
        result = image
    elif mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        result = image.convert("I").point(lambda v: v * (1 / 256)).convert("L")
    elif mode == "P":
        result = image.convert("RGBA" if "transparency" in image.info else "RGB")
    elif mode in ("LA", "PA", "RGBa", "La"):
        result = image.convert("RGBA")
    else:  # CMYK, YCbCr, LAB, HSV, 1, F, ...
        result = image.convert("RGB")
    if result.mode == "RGBA" and result.getchannel("A").getextrema()[0] == 255:
        result = result.convert("RGB")  # an alpha channel that is fully opaque carries nothing
    return result


def make_variant(original: bytes, decoded: Decoded, purpose: str, limits: Limits,
                 name: str) -> Variant:
    """The variant for ``purpose`` within ``limits``, or AttachmentError."""
    if decoded.animated:
        return _animated_passthrough(original, decoded, purpose, limits, name)
    image = decoded.image
    width, height = image.size
    scale = min(1.0, limits.long_edge / max(width, height),
                math.sqrt(limits.megapixels * 1_000_000 / (width * height)))
    lossless_source = decoded.source.name != "JPEG"
    if lossless_source and scale < MIN_SCREENSHOT_SCALE:
        raise AttachmentError(
            "attachment_too_large_optimized",
            f"{name}: {width}×{height} would be shrunk to {scale:.0%} to fit the model "
            f"({limits.long_edge} px, {limits.megapixels:g} MP) and its text would be "
            "unreadable; crop it or split it into parts",
        )
    if scale < 1.0:
        size = (max(1, math.floor(width * scale)), max(1, math.floor(height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    for mime, data in _encodings(image, prefer_jpeg=not lossless_source):
        if len(data) <= limits.max_bytes:
            return Variant(purpose, mime, image.width, image.height, data)
    raise AttachmentError(
        "attachment_too_large_optimized",
        f"{name}: even at {image.width}×{image.height} it is larger than the model accepts "
        f"({limits.max_bytes // 1024} KiB) without losing legibility; crop it",
    )


def _encodings(image: Image.Image, *, prefer_jpeg: bool) -> list[tuple[str, bytes]]:
    """Candidate encodings in order of preference. Never a JPEG of a transparent image."""
    candidates: list[tuple[str, bytes]] = []
    if not prefer_jpeg or image.mode == "RGBA":
        candidates.append(("image/png", _encode(image, "PNG")))
    if image.mode != "RGBA":
        candidates += [("image/jpeg", _encode(image, "JPEG", quality=q)) for q in _JPEG_QUALITIES]
    return candidates


def _encode(image: Image.Image, fmt: str, *, quality: int = 90) -> bytes:
    out = io.BytesIO()
    if fmt == "PNG":
        image.save(out, "PNG", optimize=False, compress_level=_PNG_COMPRESS_LEVEL)
    else:
        image.save(out, "JPEG", quality=quality, optimize=False, progressive=False,
                   subsampling="4:2:0")
    return out.getvalue()


def _animated_passthrough(original: bytes, decoded: Decoded, purpose: str, limits: Limits,
                          name: str) -> Variant:
    width, height = decoded.image.size
    fits = (max(width, height) <= limits.long_edge
            and width * height <= limits.megapixels * 1_000_000
            and len(original) <= limits.max_bytes)
    if not fits:
        raise AttachmentError(
            "attachment_animated_too_large",
            f"{name}: an animated {decoded.source.name} of {width}×{height}, "
            f"{len(original) // 1024} KiB is larger than the model accepts "
            f"({limits.long_edge} px, {limits.megapixels:g} MP, {limits.max_bytes // 1024} KiB); "
            "send a still screenshot instead",
        )
    return Variant(purpose, decoded.source.mime, width, height, original)


def _corrupt(name: str, source: Format, exc: BaseException) -> AttachmentError:
    return AttachmentError(
        "attachment_corrupt_image",
        f"{name}: the {source.name} data is damaged or truncated; export it again",
        diagnostic=f"{type(exc).__name__}: {exc}",
    )
