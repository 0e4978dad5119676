"""Planned bytes = API bytes (issue 26): the planner plans inside what each CLI passes through
untouched (orchestrator/attachments/cli_rules.py), records how it encoded a variant, and says
what a CLI will do to one it cannot keep inside."""

from __future__ import annotations

import hashlib
import io
import random
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from orchestrator.attachments.catalog import load_catalog
from orchestrator.attachments.cli_rules import (
    CLAUDE_REENCODE_OVER_BYTES,
    cli_transform,
    codex_output_size,
    patch_count,
    patch_fit,
)
from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.normalize import Limits, target_size
from orchestrator.attachments.sniff import sniff
from orchestrator.attachments.variants import PlannedVariant, derive
from orchestrator.daemon.web.render import conversation
from orchestrator.protocol.messages import AttachmentRef, MessageDoc
from tests.support import images, screens

REPO = Path(__file__).resolve().parents[2]
CATALOG = load_catalog()
CLAUDE = CATALOG.lookup("claude", "claude-sonnet-4-5").limits
CODEX_HIGH = CATALOG.lookup("codex", "gpt-5.4-mini").limits
CODEX_ORIGINAL = CATALOG.lookup("codex", "gpt-5.5").limits
OPENCODE = CATALOG.lookup("opencode", "openrouter/z-ai/glm-4.5v").limits


def _bytes(image: Image.Image, *, level: int = 1) -> bytes:
    """The image as a PNG file written directly (``images.plain_png``: filter "none", zlib at
    ``level``): an input's own encoding changes no plan here (every input is over the budget,
    or resized, however it was compressed), and Pillow's encoder would take twice the time."""
    return images.plain_png(image, level=level)


def _plan(data: bytes, purpose: str, limits: Limits) -> tuple[PlannedVariant, tuple[str, ...],
                                                                bytes]:
    return derive(data, sniff(data[:64]), "shot.png", purpose, limits)


@pytest.fixture(scope="module")
def retina_image() -> Image.Image:
    """A retina screenshot's pixels (read only: a test that changes them works on a copy)."""
    return screens.screenshot(2560, 1600)


@pytest.fixture(scope="module")
def retina(retina_image: Image.Image) -> bytes:
    return _bytes(retina_image)


@pytest.fixture(scope="module")
def retina_for_codex_high(retina: bytes) -> tuple[PlannedVariant, tuple[str, ...], bytes]:
    """The retina screenshot planned for codex (detail high), which two promises are about."""
    return _plan(retina, "codex-image-file", CODEX_HIGH)


# -- the defects of issue 26 ---------------------------------------------------------------------

def test_retina_screenshot_for_claude_is_not_planned_over_what_claude_code_passes(
        retina: bytes) -> None:
    """Claude Code re-encodes an image over 500 KiB to JPEG: a retina screenshot was planned as
    a 1356×847 PNG of ~1 MB and the API got the CLI's JPEG. The plan stays within 500,000 B
    (lossless PNG when it fits; here JPEG quality 90), and the plan records the choice."""
    variant, warnings, data = _plan(retina, "claude-inline-image", CLAUDE)
    assert len(data) == variant.bytes <= 500_000
    assert (variant.mime, variant.width, variant.height) == ("image/jpeg", 1356, 847)
    [note] = warnings
    assert note.startswith("encoded_to_fit: JPEG quality 90: as PNG it is ")
    assert "500,000 B the member's CLI passes unchanged" in note
    assert variant.cli_transform is None


def test_retina_screenshot_for_codex_high_is_not_planned_at_2023x1264(
        retina_for_codex_high: tuple[PlannedVariant, tuple[str, ...], bytes]) -> None:
    """codex (detail high) resizes anything over 2,500 patches of 32 px: 2023×1264 is under
    2.56 MP but 64×40 = 2,560 patches, and codex sent 1997×1248. The plan is what codex keeps."""
    variant, _, _ = retina_for_codex_high
    assert (variant.width, variant.height) == (1997, 1248)
    assert codex_output_size(1997, 1248, 2048, 2500) == (1997, 1248)
    assert variant.cli_transform is None


