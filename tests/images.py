"""Test images made on the fly (Pillow), one function per edge case of the seeds' matrix."""

from __future__ import annotations

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


def png_header_declaring(path: Path, width: int, height: int) -> Path:
    """A valid PNG signature and IHDR declaring width×height, then a tiny IDAT and IEND."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))
    path.write_bytes(data)
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
    images = [Image.new("RGB", size, (i * 60 % 256, 255 - i * 60 % 256, 0)) for i in range(frames)]
    images[0].save(path, "GIF", save_all=True, append_images=images[1:], duration=100, loop=0)
    return path


def reported(reply: str) -> list[dict[str, str]]:
    """What a fake runtime said it received, per image (``image: mime=… width=… sha256=…``)."""
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in reply.splitlines()
            if line.startswith("image: ")]
