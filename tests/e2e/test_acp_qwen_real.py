"""The real Qwen Code (pinned) as an ACP member against the fake chat-completions API: a text
turn with its usage, a teammate message through teamctl's MCP tool, an image turn whose planned
bytes reach the API.

Its rule for media (docs/runtimes.md § ACP, "What survives in one prompt"), pinned: it gates
images and PDFs by the model's *name*, whatever the client says; with the modalities teamctl
writes in its settings defaults the receipt stays true for an image alone, beside a text file,
beside a PDF, and for a model name Qwen Code does not know."""

from __future__ import annotations

import hashlib
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.contracts import ImagePart, LaunchSpec, TextPart, Turn
from runtimes.acp.runtime import AcpRuntime
from runtimes.hosts.local.host import LocalHost
from tests.e2e import receipts
from tests.support import images
from tests.support.fake_chat import FakeChat, newest_user_images, newest_user_text
from tests.support.real_members import (
    QWEN_VERSION,
    first_acp_turn,
    message_the_peer,
    qwen_member,
    send_planned_image,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl

pytestmark = pytest.mark.e2e


def _member_row(teamctl: Teamctl, name: str) -> dict:
    rows = {r["name"]: r for r in teamctl.json("status")["teams"][0]["members"]}
    return rows[name]  # type: ignore[no-any-return]


def test_real_qwen_answers_a_text_turn_over_acp_and_its_usage_is_journaled(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    ready = first_acp_turn(teamctl, qwen_member("qw", qwen_bin, chat), "hello qwen")
    assert (ready["agent"], ready["image"]) == ("qwen-code", True)
    turns = [r for r in chat.chat_requests() if newest_user_text(r["body"]) == "hello qwen"]
    assert turns and turns[0]["body"]["model"] == "text-model"
    [message] = teamctl.json("history", "qw")["messages"]
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (11, 3)
    version = subprocess.run([str(qwen_bin), "--version"], capture_output=True, text=True,
                             timeout=60, check=False)
    assert version.stdout.strip() == QWEN_VERSION, "the pinned release"


def test_real_qwen_messages_a_teammate_through_teamctls_mcp_tool(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat, tmp_path: Path) -> None:
    message_the_peer(teamctl, qwen_member("qw", qwen_bin, chat, permissions="full"),
                     "mcp__teamctl__send_message", chat.chat_requests,
                     lambda body: {t["function"]["name"] for t in body.get("tools", [])})


def test_real_qwen_sends_the_planned_image_bytes_to_the_api(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    """The planned variant goes as an ACP image block; Qwen Code puts it in the chat request
    as a data URL: the same bytes (sha256) and MIME reach the provider. (Qwen Code gates
    images by the model's name: a name it thinks text-only gets "[image: image/png]" instead,
    so the model here is a Qwen VL name, which the vision catalog knows.)"""
    planned = send_planned_image(teamctl, qwen_member("qw", qwen_bin, chat,
                                                      model="qwen3-vl-plus"))
    sent = [i for r in chat.chat_requests() for i in newest_user_images(r["body"])]
    assert sent, "the image reached the API"
    assert (sent[0]["sha256"], sent[0]["data_url_mime"], sent[0]["width"]) == (
        planned["sha256"], planned["mime"], planned["width"])


async def _sent() -> None:
    pass


@pytest.mark.anyio
@pytest.mark.parametrize(("image_input", "arrives"), [(None, False), (True, True)])
async def test_real_qwen_gates_an_image_by_the_model_name_unless_teamctl_gives_modalities(
        tmp_path: Path, qwen_bin: Path, chat: FakeChat, image_input: bool | None,
        arrives: bool) -> None:
    """Qwen Code 0.24.4's own rule: for a model name its table calls text-only
    (``text-model``) the image block becomes the text ``[image: image/png]`` and the prompt
    still ends ``end_turn``. With the modalities teamctl writes for a member whose model sees
    (``image_input``: the catalog's or ``vision``'s word), the bytes arrive whole."""
    png = images.png_bytes(images.screenshot(640, 400))
    sha = hashlib.sha256(png).hexdigest()
    (tmp_path / "state").mkdir()
    spec = LaunchSpec(team="t", member="m", executable=str(qwen_bin), model="text-model",
                      prompt=None, workdir=tmp_path, state_dir=tmp_path / "state",
                      args=("--acp", "--auth-type", "openai"), options={"acp_agent": "qwen"},
                      start_timeout=90.0, image_input=image_input, host=LocalHost(),
                      env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": chat.base_url})
    turn = Turn("msg_1", (TextPart("look"), ImagePart("image/png", 640, 400, sha, png)))
    async with AcpRuntime().open(spec) as agent:
        await agent.run_turn(turn, on_sent=_sent)
    found, texts = receipts.at_chat(chat.chat_requests())
    assert (sha in found, "[image: image/png]" in texts) == (arrives, not arrives)


def _media_member(qwen_bin: Path, chat: FakeChat, **extra: Any) -> dict[str, Any]:
    return qwen_member("qw", qwen_bin, chat, **extra)


def test_real_qwen_gets_every_image_the_receipt_names_alone_beside_a_text_file_and_a_pdf(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    """``qwen3-vl-plus`` (a vision model in the catalog and in Qwen's own table): the receipt's
    image reaches the API alone, beside a text file (an embedded resource: its text arrives),
    and beside a PDF (the catalog knows no pdf for it: its page images, each arrived)."""
    files = receipts.attachments(teamctl.workdir)
    member = _media_member(qwen_bin, chat, model="qwen3-vl-plus")
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    for names in (("shot.png",), ("shot.png", "notes.md"), ("shot.png", "spec.pdf")):
        receipt, requests = receipts.send(teamctl, chat, "qw", "look at [Image #1]",
                                          *(files[n] for n in names))
        receipts.assert_true_receipt(receipt, *receipts.at_chat(requests))


def test_real_qwen_gets_an_image_and_a_pdf_for_a_model_name_it_does_not_know(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    """``text-model`` (Qwen's table: text-only; ``vision = true``, ``documents = "native"``):
    Qwen Code used to send ``[image: image/png]`` while the receipt said sent. With the
    modalities teamctl writes, the image and the native PDF reach the API, sha256 equal."""
    files = receipts.attachments(teamctl.workdir)
    member = _media_member(qwen_bin, chat, vision=True, documents="native")
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    for names in (("shot.png",), ("shot.png", "spec.pdf")):
        receipt, requests = receipts.send(teamctl, chat, "qw", "look at [Image #1]",
                                          *(files[n] for n in names))
        receipts.assert_true_receipt(receipt, *receipts.at_chat(requests))
        assert {r["body"]["model"] for r in requests} == {"text-model"}