# -- codex's rule, as its source has it ------------------------------------------------------------

@pytest.mark.parametrize(("size", "high"), [
    # codex-rs/utils/image tests
    ((2048, 1024), (2048, 1024)), ((4096, 2048), (2048, 1024)), ((2048, 2048), (1600, 1600)),
    ((512, 4096), (256, 2048)), ((2050, 2), (2048, 2)),
    # protocols/bytes.md, observed with codex 0.171.0
    ((2023, 1264), (1997, 1248)), ((4000, 3000), (1824, 1368)), ((3000, 1000), (2048, 683)),
    ((1600, 1600), (1600, 1600)),
])
def test_codex_high_detail_sizes_match_codex(size: tuple[int, int],
                                             high: tuple[int, int]) -> None:
    assert codex_output_size(*size, 2048, 2500) == high


def test_codex_original_detail_sizes_match_codex() -> None:
    assert codex_output_size(6401, 100, 6000, 10_000) == (6000, 94)
    assert codex_output_size(3201, 3201, 6000, 10_000) == (3200, 3200)


@given(st.integers(1, 20_000), st.integers(1, 20_000), st.integers(1, 12_000))
def test_patch_fit_stays_within_the_budget_and_never_grows(width: int, height: int,
                                                           budget: int) -> None:
    fitted = patch_fit(width, height, budget)
    assert fitted[0] <= width and fitted[1] <= height
    assert patch_count(*fitted) <= budget


@given(st.integers(16, 12_000), st.integers(16, 12_000))
def test_planned_sizes_are_what_every_cli_passes_untouched(width: int, height: int) -> None:
    """Any source size: the planned size is within the model's limits and codex (either
    detail) and Claude Code leave it as it is."""
    for limits in (CODEX_HIGH, CODEX_ORIGINAL, CLAUDE, OPENCODE):
        w, h = target_size((width, height), limits)
        assert max(w, h) <= limits.long_edge and w * h <= limits.megapixels * 1_000_000
    assert codex_output_size(*target_size((width, height), CODEX_HIGH), 2048, 2500) == \
        target_size((width, height), CODEX_HIGH)
    assert codex_output_size(*target_size((width, height), CODEX_ORIGINAL), 6000, 10_000) == \
        target_size((width, height), CODEX_ORIGINAL)
    assert max(target_size((width, height), CLAUDE)) <= 2000


# -- the byte ladder for Claude ---------------------------------------------------------------

@cache
def _few_colours(colours: int = 64, size: tuple[int, int] = (640, 480)) -> Image.Image:
    """Seeded noise of ``colours`` colours (made once: read only). The default is over the
    budget as an RGB PNG (~655 KB) and well within it as a palette PNG (~240 KB)."""
    rng = random.Random(5)
    palette = [tuple(rng.randrange(256) for _ in range(3)) for _ in range(colours)]
    # each random byte taken modulo ``colours`` (a translation table: the same bytes as a
    # byte-by-byte loop, without a million Python steps)
    index = Image.frombytes("L", size, rng.randbytes(size[0] * size[1]).translate(
        bytes(b % colours for b in range(256))))
    return Image.merge("RGB", [index.point([c[i] for c in palette] + [0] * (256 - colours))
                               for i in range(3)])


@cache
def _few_colours_png() -> bytes:
    return _bytes(_few_colours())


def test_few_colours_stay_lossless_as_a_palette_png() -> None:
    """A PNG over the budget whose pixels have at most 256 colours becomes a palette PNG with
    exactly the same pixels, not a JPEG."""
    image = _few_colours()
    variant, warnings, data = _plan(_few_colours_png(), "claude-inline-image", CLAUDE)
    assert variant.mime == "image/png" and variant.bytes <= 500_000
    sent = Image.open(io.BytesIO(data))
    assert sent.mode == "P" and sent.convert("RGB").tobytes() == image.tobytes()
    [note] = warnings
    assert note.startswith("encoded_to_fit: palette PNG (lossless: at most 256 colours): "
                           "as PNG it is ")
    assert _png_bytes_in(note) > 500_000, "the lossless RGB PNG is what is over the budget"


