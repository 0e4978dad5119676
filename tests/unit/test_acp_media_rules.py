"""What the ACP presets' agents do to images and documents, and how teamctl keeps its receipt
true (docs/runtimes.md § ACP, "What survives in one prompt"): Gemini CLI drops a prompt's
image blocks when it carries a resource, so teamctl sends those images as resources; Qwen Code
gates media by its model's name, so teamctl writes the member's modalities in its settings
defaults; the vision catalog knows the models the presets' docs name. The real agents prove
each rule in tests/e2e/test_acp_qwen_real.py and test_acp_gemini_real.py."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from PIL import Image
from structlog.testing import capture_logs

from orchestrator.acp_agents import ACP_AGENTS
from orchestrator.attachments.catalog import load_catalog
from orchestrator.contracts import DocumentPart, ImagePart, LaunchSpec, TextPart, Turn
from runtimes.acp.launch import build_env
from runtimes.acp.prompt import PromptRules, prompt_blocks
from runtimes.acp.runtime import AcpRuntime
from runtimes.hosts.local.host import LocalHost
from tests.support import images
from tests.support.driver import REPO

FAKE_ACP = REPO / "fixtures" / "bin" / "fake-acp"
PNG = images.png_bytes(Image.new("RGB", (40, 30), (200, 30, 30)))
NOTES = b"the release notes\n"
# every model docs/runtimes.md names for a preset (its example, its advertised models)
PRESET_MODELS = ("gemini-2.5-flash", "gemini-2.5-pro", "gemini-3.8-flash",
                 "gemini-3.5-flash-lite", "qwen3-coder-plus", "qwen3-vl-plus", "qwen3.5-plus")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _image(number: int = 1) -> ImagePart:
    return ImagePart("image/png", 40, 30, _sha(PNG), PNG, number=number)


def _notes() -> DocumentPart:
    return DocumentPart("text/plain", "notes.txt", _sha(NOTES), NOTES, number=2)


def _spec(tmp_path: Path, agent: str | None = None, **fields: object) -> LaunchSpec:
    """A member's launch; ``agent``: its ACP preset (the ``acp_agent`` of its options)."""
    (tmp_path / "state").mkdir(exist_ok=True)
    base: dict[str, object] = {"team": "t", "member": "m", "executable": str(FAKE_ACP),
                               "model": None, "prompt": None, "workdir": tmp_path,
                               "state_dir": tmp_path / "state", "login": "operator",
                               "start_timeout": 20.0, "host": LocalHost()}
    options = {} if agent is None else {"acp_agent": agent}
    return LaunchSpec(**(base | {"options": options} | fields))  # type: ignore[arg-type]


# -- the catalog ---------------------------------------------------------------------------------

def test_the_vision_catalog_knows_every_model_the_acp_presets_docs_name() -> None:
    """The Gemini preset's documented ``gemini-2.5-flash`` was refused as unknown (the catalog
    knew only OpenCode's ``google/gemini-2.5-flash``): each model the docs name for a preset
    has an entry under ``acp``, with its source; the docs still name each one."""
    docs = (REPO / "docs" / "runtimes.md").read_text()
    for model in PRESET_MODELS:
        entry = load_catalog().lookup("acp", model)
        assert entry.known and entry.source in load_catalog().sources, model
        assert re.search(rf"`{re.escape(model)}`|\"{re.escape(model)}\"", docs), model
    assert load_catalog().lookup("acp", "qwen3-coder-plus").image_input is False
    assert load_catalog().lookup("acp", "gemini-2.5-flash").pdf is True


# -- Qwen Code: its gate by model name -----------------------------------------------------------

def _defaults(env: dict[str, str]) -> dict[str, object]:
    return json.loads(Path(env["QWEN_CODE_SYSTEM_DEFAULTS_PATH"]).read_text())  # type: ignore[no-any-return]


def test_qwen_is_told_the_modalities_teamctl_plans_so_its_gate_agrees(tmp_path: Path) -> None:
    """Qwen Code replaces an image by ``[image: image/png]`` for a model name its table calls
    text-only, whatever teamctl's ``vision = true`` says: its settings defaults get the
    member's modalities (images as the catalog or ``vision`` says; PDFs when they go
    natively). Where teamctl has no say (an unknown model, no native PDFs), Qwen's own table
    stays: nothing is written."""
    seeing = build_env(_spec(tmp_path, agent="qwen", model="text-model", image_input=True))
    assert _defaults(seeing) == {"model": {"generationConfig": {"modalities": {
        "image": True, "pdf": False}}}}
    native = build_env(_spec(tmp_path, agent="qwen", image_input=None, pdf_input=True))
    assert _defaults(native)["model"] == {"generationConfig": {"modalities": {"pdf": True}}}
    assert "QWEN_CODE_SYSTEM_DEFAULTS_PATH" not in build_env(_spec(tmp_path, agent="qwen"))
    gemini = build_env(_spec(tmp_path, agent="gemini", image_input=True))
    assert not any(name.endswith("DEFAULTS_PATH") for name in gemini)


