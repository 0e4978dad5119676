"""Intake, sniffing and normalization against the seeds' edge-case matrix."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image

from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.intake import read_original
from orchestrator.attachments.normalize import Limits, decode, make_variant
from orchestrator.attachments.sniff import sniff
from tests.support import images, screens

CLAUDE = Limits(1568, 1.15, 3_932_160)


def _variant(path: Path, limits: Limits = CLAUDE):  # type: ignore[no-untyped-def]
    data = read_original(path).data
    decoded = decode(data, sniff(data[:1024]), path.name)
    return make_variant(data, decoded, "claude-inline-image", limits, path.name), decoded


def _code(exc: pytest.ExceptionInfo[AttachmentError]) -> str:
    return exc.value.failure.code


def _open(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


# -- sniffing: magic bytes only ----------------------------------------------------------------

@pytest.mark.parametrize(("make", "name", "disposition"), [
    (lambda p: images.save(images.screenshot(10, 10), p, "PNG"), "PNG", "accept"),
    (lambda p: images.save(images.screenshot(10, 10), p, "JPEG"), "JPEG", "accept"),
    (lambda p: images.save(images.screenshot(10, 10), p, "GIF"), "GIF", "accept"),
    (lambda p: images.save(images.screenshot(10, 10), p, "WEBP"), "WebP", "accept"),
    (lambda p: images.save(images.screenshot(10, 10), p, "BMP"), "BMP", "convert"),
    (lambda p: images.save(images.screenshot(10, 10), p, "TIFF"), "TIFF", "convert"),
    (images.svg, "SVG", "refuse"),
    (images.heic, "HEIC/HEIF", "refuse"),
    (images.avif, "AVIF", "refuse"),
    (lambda p: p.write_bytes(b"%PDF-1.7\n%\xe2\xe3\n") and p, "PDF", "accept"),  # a document
    (lambda p: p.write_text("just some text, named .png") and p, "text", "accept"),  # text
    (lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00") and p, "unknown", "refuse"),
    (lambda p: p.write_bytes(b"") and p, "unknown", "refuse"),
])
def test_sniff_uses_magic_bytes_not_the_name(tmp_path: Path, make, name: str,  # type: ignore[no-untyped-def]
                                             disposition: str) -> None:
    path = tmp_path / "shot.png"  # every file lies about being a PNG
    make(path)
    found = sniff(path.read_bytes()[:1024])
    assert (found.name, found.disposition) == (name, disposition)


# -- intake ----------------------------------------------------------------------------------

def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    with pytest.raises(AttachmentError) as info:
        read_original(fifo)  # would block forever if opened for a plain read
    assert _code(info) == "attachment_not_a_regular_file" and "FIFO" in info.value.message


def test_a_directory_and_a_device_are_refused(tmp_path: Path) -> None:
    for path, kind in ((tmp_path, "directory"), (Path("/dev/null"), "device")):
        with pytest.raises(AttachmentError) as info:
            read_original(path)
        assert _code(info) == "attachment_not_a_regular_file" and kind in info.value.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError) as info:
        read_original(tmp_path / "gone.png")
    assert _code(info) == "attachment_not_found"


def test_over_20_mib_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "huge.png"
    with path.open("wb") as f:
        f.truncate(64 * 1024 * 1024)  # sparse: reading it all would be noticed in memory
    with pytest.raises(AttachmentError) as info:
        read_original(path)
    assert _code(info) == "attachment_too_large_original" and "20 MiB" in info.value.message


def test_a_symlink_to_a_non_image_is_judged_by_its_target(tmp_path: Path) -> None:
    target = tmp_path / "notes.bin"
    target.write_bytes(b"\x00\x01binary")
    link = tmp_path / "shot.png"
    link.symlink_to(target)
    data = read_original(link).data
    assert sniff(data).disposition == "refuse"


# -- decoding and variants -------------------------------------------------------------------

def test_a_4k_screenshot_fits_claude_limits_and_stays_png(tmp_path: Path) -> None:
    variant, _ = _variant(images.screenshot_png(tmp_path / "s.png"))
    assert variant.mime == "image/png"
    assert max(variant.width, variant.height) <= 1568
    assert variant.width * variant.height <= 1_150_000
    assert (variant.width, variant.height) == (1429, 804)
    assert _open(variant.data).size == (variant.width, variant.height)


def test_transparent_png_keeps_alpha_never_jpeg(tmp_path: Path) -> None:
    variant, _ = _variant(images.transparent_png(tmp_path / "a.png"))
    assert variant.mime == "image/png"
    image = _open(variant.data)
    assert image.mode == "RGBA"
    assert image.getpixel((0, 0))[3] == 0 and image.getpixel((200, 150))[3] == 128


def test_transparent_png_too_large_for_png_is_refused_not_jpegged(tmp_path: Path) -> None:
    path = images.transparent_png(tmp_path / "a.png")
    with pytest.raises(AttachmentError) as info:
        _variant(path, Limits(1568, 1.15, 100))
    assert _code(info) == "attachment_too_large_optimized"


def test_exif_rotated_jpeg_comes_out_upright_without_metadata(tmp_path: Path) -> None:
    variant, _ = _variant(images.exif_rotated_jpeg(tmp_path / "r.jpg"))
    image = _open(variant.data)
    assert image.size == (200, 400)
    red, blue = image.getpixel((100, 50)), image.getpixel((100, 350))
    assert red[0] > 200 and red[2] < 60, "the red half is on top once upright"
    assert blue[2] > 200 and blue[0] < 60
    assert not image.getexif(), "EXIF (and GPS) are stripped"
    assert b"Exif" not in variant.data


def test_cmyk_jpeg_becomes_rgb(tmp_path: Path) -> None:
    variant, _ = _variant(images.cmyk_jpeg(tmp_path / "c.jpg"))
    image = _open(variant.data)
    assert image.mode == "RGB" and variant.mime == "image/jpeg"


def test_16_bit_grey_is_scaled_not_clipped(tmp_path: Path) -> None:
    variant, _ = _variant(images.grey16_png(tmp_path / "g.png"))
    image = _open(variant.data)
    assert image.mode == "L"
    assert image.getpixel((0, 0)) == 0 and image.getpixel((255, 0)) == 255
    assert 120 <= image.getpixel((128, 0)) <= 136, "a ramp, not white"


def test_palette_with_transparency_keeps_it(tmp_path: Path) -> None:
    variant, _ = _variant(images.palette_transparent_png(tmp_path / "p.png"))
    image = _open(variant.data)
    assert image.mode == "RGBA"
    assert image.getpixel((0, 0))[3] == 0 and image.getpixel((50, 50)) == (255, 0, 0, 255)


def test_truncated_file_is_corrupt(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError) as info:
        _variant(images.truncated_png(tmp_path / "t.png"))
    assert _code(info) == "attachment_corrupt_image" and "truncated" in info.value.message


def test_header_declaring_40000_square_is_refused_before_decoding(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError) as info:
        _variant(images.png_header_declaring(tmp_path / "bomb.png", 40000, 40000))
    assert _code(info) == "attachment_dimensions_too_large"
    assert "40000×40000" in info.value.message


def test_a_real_20000_square_image_is_refused(tmp_path: Path) -> None:
    path = images.black_png(tmp_path / "big.png", 20000, 20000)
    with pytest.raises(AttachmentError) as info:
        _variant(path)
    assert _code(info) == "attachment_dimensions_too_large"


def test_small_animated_gif_passes_unchanged(tmp_path: Path) -> None:
    path = images.animated_gif(tmp_path / "a.gif")
    variant, decoded = _variant(path)
    assert decoded.animated
    assert variant.data == path.read_bytes() and variant.mime == "image/gif"


def test_large_animated_gif_is_refused(tmp_path: Path) -> None:
    """An animation is passed through unchanged or not at all: one over the model's long edge
    (1568 px for Claude) is refused."""
    path = images.animated_gif(tmp_path / "a.gif", size=(1600, 900), frames=3)
    with pytest.raises(AttachmentError) as info:
        _variant(path)
    assert _code(info) == "attachment_animated_too_large"


def test_bmp_is_converted_to_png_with_a_warning(tmp_path: Path) -> None:
    variant, decoded = _variant(images.save(images.screenshot(300, 200), tmp_path / "b.bmp",
                                            "BMP"))
    assert variant.mime == "image/png"
    assert decoded.warnings == ["format_converted: BMP converted to PNG"]


def test_a_very_tall_screenshot_is_refused_rather_than_made_unreadable(tmp_path: Path) -> None:
    """A phone's scrolled capture, 1080×10000: fitting 1568 px would shrink it to 16 % (under
    the 18 % a screenshot's text survives)."""
    path = images.screenshot_png(tmp_path / "tall.png", 1080, 10000)
    with pytest.raises(AttachmentError) as info:
        _variant(path)
    assert _code(info) == "attachment_too_large_optimized"
    assert "crop it or split it" in info.value.message


def test_a_photo_uses_jpeg_at_a_legible_quality(tmp_path: Path) -> None:
    photo = screens.photo(2000, 1500)  # 3 MP: over Claude's 1.15
    variant, _ = _variant(images.save(photo, tmp_path / "p.jpg", "JPEG", quality=90))
    assert variant.mime == "image/jpeg"
    assert variant.width * variant.height <= 1_150_000


def test_variants_are_deterministic_within_a_process(tmp_path: Path) -> None:
    path = images.screenshot_png(tmp_path / "s.png", 1600, 400)  # resized for Claude
    first, _ = _variant(path)
    second, _ = _variant(path)
    assert first.data == second.data
    assert first.variant_id("a" * 64) == second.variant_id("a" * 64)


def test_proc_files_that_claim_to_be_regular_are_refused() -> None:
    """``/proc/self/mem`` is a "regular" file of size 0 whose read fails (or, for
    ``/proc/self/environ``, shows the daemon's environment): refused before any read."""
    for path in (Path("/proc/self/mem"), Path("/proc/self/environ")):
        with pytest.raises(AttachmentError) as info:
            read_original(path)
        assert _code(info) == "attachment_not_a_regular_file"
        assert "under /proc" in info.value.message