def _png_bytes_in(note: str) -> int:
    """The ``as PNG it is N B`` of a plan's note."""
    found = re.search(r"as PNG it is ([\d,]+) B", note)
    assert found is not None, note
    return int(found[1].replace(",", ""))


def test_a_transparent_screenshot_over_the_budget_is_quantized_never_jpeg(
        retina_image: Image.Image) -> None:
    """A window capture with transparent corners (macOS) keeps its size and its alpha: fewer
    colours, not fewer pixels, and never a JPEG."""
    shot = retina_image.convert("RGBA")
    mask = Image.new("L", shot.size, 0)
    ImageDraw.Draw(mask).rounded_rectangle((0, 0, 2559, 1599), 40, fill=255)
    shot.putalpha(mask)
    variant, warnings, data = _plan(_bytes(shot), "claude-inline-image", CLAUDE)
    assert (variant.mime, variant.width, variant.height) == ("image/png", 1356, 847)
    assert variant.bytes <= 500_000 and Image.open(io.BytesIO(data)).mode == "P"
    assert warnings[0].startswith("encoded_to_fit: palette PNG of 256 colours (quantized; "
                                  "transparency kept): as PNG it is ")


def _alpha_noise(seed: int, size: tuple[int, int]) -> bytes:
    """Transparent noise: no PNG, palette or smaller size of it is small (and zlib cannot
    compress it: stored)."""
    return _bytes(Image.frombytes("RGBA", size, random.Random(seed).randbytes(
        size[0] * size[1] * 4)), level=0)


def test_a_transparent_image_that_does_not_fit_quantized_is_downscaled() -> None:
    # within the model's size: its palette PNG (~121 KB) is what is over the 100,000 B
    small = Limits(1568, 1.15, 3_932_160, cli_max_bytes=100_000)
    variant, warnings, _ = _plan(_alpha_noise(9, (400, 300)), "claude-inline-image", small)
    assert variant.mime == "image/png" and variant.bytes <= 100_000
    assert variant.width < 400
    assert warnings[0] == (f"downscaled_to_fit: {variant.width}×{variant.height} instead of "
                           "400×300, to fit the 100,000 B the member's CLI passes unchanged")


def test_an_image_that_cannot_fit_legibly_is_refused() -> None:
    """Every step of the ladder is over the budget: even the palette PNG of its last, smallest
    step (113×75, about a byte a pixel of noise: ~9 KB) is over 5 KB."""
    tiny = Limits(1568, 1.15, 3_932_160, cli_max_bytes=5_000)
    with pytest.raises(AttachmentError) as refused:
        _plan(_alpha_noise(9, (300, 200)), "claude-inline-image", tiny)
    assert refused.value.failure.code == "attachment_too_large_optimized"
    assert "(5 KB) without losing legibility" in refused.value.failure.message


def test_other_runtimes_keep_the_lossless_png(
        retina: bytes, retina_for_codex_high: tuple[PlannedVariant, tuple[str, ...], bytes]
) -> None:
    for variant, warnings, _ in (retina_for_codex_high,
                                 _plan(retina, "opencode-file-part", OPENCODE)):
        assert variant.mime == "image/png" and warnings == ()


