"""Realistic test images: retina and 4K screenshots, a tall page, a photo.

``tests/support/images.py`` makes edge cases (EXIF, CMYK, truncation); these are for sizes. A
synthetic white page with black lines compresses to almost nothing as PNG, so it never meets a
CLI's byte rule; these carry what real captures carry — anti-aliased text at retina scale, UI
chrome, gradients and a photo-like (noisy) panel — so their PNG sizes are those of real screenshots
(a 2880×1800 one is a few MB). Deterministic: the same arguments give the same pixels (the noise
comes from a seeded ``random.Random``, the font is Pillow's bundled one).
"""

from __future__ import annotations

import random
from functools import cache

from PIL import Image, ImageDraw, ImageFont

__all__ = ["photo", "screenshot", "tall_page"]

_WORDS = ("the", "submit", "button", "is", "misaligned", "by", "three", "pixels", "when",
          "sidebar", "collapses;", "expected", "16px", "padding", "got", "13px", "in", "Safari",
          "18", "retina", "layout", "review", "comment")


@cache
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _noise(size: tuple[int, int], seed: int, *, spread: int = 90) -> Image.Image:
    """A photo-like panel: a colour gradient with seeded per-pixel noise."""
    width, height = size
    rng = random.Random(seed)
    grain = Image.frombytes("L", size, rng.randbytes(width * height))
    base = Image.linear_gradient("L").resize(size)
    red = Image.blend(base, grain, spread / 255)
    green = Image.blend(base.transpose(Image.Transpose.FLIP_LEFT_RIGHT), grain, spread / 255)
    blue = Image.blend(base.rotate(90).resize(size), grain, spread / 255)
    return Image.merge("RGB", (red, green, blue))


def _text_lines(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], scale: int,
                rng: random.Random, *, colour: tuple[int, int, int] = (30, 30, 36)) -> None:
    left, top, right, bottom = box
    font = _font(13 * scale)
    line = 20 * scale
    for y in range(top, bottom - line, line):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 14))]
        text = " ".join(words)
        while text and draw.textlength(text, font=font) > right - left:
            text = text.rsplit(" ", 1)[0]
        draw.text((left, y), text, fill=colour, font=font)


def screenshot(width: int, height: int, *, seed: int = 1) -> Image.Image:
    """A desktop app at retina scale: toolbar, sidebar, text, a code panel, a photo panel."""
    scale = 2 if width >= 2000 else 1
    rng = random.Random(seed)
    image = Image.new("RGB", (width, height), (246, 247, 249))
    draw = ImageDraw.Draw(image)
    bar = 52 * scale
    side = min(width // 5, 280 * scale)
    draw.rectangle((0, 0, width, bar), fill=(36, 41, 51))
    draw.text((16 * scale, 14 * scale), "Review · teamctl · main", fill=(230, 232, 236),
              font=_font(15 * scale))
    draw.rectangle((0, bar, side, height), fill=(232, 235, 240))
    _text_lines(draw, (12 * scale, bar + 12 * scale, side - 8 * scale, height), scale, rng,
                colour=(70, 76, 90))
    main_left = side + 24 * scale
    split = main_left + (width - main_left) * 11 // 20
    _text_lines(draw, (main_left, bar + 24 * scale, split - 24 * scale, height * 2 // 3),
                scale, rng)
    draw.rectangle((main_left, height * 2 // 3, split - 24 * scale, height - 16 * scale),
                   fill=(40, 44, 52))
    _text_lines(draw, (main_left + 12 * scale, height * 2 // 3 + 12 * scale,
                       split - 36 * scale, height - 16 * scale), scale, rng,
                colour=(171, 178, 191))
    panel = (split, bar + 24 * scale, width - 24 * scale, height * 3 // 5)
    image.paste(_noise((panel[2] - panel[0], panel[3] - panel[1]), seed), panel[:2])
    _text_lines(draw, (split, height * 3 // 5 + 16 * scale, width - 24 * scale, height),
                scale, rng)
    return image


def tall_page(width: int = 1440, height: int = 9000, *, seed: int = 2) -> Image.Image:
    """A full-page capture of a long web page: text blocks and a photo every few screens."""
    rng = random.Random(seed)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    margin = width // 8
    y = 0
    while y < height:
        block = rng.randint(600, 1100)
        if rng.random() < 0.35:
            size = (width - 2 * margin, min(block, height - y))
            image.paste(_noise(size, seed + y, spread=60), (margin, y))
        else:
            _text_lines(draw, (margin, y, width - margin, min(y + block, height)), 1, rng)
        y += block + 40
    return image


def photo(width: int = 4032, height: int = 3024, *, seed: int = 3) -> Image.Image:
    """A camera-like photo (smooth light with sensor grain): what JPEG is for."""
    return _noise((width, height), seed, spread=40)
