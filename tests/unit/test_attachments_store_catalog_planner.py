"""Artifact store, vision catalog and planner: the gate's two questions, whole-or-nothing."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.attachments import normalize
from orchestrator.attachments.artifacts import ArtifactMissing, ArtifactStore
from orchestrator.attachments.catalog import load_catalog
from orchestrator.attachments.failures import AttachmentError, AttachmentRefused
from orchestrator.attachments.intake import read_original
from orchestrator.attachments.loader import VariantLoader
from orchestrator.attachments.normalize import Limits
from orchestrator.attachments.planner import Planner, Target
from orchestrator.attachments.sniff import sniff
from orchestrator.contracts import Capabilities
from runtimes.claude.runtime import ClaudeRuntime
from tests.support import images
from tests.support.driver import REPO
from tests.support.plan_cache import MemoryPlanCache

if TYPE_CHECKING:
    from pathlib import Path


CLAUDE_CAPS = ClaudeRuntime.capabilities
SHOT = (1600, 400)  # over Claude's 1568 px: each plan makes a variant of its own


# -- artifact store ------------------------------------------------------------------------------

def test_artifacts_are_content_addressed_private_and_verified(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    digest = store.put(b"hello image")
    path = store.path(digest)
    assert digest == hashlib.sha256(b"hello image").hexdigest()
    assert path == tmp_path / "artifacts" / digest[:2] / digest
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert store.get(digest) == b"hello image"
    assert [p.name for p in path.parent.iterdir()] == [digest], "no temp file is left"
    path.write_bytes(b"tampered")
    with pytest.raises(ArtifactMissing, match="checksum mismatch"):
        store.get(digest)
    path.unlink()
    with pytest.raises(ArtifactMissing, match="missing"):
        store.get(digest)


class _FullDisk(ArtifactStore):
    def _write(self, target: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_is_a_typed_retryable_failure(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError) as info:
        _FullDisk(tmp_path).put(b"x")
    assert info.value.failure.code == "attachment_artifact_write_failed"
    assert info.value.failure.retryable
    assert "free some disk space" in info.value.message


# -- vision catalog ------------------------------------------------------------------------------

@pytest.mark.parametrize(("runtime", "model", "sees"), [
    ("opencode", "openrouter/moonshotai/kimi-k2.6", True),
    ("opencode", "openrouter/z-ai/glm-4.5v", True),
    ("opencode", "openrouter/z-ai/glm-5.1", False),
    ("opencode", "openrouter/some/new-model", None),
    ("opencode", "moonshotai/kimi-k2.6", None),  # the provider prefix is part of the id
    ("claude", "claude-sonnet-4-5", True),
    ("claude", "claude-sonnet-4-5-20250929", True),
    ("claude", None, True),
    ("codex", "gpt-5.4-mini", True),
    ("codex", "gpt-oss-120b", False),
    ("codex", "my-local-model", None),
])
def test_catalog_answers(runtime: str, model: str | None, sees: bool | None) -> None:
    entry = load_catalog().lookup(runtime, model)
    assert entry.image_input is sees
    if sees is not None:
        assert entry.source in load_catalog().sources and entry.checked


def test_operator_override_is_recorded_as_operator() -> None:
    entry = load_catalog().lookup("opencode", "openrouter/z-ai/glm-5.1", operator_vision=True)
    assert entry.image_input is True and entry.source == "operator"


def test_catalog_limits() -> None:
    catalog = load_catalog()
    assert catalog.lookup("claude", "claude-opus-4-5").limits == Limits(
        1568, 1.15, 3_932_160, cli_max_bytes=500_000)
    assert catalog.lookup("codex", "gpt-5.4-mini").limits == Limits(
        2048, 2.56, 20_971_520, max_patches=2500)
    assert catalog.lookup("codex", "gpt-5.5").limits.max_patches == 10_000
    assert catalog.lookup("codex", "gpt-5.5").limits.megapixels == 10.0
    assert catalog.checked == "2026-11-29"


# -- planner -------------------------------------------------------------------------------------


def _target(model: str | None = "claude-sonnet-4-5", *, vision: bool | None = None,
            caps: Capabilities = CLAUDE_CAPS, runtime: str = "claude") -> Target:
    return Target("web", "rev", runtime, model, vision, caps)


def _planner(tmp_path: Path) -> Planner:
    return Planner(ArtifactStore(tmp_path / "artifacts"), load_catalog(), MemoryPlanCache())


def _plan(planner: Planner, target: Target, paths: list[Path], text: str = "look"):  # type: ignore[no-untyped-def]
    return anyio.run(planner.plan, target, text, paths)


def test_plan_stores_original_and_variant(tmp_path: Path) -> None:
    planner = _planner(tmp_path)
    shot = images.screenshot_png(tmp_path / "shot.png", *SHOT)
    [planned] = _plan(planner, _target(), [shot])
    store = ArtifactStore(tmp_path / "artifacts")
    assert store.get(planned.original_sha256) == shot.read_bytes()
    assert hashlib.sha256(store.get(planned.variant.sha256)).hexdigest() == planned.variant.sha256
    assert planned.variant.purpose == "claude-inline-image"
    doc = planned.to_wire().model_dump()
    assert doc["variants"][0].keys() == {"purpose", "mime", "width", "height", "bytes", "sha256",
                                         "cli_transform"}


def test_every_failure_of_the_message_is_reported_at_once(tmp_path: Path) -> None:
    good = images.save(images.screenshot(200, 100), tmp_path / "good.png", "PNG")
    bad = images.truncated_png(tmp_path / "bad.png")
    svg = images.svg(tmp_path / "logo.png")
    with pytest.raises(AttachmentRefused) as info:
        _plan(_planner(tmp_path), _target(), [good, bad, svg, tmp_path / "missing.png"])
    failures = {(f.attachment, f.code) for f in info.value.failures}
    assert failures == {("bad.png", "attachment_corrupt_image"),
                        ("logo.png", "attachment_unsupported_mime"),
                        ("missing.png", "attachment_not_found")}
    assert all(f.member == "rev" for f in info.value.failures)
    assert info.value.exit_code == 3


def test_transport_and_vision_are_separate_questions(tmp_path: Path) -> None:
    shot = images.save(images.screenshot(200, 100), tmp_path / "s.png", "PNG")
    text_only = Capabilities(image_input=False)
    with pytest.raises(AttachmentRefused) as info:
        _plan(_planner(tmp_path), _target("openrouter/z-ai/glm-5.1", caps=text_only,
                                          runtime="opencode"), [shot])
    assert {f.code for f in info.value.failures} == {"attachment_runtime_unsupported",
                                                     "attachment_model_vision_unsupported"}


def test_unknown_model_is_refused_naming_the_override(tmp_path: Path) -> None:
    shot = images.save(images.screenshot(200, 100), tmp_path / "s.png", "PNG")
    with pytest.raises(AttachmentRefused) as info:
        _plan(_planner(tmp_path), _target("claude-next-preview"), [shot])
    [failure] = info.value.failures
    assert failure.code == "attachment_model_vision_unknown"
    assert "vision = true" in failure.message and "'rev'" in failure.message
    [planned] = _plan(_planner(tmp_path), _target("claude-next-preview", vision=True), [shot])
    assert planned.variant.mime == "image/png"


def test_the_serialized_payload_is_budgeted(tmp_path: Path) -> None:
    small_budget = Capabilities(image_input=True, image_mimes=CLAUDE_CAPS.image_mimes,
                                image_purpose="claude-inline-image", inline_base64=True,
                                max_payload_bytes=50_000)
    shots = [images.screenshot_png(tmp_path / f"s{i}.png", *SHOT) for i in range(2)]
    with pytest.raises(AttachmentRefused) as info:
        _plan(_planner(tmp_path), _target(caps=small_budget), shots)
    assert [f.code for f in info.value.failures] == ["attachment_serialized_payload_too_large"]


def test_the_same_file_again_is_served_from_the_store(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    planner = _planner(tmp_path)
    shot = images.screenshot_png(tmp_path / "s.png", *SHOT)
    [first] = _plan(planner, _target(), [shot])

    def no_decoding(*args: object) -> None:
        raise AssertionError("decoded again")

    monkeypatch.setattr("orchestrator.attachments.variants.decode", no_decoding)
    [again] = _plan(planner, _target(), [shot])
    assert again == first


def test_a_missing_variant_is_rebuilt_from_the_original(tmp_path: Path) -> None:
    planner = _planner(tmp_path)
    [planned] = _plan(planner, _target(), [images.screenshot_png(tmp_path / "s.png", *SHOT)])
    store = ArtifactStore(tmp_path / "artifacts")
    loader = VariantLoader(store)
    store.path(planned.variant.sha256).unlink()
    part = anyio.run(loader.load, planned.original_sha256, planned.variant)
    assert hashlib.sha256(part.data).hexdigest() == planned.variant.sha256
    assert store.get(planned.variant.sha256) == part.data
    store.path(planned.variant.sha256).write_bytes(b"corrupt")
    store.path(planned.original_sha256).unlink()
    with pytest.raises(ArtifactMissing):
        anyio.run(loader.load, planned.original_sha256, planned.variant)


def _variant_line(path: Path) -> str:
    data = read_original(path).data
    variant = normalize.make_variant(data, normalize.decode(data, sniff(data[:1024]), "x"),
                                     "claude-inline-image", Limits(1568, 1.15, 3_932_160), "x")
    return f"{variant.sha256} {variant.variant_id(hashlib.sha256(data).hexdigest())}"


def test_variants_are_identical_across_processes(tmp_path: Path) -> None:
    """The same bytes and optimizer version give the same variant bytes and id anywhere."""
    shot = images.screenshot_png(tmp_path / "s.png", *SHOT)
    photo = images.exif_rotated_jpeg(tmp_path / "p.jpg")
    script = (
        "import sys, hashlib\n"
        "from orchestrator.attachments.intake import read_original\n"
        "from orchestrator.attachments.sniff import sniff\n"
        "from orchestrator.attachments.normalize import Limits, decode, make_variant\n"
        "from pathlib import Path\n"
        "for arg in sys.argv[1:]:\n"
        "    data = read_original(Path(arg)).data\n"
        "    v = make_variant(data, decode(data, sniff(data[:1024]), 'x'), 'claude-inline-image',"
        " Limits(1568, 1.15, 3932160), 'x')\n"
        "    print(v.sha256, v.variant_id(hashlib.sha256(data).hexdigest()))\n"
    )
    # a fresh process (its own hash seed) and this one at the same time: the same bytes
    there = subprocess.Popen([sys.executable, "-c", script, str(shot), str(photo)], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    here = [_variant_line(path) for path in (shot, photo)]
    out, err = there.communicate(timeout=60)
    assert there.returncode == 0, err
    assert out.splitlines() == here
    assert normalize.OPTIMIZER_VERSION.startswith("teamctl-2/pillow-")
