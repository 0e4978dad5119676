"""Planned bytes = API bytes (issue 26): the planner plans inside what each CLI passes through
untouched (orchestrator/attachments/cli_rules.py), records how it encoded a variant, and says
what a CLI will do to one it cannot keep inside."""

from __future__ import annotations

import hashlib
import io
import random
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
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
from tests.support import screens

REPO = Path(__file__).resolve().parents[2]
CATALOG = load_catalog()
CLAUDE = CATALOG.lookup("claude", "claude-sonnet-4-5").limits
CODEX_HIGH = CATALOG.lookup("codex", "gpt-5.4-mini").limits
CODEX_ORIGINAL = CATALOG.lookup("codex", "gpt-5.5").limits
OPENCODE = CATALOG.lookup("opencode", "openrouter/z-ai/glm-4.5v").limits


def _bytes(image: Image.Image, fmt: str = "PNG", **params: object) -> bytes:
    """The image as a file; a PNG at zlib level 1 unless told (an input's own compression
    changes no plan here: every input is over the budget, or resized, whatever its level —
    and level 1 is half the encoding time of the default at these sizes)."""
    if fmt == "PNG":
        params.setdefault("compress_level", 1)
    out = io.BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()


def _plan(data: bytes, purpose: str, limits: Limits) -> tuple[PlannedVariant, tuple[str, ...],
                                                                bytes]:
    return derive(data, sniff(data[:64]), "shot.png", purpose, limits)


@pytest.fixture(scope="module")
def retina() -> bytes:
    return _bytes(screens.screenshot(2560, 1600))


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


def test_retina_screenshot_for_codex_high_is_not_planned_at_2023x1264(retina: bytes) -> None:
    """codex (detail high) resizes anything over 2,500 patches of 32 px: 2023×1264 is under
    2.56 MP but 64×40 = 2,560 patches, and codex sent 1997×1248. The plan is what codex keeps."""
    variant, _, _ = _plan(retina, "codex-image-file", CODEX_HIGH)
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


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 20_000), st.integers(1, 20_000), st.integers(1, 12_000))
def test_patch_fit_stays_within_the_budget_and_never_grows(width: int, height: int,
                                                           budget: int) -> None:
    fitted = patch_fit(width, height, budget)
    assert fitted[0] <= width and fitted[1] <= height
    assert patch_count(*fitted) <= budget


@settings(max_examples=300, deadline=None)
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

def _few_colours(colours: int, size: tuple[int, int] = (1300, 800)) -> Image.Image:
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
    return _bytes(_few_colours(4))


def test_few_colours_stay_lossless_as_a_palette_png() -> None:
    """A PNG over the budget whose pixels have at most 256 colours becomes a palette PNG with
    exactly the same pixels, not a JPEG."""
    image = _few_colours(4)
    assert len(_bytes(image, compress_level=3)) > 500_000
    variant, warnings, data = _plan(_bytes(image), "claude-inline-image", CLAUDE)
    assert variant.mime == "image/png" and variant.bytes <= 500_000
    sent = Image.open(io.BytesIO(data))
    assert sent.mode == "P" and sent.convert("RGB").tobytes() == image.tobytes()
    assert warnings[0].startswith("encoded_to_fit: palette PNG (lossless: at most 256 colours)")


def test_a_transparent_screenshot_over_the_budget_is_quantized_never_jpeg(retina: bytes) -> None:
    """A window capture with transparent corners (macOS) keeps its size and its alpha: fewer
    colours, not fewer pixels, and never a JPEG."""
    shot = Image.open(io.BytesIO(retina)).convert("RGBA")
    mask = Image.new("L", shot.size, 0)
    ImageDraw.Draw(mask).rounded_rectangle((0, 0, 2559, 1599), 40, fill=255)
    shot.putalpha(mask)
    variant, warnings, data = _plan(_bytes(shot), "claude-inline-image", CLAUDE)
    assert (variant.mime, variant.width, variant.height) == ("image/png", 1356, 847)
    assert variant.bytes <= 500_000 and Image.open(io.BytesIO(data)).mode == "P"
    assert warnings[0].startswith("encoded_to_fit: palette PNG of 256 colours (quantized; "
                                  "transparency kept): as PNG it is ")


def _alpha_noise(seed: int, size: tuple[int, int]) -> bytes:
    """Transparent noise: no PNG, palette or smaller size of it is small."""
    return _bytes(Image.frombytes("RGBA", size, random.Random(seed).randbytes(
        size[0] * size[1] * 4)))


def test_a_transparent_image_that_does_not_fit_quantized_is_downscaled() -> None:
    # within Claude's size: its palette PNG (~700 KB) is what is over the 500,000 B
    variant, warnings, _ = _plan(_alpha_noise(9, (1000, 700)), "claude-inline-image", CLAUDE)
    assert variant.mime == "image/png" and variant.bytes <= 500_000
    assert variant.width < 1000
    assert warnings[0] == (f"downscaled_to_fit: {variant.width}×{variant.height} instead of "
                           "1000×700, to fit the 500,000 B the member's CLI passes unchanged")


def test_an_image_that_cannot_fit_legibly_is_refused() -> None:
    """Every step of the ladder is over the budget: even the palette PNG of its last, smallest
    step (226×150, about a byte a pixel of noise) is over 20 KB."""
    tiny = Limits(1568, 1.15, 3_932_160, cli_max_bytes=20_000)
    with pytest.raises(AttachmentError) as refused:
        _plan(_alpha_noise(9, (600, 400)), "claude-inline-image", tiny)
    assert refused.value.failure.code == "attachment_too_large_optimized"
    assert "(20 KB) without losing legibility" in refused.value.failure.message


def test_other_runtimes_keep_the_lossless_png(retina: bytes) -> None:
    for purpose, limits in (("codex-image-file", CODEX_HIGH),
                            ("opencode-file-part", OPENCODE)):
        variant, warnings, _ = _plan(retina, purpose, limits)
        assert variant.mime == "image/png" and warnings == ()


def test_the_ladder_is_deterministic_across_processes(tmp_path: Path) -> None:
    """The JPEG and palette steps give the same bytes in any process (rebuildable): noise a
    little over Claude's long edge (downscaled, then JPEG quality 90 — what a retina
    screenshot gets, at a tenth of the pixels) and few colours (the palette PNG)."""
    paths = [tmp_path / "noise.png", tmp_path / "few.png"]
    noise = Image.frombytes("RGB", (1600, 240), random.Random(3).randbytes(1600 * 240 * 3))
    paths[0].write_bytes(_bytes(noise))
    paths[1].write_bytes(_few_colours_png())
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from orchestrator.attachments.catalog import load_catalog\n"
        "from orchestrator.attachments.sniff import sniff\n"
        "from orchestrator.attachments.variants import derive\n"
        "limits = load_catalog().lookup('claude', 'claude-sonnet-4-5').limits\n"
        "for arg in sys.argv[1:]:\n"
        "    data = Path(arg).read_bytes()\n"
        "    print(derive(data, sniff(data[:64]), 'x', 'claude-inline-image', limits)[0])\n"
    )
    # a fresh process (its own hash seed) and this one at the same time: the same bytes
    proc = subprocess.Popen([sys.executable, "-c", script, *map(str, paths)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    here = [str(_plan(p.read_bytes(), "claude-inline-image", CLAUDE)[0]) for p in paths]
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "\n".join(here) + "\n"
    assert "mime='image/jpeg', width=1568" in here[0] and "mime='image/png'" in here[1]


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
