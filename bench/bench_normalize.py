"""Issue 3 figures: a 3840×2160 PNG screenshot and a 4K JPEG photo → the Claude variant.

Median time and peak RSS of teamctl's pipeline (read, sha256, sniff, safe decode, variant)
side by side with plain ``Image.open(...).thumbnail(...)`` + save on the same input, each in its
own process so peak RSS is its own; then the same file planned again (served from the store).

Measured in process: no member, no daemon.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from _harness import REPO, figure, median

if TYPE_CHECKING:
    from orchestrator.attachments.intake import Original

RUNS = 9


def make_inputs(directory: Path) -> dict[str, Path]:
    sys.path.insert(0, str(REPO))
    from PIL import Image

    from tests.support import images

    shot = images.save(images.screenshot(3840, 2160), directory / "screenshot.png", "PNG")
    gradient = Image.linear_gradient("L").resize((3840, 2160)).convert("RGB")
    noise = Image.effect_noise((3840, 2160), 40).convert("RGB")
    photo = Image.blend(gradient, noise, 0.3)
    photo.save(directory / "photo.jpg", "JPEG", quality=90)
    return {"png_screenshot": shot, "jpeg_photo": directory / "photo.jpg"}


def worker(mode: str, path: str) -> None:
    """Run RUNS conversions in this process; print median ms and peak RSS as JSON."""
    from PIL import Image

    from orchestrator.attachments.intake import read_original
    from orchestrator.attachments.normalize import Limits, decode, make_variant
    from orchestrator.attachments.sniff import sniff

    limits = Limits(1568, 1.15, 3_932_160)
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        if mode == "teamctl":
            import hashlib

            data = read_original(Path(path)).data
            hashlib.sha256(data).hexdigest()
            variant = make_variant(data, decode(data, sniff(data[:1024]), "x"), "claude",
                                   limits, "x")
            size = (variant.width, variant.height)
        else:
            with Image.open(path) as image:
                image.thumbnail((1429, 1429))  # the same long edge as the planned variant
                out = io.BytesIO()
                image.save(out, image.format or "PNG")
                size = image.size
        samples.append((time.perf_counter() - start) * 1000)
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec.
    peak = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text()
                .splitlines() if line.startswith("VmHWM:")) / 1024
    print(json.dumps({"median_ms": median(samples), "peak_rss_mib": peak, "size": size}))


def measure(mode: str, path: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--worker", mode, str(path)],
                          capture_output=True, text=True, check=True, cwd=REPO)
    return dict(json.loads(done.stdout))


def repeat_from_store(path: Path, runs: int = 20) -> float:
    import anyio

    from orchestrator.attachments.artifacts import ArtifactStore
    from orchestrator.attachments.catalog import load_catalog
    from orchestrator.attachments.planner import Planner, Target
    from runtimes.claude.runtime import ClaudeRuntime
    from tests.support.plan_cache import MemoryPlanCache

    with tempfile.TemporaryDirectory() as tmp:
        planner = Planner(ArtifactStore(Path(tmp)), load_catalog(), MemoryPlanCache())
        target = Target("t", "m", "claude", "claude-sonnet-4-5", None,
                        ClaudeRuntime.capabilities)
        paths: list[Path | Original] = [path]
        anyio.run(planner.plan, target, "x", paths)
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            anyio.run(planner.plan, target, "x", paths)
            samples.append((time.perf_counter() - start) * 1000)
    return median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        inputs = make_inputs(Path(tmp))
        for name, path in inputs.items():
            ours, base = measure("teamctl", path), measure("thumbnail", path)
            ratio = ours["median_ms"] / base["median_ms"]
            print(f"{name} ({path.stat().st_size // 1024} KiB) → {ours['size']}: teamctl "
                  f"{ours['median_ms']:.1f} ms, peak {ours['peak_rss_mib']:.0f} MiB | "
                  f"Image.thumbnail+save {base['median_ms']:.1f} ms, peak "
                  f"{base['peak_rss_mib']:.0f} MiB | ratio {ratio:.2f}")
            figure(f"normalize_{name}_ms", ours["median_ms"])
            if name == "png_screenshot":
                figure("normalize_4k_png_vs_thumbnail", ratio)
            figure(f"normalize_{name}_vs_thumbnail", ratio)
            figure(f"normalize_{name}_peak_rss_mib", ours["peak_rss_mib"])
        repeat = repeat_from_store(inputs["png_screenshot"])
        print(f"same 4K screenshot planned again (served from the store): {repeat:.1f} ms")
        figure("normalize_repeat_ms", repeat)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
