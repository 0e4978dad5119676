"""Test images made on the fly (Pillow), one function per edge case of the seeds' matrix."""

from __future__ import annotations

import functools
import io
import re
import struct
import zlib
from typing import TYPE_CHECKING

from PIL import Image, ImageDraw

if TYPE_CHECKING:
    from pathlib import Path


def screenshot(width: int = 3840, height: int = 2160) -> Image.Image:
    """A white screenshot with lines of black text."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    for y in range(0, height, 40):
        draw.text((20, y), f"line {y}: the submit button is misaligned by 3px", fill="black")
    return image


@functools.cache
def _screenshot_png(width: int, height: int) -> bytes:
    return plain_png(screenshot(width, height))


def screenshot_png(path: Path, width: int = 3840, height: int = 2160) -> Path:
    """``screenshot(width, height)`` as a PNG at ``path`` (``plain_png``), made once per
    process."""
    path.write_bytes(_screenshot_png(width, height))
    return path


def save(image: Image.Image, path: Path, fmt: str | None = None, **params: object) -> Path:
    image.save(path, fmt, **params)
    return path


def png_bytes(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def transparent_png(path: Path) -> Path:
    image = Image.new("RGBA", (400, 300), (0, 0, 0, 0))
    ImageDraw.Draw(image).rectangle((50, 50, 350, 250), fill=(255, 0, 0, 128))
    return save(image, path, "PNG")


def exif_rotated_jpeg(path: Path) -> Path:
    """Stored 400×200 (wide, red on the left); EXIF orientation 6 means: rotate 90° clockwise,
    so it displays 200×400 (tall, red on top)."""
    image = Image.new("RGB", (400, 200), "blue")
    ImageDraw.Draw(image).rectangle((0, 0, 199, 199), fill="red")
    exif = Image.Exif()
    exif[0x0112] = 6
    exif[0x8825] = {1: "N", 2: (52.0, 31.0, 0.0)}  # GPS: must not survive
    return save(image, path, "JPEG", exif=exif.tobytes(), quality=95)


def cmyk_jpeg(path: Path) -> Path:
    return save(Image.new("CMYK", (300, 200), (0, 255, 255, 0)), path, "JPEG")


def grey16_png(path: Path) -> Path:
    image = Image.new("I;16", (256, 64))
    image.putdata([x * 256 for _ in range(64) for x in range(256)])
    return save(image, path, "PNG")


def palette_transparent_png(path: Path) -> Path:
    image = Image.new("P", (100, 100), 0)
    image.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    ImageDraw.Draw(image).rectangle((25, 25, 75, 75), fill=1)
    image.info["transparency"] = 0
    return save(image, path, "PNG", transparency=0)


def truncated_png(path: Path) -> Path:
    data = png_bytes(screenshot(800, 600))
    path.write_bytes(data[: len(data) // 2])
    return path


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(
        ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def _png(ihdr: bytes, idat: bytes) -> bytes:
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat)
            + _chunk(b"IEND", b""))


_COLOUR_TYPES = {"L": (0, 1), "RGB": (2, 3), "RGBA": (6, 4)}  # PNG colour type, bytes a pixel


def plain_png(image: Image.Image, *, level: int = 1) -> bytes:
    """An L, RGB or RGBA image as a PNG written directly: filter "none" on every row, zlib at
    ``level`` (0 stores: the fastest for noise, which nothing compresses). Pixel for pixel what
    Pillow writes, in half its time or less (Pillow tries five filters a row): for inputs whose
    encoding no test is about."""
    colour_type, depth = _COLOUR_TYPES[image.mode]
    width, height = image.size
    pixels, stride = memoryview(image.tobytes()), width * depth
    rows = b"".join(b"\x00" + pixels[at:at + stride] for at in range(0, len(pixels), stride))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return _png(ihdr, zlib.compress(rows, level))


def png_header_declaring(path: Path, width: int, height: int) -> Path:
    """A valid PNG signature and IHDR declaring width×height, then a tiny IDAT and IEND."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(_png(ihdr, zlib.compress(b"\x00" * 16)))
    return path


def black_png(path: Path, width: int, height: int) -> Path:
    """A real, complete PNG of a black 1-bit width×height image (every row present: Pillow
    decodes it, pixel for pixel what ``Image.new("1", size)`` saves), written with zlib
    directly: Pillow's encoder takes seconds for 20000×20000."""
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte "none", then the packed bits
    packer = zlib.compressobj(1)
    rows_at_once = 1000
    parts = [packer.compress(row * rows_at_once) for _ in range(height // rows_at_once)]
    parts += [packer.compress(row * (height % rows_at_once)), packer.flush()]
    path.write_bytes(_png(struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0), b"".join(parts)))
    return path


def heic(path: Path) -> Path:
    path.write_bytes(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"\x00" * 64)
    return path


def avif(path: Path) -> Path:
    path.write_bytes(b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf" + b"\x00" * 64)
    return path


def svg(path: Path) -> Path:
    path.write_text('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
                    'width="10" height="10"><rect width="10" height="10"/></svg>\n')
    return path


def animated_gif(path: Path, size: tuple[int, int] = (64, 64), frames: int = 4) -> Path:
    """``frames`` frames of one colour each. Made as one-colour palette images: the bytes Pillow
    writes for the same frames in RGB, without quantizing every frame to a palette first."""
    images = []
    for i in range(frames):
        image = Image.new("P", size, 0)
        image.putpalette((i * 60 % 256, 255 - i * 60 % 256, 0))
        images.append(image)
    images[0].save(path, "GIF", save_all=True, append_images=images[1:], duration=100, loop=0)
    return path


def reported(reply: str) -> list[dict[str, str]]:
    """What a fake runtime said it received, per image (``image: mime=… width=… sha256=…``)."""
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in reply.splitlines()
            if line.startswith("image: ")]
