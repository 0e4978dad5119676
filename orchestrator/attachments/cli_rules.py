"""What each CLI does to an image before its model's API sees it (docs/attachments.md, "What
each CLI does to an image"; captures in protocols/bytes.md).

The planner plans inside these rules so the CLI passes the variant through byte for byte (the
bytes teamctl shows are the bytes the model saw). Where a planned variant still falls outside
them (an animated image passed through whole), ``cli_transform`` says what the CLI will make of
it, and that is what the receipt, ``history --json`` and the live view show instead of "as sent".

- Claude Code (stream-json ``image`` blocks): an image over 500 KiB of decoded bytes is
  re-encoded to a JPEG under 500 KiB; a long edge over 2000 px is downscaled to 2000.
- Codex (``--image`` files, app-server ``localImage``): ``detail: high`` resizes anything over
  2048 px or over 2,500 patches of 32×32 px (``codex-rs/utils/image``,
  ``prompt_image_output_dimensions``); ``detail: original`` over 6000 px or 10,000 patches. It
  keeps PNG, JPEG and WebP bytes when it does not resize, and re-encodes anything else to PNG.
- OpenCode (``file`` parts): passes every image through.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.attachments.image_limits import Limits

__all__ = [
    "CLAUDE_REENCODE_OVER_BYTES",
    "PATCH",
    "cli_transform",
    "codex_output_size",
    "patch_count",
    "patch_fit",
]

PATCH = 32
CLAUDE_PURPOSE = "claude-inline-image"
CODEX_PURPOSE = "codex-image-file"
# Claude Code re-encodes an image block whose decoded size is over 500 KiB (captured: 511,580 B
# passed unchanged, 514,275 B became a JPEG) and downscales a long edge over 2000 px.
CLAUDE_REENCODE_OVER_BYTES = 500 * 1024
CLAUDE_LONG_EDGE = 2000
# codex-rs/utils/image: HIGH_DETAIL_MAX_DIMENSION / _MAX_PATCHES, ORIGINAL_DETAIL_...
_CODEX_HIGH = (2048, 2_500)
_CODEX_ORIGINAL = (6000, 10_000)
_CODEX_KEEPS = frozenset({"image/png", "image/jpeg", "image/webp"})


def patch_count(width: int, height: int) -> int:
    """How many 32×32 patches an image of this size is cut into (partial ones count)."""
    return math.ceil(width / PATCH) * math.ceil(height / PATCH)


def patch_fit(width: int, height: int, max_patches: int) -> tuple[int, int]:
    """The size codex shrinks ``width``×``height`` to for a patch budget: scale by area, then
    round the patch grid down so the floored size stays within the budget."""
    if patch_count(width, height) <= max_patches:
        return width, height
    scale = math.sqrt(PATCH * PATCH * max_patches / width / height)  # codex's order of operations
    wide, high = width * scale / PATCH, height * scale / PATCH
    scale *= min(math.floor(wide) / wide, math.floor(high) / high)
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def codex_output_size(width: int, height: int, max_dimension: int,
                      max_patches: int) -> tuple[int, int]:
    """codex's ``prompt_image_output_dimensions_for_limits``: unchanged when it fits, else the
    long edge capped (rounded), then the patch budget applied."""
    def fits(w: int, h: int) -> bool:
        return max(w, h) <= max_dimension and patch_count(w, h) <= max_patches

    if fits(width, height):
        return width, height
    cap = min(1.0, max_dimension / max(width, height))
    width, height = max(1, round(width * cap)), max(1, round(height * cap))
    if fits(width, height):
        return width, height
    return patch_fit(width, height, max_patches)


def cli_transform(purpose: str, mime: str, width: int, height: int, size: int,
                  limits: Limits) -> str | None:
    """What the member's CLI will do to this variant before the API sees it; None when it
    passes it through unchanged (the planner's aim)."""
    if purpose == CLAUDE_PURPOSE:
        return _claude(mime, width, height, size)
    if purpose == CODEX_PURPOSE:
        return _codex(mime, width, height, limits)
    return None


def _claude(mime: str, width: int, height: int, size: int) -> str | None:
    long_edge = max(width, height)
    if size <= CLAUDE_REENCODE_OVER_BYTES and long_edge <= CLAUDE_LONG_EDGE:
        return None
    scale = min(1.0, CLAUDE_LONG_EDGE / long_edge)
    w, h = round(width * scale), round(height * scale)
    still = " (a still image)" if mime in ("image/gif", "image/webp") else ""
    return (f"re-encoded by the CLI to a JPEG of {w}×{h} under 500 KiB{still}: Claude Code "
            f"re-encodes images over 500 KiB or {CLAUDE_LONG_EDGE} px")


def _codex(mime: str, width: int, height: int, limits: Limits) -> str | None:
    dimension, patches = (_CODEX_ORIGINAL if (limits.max_patches or 0) > _CODEX_HIGH[1]
                          else _CODEX_HIGH)
    size = codex_output_size(width, height, dimension, patches)
    if size == (width, height) and mime in _CODEX_KEEPS:
        return None
    kind = mime.removeprefix("image/").upper() if mime in _CODEX_KEEPS else "PNG"
    return (f"re-encoded by the CLI to a {kind} of {size[0]}×{size[1]}: codex resizes images "
            f"over {dimension} px or {patches:,} patches of {PATCH} px")