def test_the_ladder_is_deterministic_across_processes(tmp_path: Path) -> None:
    """The JPEG and palette steps give the same bytes in any process (rebuildable): noise a
    little over Claude's long edge (downscaled, then JPEG quality 90 — what a retina
    screenshot gets, at a tenth of the pixels) and few colours (the palette PNG). The other
    process runs only the encoder (``normalize``, what ``derive`` calls) and says what the plan
    keeps of a variant: its id, sha256, type and size."""
    paths = [tmp_path / "noise.png", tmp_path / "few.png"]
    noise = Image.frombytes("RGB", (1600, 240), random.Random(3).randbytes(1600 * 240 * 3))
    paths[0].write_bytes(_bytes(noise, level=0))
    paths[1].write_bytes(_few_colours_png())
    script = (
        "import hashlib, sys\n"
        "from pathlib import Path\n"
        "from orchestrator.attachments.image_limits import Limits\n"
        "from orchestrator.attachments.normalize import decode, make_variant\n"
        "from orchestrator.attachments.sniff import sniff\n"
        "limits = Limits.from_json(sys.argv[1])\n"
        "for arg in sys.argv[2:]:\n"
        "    data = Path(arg).read_bytes()\n"
        "    decoded = decode(data, sniff(data[:64]), 'x', limits=limits)\n"
        "    v = make_variant(data, decoded, 'claude-inline-image', limits, 'x')\n"
        "    print(v.variant_id(hashlib.sha256(data).hexdigest()), v.sha256, v.mime, v.width,"
        " v.height)\n"
    )
    # a fresh process (its own hash seed) and this one at the same time: the same bytes
    proc = subprocess.Popen([sys.executable, "-c", script, CLAUDE.to_json(), *map(str, paths)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    here = [_plan(p.read_bytes(), "claude-inline-image", CLAUDE)[0] for p in paths]
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.splitlines() == [f"{v.variant_id} {v.sha256} {v.mime} {v.width} {v.height}"
                                for v in here]
    assert (here[0].mime, here[0].width, here[1].mime) == ("image/jpeg", 1568, "image/png")


# -- what a CLI does anyway: said, never "as sent" -------------------------------------------

def test_claude_reencoding_is_predicted_only_over_500_kib() -> None:
    assert cli_transform("claude-inline-image", "image/gif", 420, 320,
                         CLAUDE_REENCODE_OVER_BYTES, CLAUDE) is None
    said = cli_transform("claude-inline-image", "image/gif", 420, 320,
                         CLAUDE_REENCODE_OVER_BYTES + 1, CLAUDE)
    assert said is not None
    assert said.startswith("re-encoded by the CLI to a JPEG of 420×320 under 500 KiB "
                           "(a still image)")


def test_codex_resizing_is_predicted_with_codex_sizes() -> None:
    assert cli_transform("codex-image-file", "image/png", 1997, 1248, 10, CODEX_HIGH) is None
    said = cli_transform("codex-image-file", "image/png", 2023, 1264, 10, CODEX_HIGH)
    assert said is not None and said.startswith("re-encoded by the CLI to a PNG of 1997×1248")
    assert cli_transform("codex-image-file", "image/png", 2023, 1264, 10,
                         CODEX_ORIGINAL) is None
    assert cli_transform("opencode-file-part", "image/png", 9000, 9000, 10**8,
                         OPENCODE) is None


def test_limits_survive_the_journal_and_old_rows_still_read() -> None:
    for limits in (CLAUDE, CODEX_HIGH, CODEX_ORIGINAL, OPENCODE):
        assert Limits.from_json(limits.to_json()) == limits
    assert Limits.from_json("[1568, 1.15, 3932160]") == Limits(1568, 1.15, 3_932_160)
    assert OPENCODE.to_json() == "[2000, 4.0, 15728640]", "unchanged rows keep their cache"
    assert CLAUDE.key() != Limits(1568, 1.15, 3_932_160).key(), \
        "a variant planned before the CLI rule is not served from the cache"


def _message(ref: AttachmentRef) -> MessageDoc:
    return MessageDoc(id="m1", text="look", state="answered", reply="ok", attempts=1,
                      attachments=[ref], error=None, to="rev")


def test_live_view_says_when_the_cli_reencoded_the_image_instead_of_as_sent() -> None:
    base = {"name": "spin.gif", "sha256": hashlib.sha256(b"x").hexdigest(),
            "mime": "image/gif", "width": 420, "height": 320, "original_sha256": "0" * 64}
    changed = "re-encoded by the CLI to a JPEG of 420×320 under 500 KiB (a still image)"
    html = conversation("rev", [_message(AttachmentRef(**base, cli_transform=changed))])
    assert changed in html and "as sent" not in html
    assert "as sent" in conversation("rev", [_message(AttachmentRef(**base))])
