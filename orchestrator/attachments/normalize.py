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
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import PIL

from orchestrator.attachments.cli_rules import patch_count, patch_fit
from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.image_limits import Limits

if TYPE_CHECKING:
    from collections.abc import Iterator

    from PIL import Image

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

OPTIMIZER_VERSION = f"teamctl-2/pillow-{PIL.__version__}"
MAX_PIXELS = 64_000_000
# The smallest downscale factor for a lossless source (a screenshot): below it, text would be
# unreadable, so the operator is asked to crop or split instead.
MIN_SCREENSHOT_SCALE = 0.18
_JPEG_QUALITIES = (90, 85)
# When no encoding fits the byte budget at the planned size: shrink by this factor, at most
# this many times (a lossless source never below MIN_SCREENSHOT_SCALE of its size).
_SHRINK_STEP = 0.85
_MAX_SHRINK_STEPS = 6
# zlib level 3: within a few percent of level 6's size for screenshots, at about 2/3 the time.
_PNG_COMPRESS_LEVEL = 3
# Pillow first reduces by an integer factor with a box filter while the remaining scale stays
# above this gap, then resamples with Lanczos: most of the speed, none of the mush.
_REDUCING_GAP = 1.3

_EXIF_ORIENTATION = 0x0112


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
    full_size: tuple[int, int] = (0, 0)  # upright size before any draft-mode reduction