def test_qwen_carries_inline_media_up_to_what_one_acp_turn_carries(tmp_path: Path) -> None:
    """Qwen Code replaces inline media over 10 MiB by a text; the preset raises its limit to
    the adapter's own per-turn budget, the member's env still deciding."""
    env = build_env(_spec(tmp_path, agent="qwen"))
    assert int(env["QWEN_CODE_MAX_INLINE_MEDIA_BYTES"]) == \
        AcpRuntime.capabilities.max_payload_bytes
    mine = build_env(_spec(tmp_path, agent="qwen", env={"QWEN_CODE_MAX_INLINE_MEDIA_BYTES": "9"}))
    assert mine["QWEN_CODE_MAX_INLINE_MEDIA_BYTES"] == "9"


# -- Gemini CLI: images beside a resource --------------------------------------------------------

def _rules(*, beside: bool) -> PromptRules:
    return PromptRules("m", "gemini-cli", images=True, resources=True,
                       images_beside_resources=beside)


def test_an_agent_that_drops_images_beside_a_resource_gets_them_as_resources() -> None:
    """To such an agent (Gemini CLI's preset), the images of a prompt that carries a document
    go as blob resources of the image's MIME, named for their marker; a prompt without a
    document keeps its image blocks, and so does every other agent."""
    with_doc = (TextPart("look at [Image #1] and [Doc #2]"), _image(), _notes())
    blocks = prompt_blocks(with_doc, _rules(beside=False))
    assert [b["type"] for b in blocks] == ["text", "resource", "resource"]
    assert blocks[1]["resource"]["uri"] == f"teamctl://image/{_sha(PNG)[:12]}/image-1.png"
    assert blocks[1]["resource"]["mimeType"] == "image/png"
    assert [b["type"] for b in prompt_blocks(with_doc[:2], _rules(beside=False))] == [
        "text", "image"]
    assert [b["type"] for b in prompt_blocks(with_doc, _rules(beside=True))] == [
        "text", "image", "resource"]
    page = ImagePart("image/png", 40, 30, _sha(PNG), PNG, number=3, page=2)
    [_, named] = prompt_blocks((_notes(), page), _rules(beside=False))
    assert named["resource"]["uri"].endswith("/doc-3-page-2.png")


async def _reply(spec: LaunchSpec) -> str:
    async def sent() -> None:
        pass

    turn = Turn("msg_1", (TextPart("look at [Image #1] and [Doc #2]"), _image(), _notes()))
    async with AcpRuntime().open(spec) as agent:
        return (await agent.run_turn(turn, on_sent=sent)).reply


@pytest.mark.anyio
async def test_a_gemini_members_image_beside_a_document_reaches_the_agent(
        tmp_path: Path) -> None:
    """The fake agent dropping image blocks beside a resource, as Gemini CLI 0.61.0 does:
    a Gemini member's image still arrives, its bytes whole (sent as a resource)."""
    reply = await _reply(_spec(tmp_path, agent="gemini", env={
        "GEMINI_API_KEY": "k", "FAKE_ACP_DROP_IMAGES_BESIDE_RESOURCES": "1"}))
    assert f"sha256={_sha(PNG)} via=resource" in reply
    assert f"sha256={_sha(NOTES)}" in reply


@pytest.mark.anyio
async def test_a_known_agent_started_by_its_command_gets_its_turn_rules_and_a_warning(
        tmp_path: Path) -> None:
    """A member with ``command`` alone whose agent calls itself ``gemini-cli`` gets the
    preset's rule at each turn (the image arrives); the log names the preset it should name
    for what is written at launch."""
    with capture_logs() as logs:
        reply = await _reply(_spec(tmp_path, env={
            "FAKE_ACP_NAME": "gemini-cli", "FAKE_ACP_DROP_IMAGES_BESIDE_RESOURCES": "1"}))
    assert f"sha256={_sha(PNG)} via=resource" in reply
    [unused] = [e for e in logs if e["event"] == "acp_preset_unused"]
    assert unused["preset"] == "gemini" and 'acp_agent = "gemini"' in unused["reason"]
    assert ACP_AGENTS["gemini"].reports_as == "gemini-cli"