def decode(data: bytes, source: Format, name: str, *, limits: Limits | None = None) -> Decoded:
    """Decode an accepted (or convertible) image safely; AttachmentError on any problem.

    With ``limits``, a JPEG is decoded straight at the smallest DCT scale that still covers
    the variant's size (libjpeg's draft mode), which is most of the work saved for photos."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = None  # teamctl checks MAX_PIXELS itself, from the header
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
    try:
        animated = bool(getattr(image, "is_animated", False))
        turned = not animated and image.getexif().get(_EXIF_ORIENTATION, 1) in (5, 6, 7, 8)
        upright = (height, width) if turned else (width, height)
        if animated:
            _load_all_frames(image, name)
        else:
            if limits is not None and image.format == "JPEG":
                _draft_jpeg(image, target_size(upright, limits), turned=turned)
            image.load()
    except (OSError, SyntaxError, ValueError, EOFError, struct.error) as exc:
        raise _corrupt(name, source, exc) from None
    warnings = []
    if source.disposition == "convert":
        warnings.append(f"format_converted: {source.name} converted to PNG")
    if animated:
        return Decoded(image, source, animated, warnings, upright)
    ImageOps.exif_transpose(image, in_place=True)
    return Decoded(_normalize_mode(image), source, animated, warnings, upright)


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


def _draft_jpeg(image: Image.Image, size: tuple[int, int], *, turned: bool) -> None:
    """Let libjpeg decode at 1/2, 1/4 or 1/8 scale when the variant is that small anyway.

    The DCT scaling still parses the whole file, so truncation is still caught."""
    stored = (size[1], size[0]) if turned else size
    image.draft(image.mode if image.mode in ("RGB", "L") else "RGB", stored)


def target_size(size: tuple[int, int], limits: Limits) -> tuple[int, int]:
    """The largest size within ``limits`` with the same aspect ratio (never upscaled); with a
    patch budget, shrunk the way codex would shrink it, so codex then leaves it alone."""
    width, height = size
    scale = _scale(size, limits)
    if scale < 1.0:
        width, height = max(1, math.floor(width * scale)), max(1, math.floor(height * scale))
    if limits.max_patches:
        width, height = patch_fit(width, height, limits.max_patches)
    return width, height


def _scale(size: tuple[int, int], limits: Limits) -> float:
    width, height = size
    return min(1.0, limits.long_edge / max(width, height),
               math.sqrt(limits.megapixels * 1_000_000 / (width * height)))


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
    """The variant for ``purpose`` within ``limits``, or AttachmentError. How it was encoded,
    when that is not the source's own kind (lossless PNG, or JPEG for a JPEG), is added to
    ``decoded.warnings``: the plan records the choice."""
    from PIL import Image
    if decoded.animated:
        return _animated_passthrough(original, decoded, purpose, limits, name)
    image = decoded.image
    width, height = decoded.full_size
    scale = _scale((width, height), limits)
    lossless_source = decoded.source.name != "JPEG"
    if lossless_source and scale < MIN_SCREENSHOT_SCALE:
        raise AttachmentError(
            "attachment_too_large_optimized",
            f"{name}: {width}×{height} would be shrunk to {scale:.0%} to fit the model "
            f"({limits.long_edge} px, {limits.megapixels:g} MP) and its text would be "
            "unreadable; crop it or split it into parts",
        )
    size = target_size((width, height), limits)
    if size != image.size:
        image = image.resize(size, Image.Resampling.LANCZOS, reducing_gap=_REDUCING_GAP)
    for step in range(_MAX_SHRINK_STEPS + 1):
        smaller = _shrunk(image, step)
        if step and lossless_source and smaller.width / width < MIN_SCREENSHOT_SCALE:
            break
        for encoding in _encodings(smaller, prefer_jpeg=not lossless_source):
            if len(encoding.data) <= limits.budget:
                decoded.warnings += _recorded(encoding, smaller, image, limits)
                return Variant(purpose, encoding.mime, smaller.width, smaller.height,
                               encoding.data)
    raise AttachmentError(
        "attachment_too_large_optimized",
        f"{name}: even at {image.width}×{image.height} it is larger than the model accepts "
        f"({limits.budget // 1000} KB) without losing legibility; crop it",
    )


def _shrunk(image: Image.Image, step: int) -> Image.Image:
    from PIL import Image
    if not step:
        return image
    factor = _SHRINK_STEP ** step
    size = (max(1, math.floor(image.width * factor)), max(1, math.floor(image.height * factor)))
    return image.resize(size, Image.Resampling.LANCZOS, reducing_gap=_REDUCING_GAP)


@dataclass(frozen=True)
class _Encoding:
    mime: str
    data: bytes = field(repr=False)
    what: str  # "" for the source's own kind; else how it was encoded, for the plan
    png_bytes: int | None = None  # the lossless PNG it replaces, when that was made


def _encodings(image: Image.Image, *, prefer_jpeg: bool) -> Iterator[_Encoding]:
    """Candidate encodings in order of preference, made lazily (the first that fits wins):
    PNG; the same pixels as a palette PNG when they have at most 256 colours (still lossless);
    then JPEG at 90, then 85 — or, for a transparent image (never a JPEG), a palette PNG
    quantized to 256 colours."""
    png: int | None = None
    if not prefer_jpeg or image.mode == "RGBA":
        data = _encode(image, "PNG")
        png = len(data)
        yield _Encoding("image/png", data, "")
        palette = _palette_png(image)
        if palette is not None:
            yield _Encoding("image/png", palette, "palette PNG (lossless: at most 256 colours)",
                            png)
        elif image.mode == "RGBA":  # no JPEG for it: fewer colours before fewer pixels
            yield _Encoding("image/png", _encode(_quantized(image), "PNG"),
                            "palette PNG of 256 colours (quantized; transparency kept)", png)
    if image.mode != "RGBA":
        for quality in _JPEG_QUALITIES:
            default = prefer_jpeg and quality == _JPEG_QUALITIES[0]
            yield _Encoding("image/jpeg", _encode(image, "JPEG", quality=quality),
                            "" if default else f"JPEG quality {quality}", png)


def _palette_png(image: Image.Image) -> bytes | None:
    """The image as a palette PNG if that loses nothing (at most 256 distinct colours)."""
    from PIL import ImageChops
    if image.mode not in ("RGB", "RGBA") or image.getcolors(256) is None:
        return None
    paletted = _quantized(image)
    if ImageChops.difference(paletted.convert(image.mode), image).getbbox() is not None:
        return None
    return _encode(paletted, "PNG")


def _quantized(image: Image.Image) -> Image.Image:
    """At most 256 colours, without dithering (median cut; fast octree where there is alpha,
    which median cut does not take)."""
    from PIL import Image
    method = Image.Quantize.FASTOCTREE if image.mode == "RGBA" else Image.Quantize.MEDIANCUT
    return image.quantize(256, method=method, dither=Image.Dither.NONE)


def _recorded(encoding: _Encoding, sent: Image.Image, planned: Image.Image,
              limits: Limits) -> list[str]:
    """What the plan records about an encoding that is not the source's own kind."""
    why = (f"the {limits.budget:,} B the member's CLI passes unchanged"
           if limits.cli_max_bytes is not None and limits.budget == limits.cli_max_bytes
           else f"the {limits.budget:,} B the model accepts")
    notes = []
    if sent.size != planned.size:
        notes.append(f"downscaled_to_fit: {sent.width}×{sent.height} instead of "
                     f"{planned.width}×{planned.height}, to fit {why}")
    if encoding.what:
        was = (f": as PNG it is {encoding.png_bytes:,} B"
               if encoding.png_bytes is not None else "")
        notes.append(f"encoded_to_fit: {encoding.what}{was}, within {why}")
    return notes


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
            and len(original) <= limits.max_bytes
            and patch_count(width, height) <= (limits.max_patches or patch_count(width, height)))
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
