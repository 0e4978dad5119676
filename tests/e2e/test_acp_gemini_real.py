"""The real Gemini CLI (pinned) as an ACP member against the fake Gemini API: a text turn with its
usage journaled, an image turn whose planned bytes reach the API as inlineData, a teammate
message through teamctl's MCP tool, a permission request answered from ``teamctl approvals``, a
stalled turn cancelled, and a resume of the same session after a kill -9 of the agent.

Its rule for media (docs/runtimes.md § ACP, "What survives in one prompt"), pinned: a prompt
that carries an embedded resource loses every image block; teamctl's receipt stays true for an
image alone, beside a text file, beside a PDF, and for a model name the agent does not know."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.contracts import LaunchSpec
from runtimes.acp.runtime import AcpRuntime
from runtimes.hosts.local.host import LocalHost
from tests.e2e import receipts
from tests.support import images
from tests.support.fake_gemini import (
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    declared_tools,
    newest_user_images,
    newest_user_text,
)
from tests.support.real_members import (
    GEMINI_VERSION,
    first_acp_turn,
    gemini_member,
    message_the_peer,
    send_planned_image,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_gemini import FakeGemini

pytestmark = pytest.mark.e2e


def test_real_gemini_answers_a_text_turn_over_acp_and_its_usage_is_journaled(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Gemini CLI reports a turn's tokens only in the prompt answer's ``_meta.quota``: they
    reach the journal."""
    ready = first_acp_turn(teamctl, gemini_member("gem", gemini_bin, gemini), "hello gemini")
    assert (ready["agent"], ready["image"]) == ("gemini-cli", True)
    [turn] = gemini.turn_requests()
    assert turn["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert newest_user_text(turn["body"]) == "hello gemini"
    assert turn["headers"]["x-goog-api-key"].startswith("sha256:"), "recorded, never kept"
    [message] = teamctl.json("history", "gem")["messages"]
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (
        PROMPT_TOKENS, OUTPUT_TOKENS)
    version = subprocess.run([str(gemini_bin), "--version"], capture_output=True, text=True,
                             timeout=60, check=False, env={"HOME": str(teamctl.workdir),
                                                           "PATH": "/usr/bin:/bin"})
    assert version.stdout.strip() == GEMINI_VERSION, "the pinned release"


def test_real_gemini_messages_a_teammate_through_teamctls_mcp_tool(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Gemini CLI names an MCP server's tools ``mcp_<server>_<tool>``."""
    message_the_peer(
        teamctl, gemini_member("gem", gemini_bin, gemini, permissions="full"),
        "mcp_teamctl_send_message", gemini.turn_requests, declared_tools)


def test_real_gemini_sends_the_planned_image_bytes_to_the_api_as_inline_data(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """The planned variant goes as an ACP image block; Gemini CLI puts it in the request as an
    ``inlineData`` part: the same bytes (sha256) and MIME reach the API. The preset's model,
    ``gemini-2.5-flash``, is in the vision catalog: no ``vision`` needed."""
    planned = send_planned_image(teamctl, gemini_member("gem", gemini_bin, gemini))
    [sent] = [i for r in gemini.turn_requests() for i in newest_user_images(r["body"])]
    assert (sent["sha256"], sent["inline_mime"], sent["width"]) == (
        planned["sha256"], planned["mime"], planned["width"])


def test_real_gemini_refusing_yolo_in_an_untrusted_folder_still_starts_and_full_runs_tools(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Without the preset's --skip-trust, Gemini CLI answers session/set_mode yolo with an
    error: the member still starts (a warning says why), and the agent's request for each
    tool is answered by the ``full`` profile."""
    member = gemini_member("gem", gemini_bin, gemini, permissions="full",
                           command=[str(gemini_bin), "--acp"])
    del member["acp_agent"]
    member["env"] = {**member["env"], "GEMINI_MODEL": "gemini-2.5-flash"}  # type: ignore[dict-item]
    launched = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [refused] = [e for e in teamctl.log_events() if e["event"] == "acp_mode_refused"]
    assert refused["mode"] == "yolo" and "untrusted folder" in refused["reason"]
    target = teamctl.workdir / "made.txt"
    done = teamctl.run("send", "gem", f"DO_SHELL touch {target}", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert target.exists() and done.stdout.startswith("done: ")


@pytest.mark.anyio
async def test_real_gemini_drops_every_image_block_of_a_prompt_that_carries_a_resource(
        tmp_path: Path, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Gemini CLI 0.61.0's own rule, sent raw (not through teamctl's prompt): an image block
    alone reaches the API; beside an embedded resource it does not — only the resource's bytes
    do, and the client is told nothing (the prompt ends ``end_turn``). Why teamctl sends such
    a prompt's images as resources (runtimes/acp/prompt.py)."""
    png = images.png_bytes(images.screenshot(640, 400))
    image = {"type": "image", "mimeType": "image/png",
             "data": base64.b64encode(png).decode()}
    resource = {"type": "resource", "resource": {"uri": "teamctl://doc/x/notes.txt",
                                                 "mimeType": "text/plain", "text": "notes"}}
    (tmp_path / "state").mkdir()
    spec = LaunchSpec(team="t", member="m", executable=str(gemini_bin), model="gemini-2.5-flash",
                      prompt=None, workdir=tmp_path, state_dir=tmp_path / "state",
                      args=("--acp", "--skip-trust"), options={"acp_agent": "gemini"},
                      start_timeout=90.0,
                      env={"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": gemini.base_url},
                      host=LocalHost())
    seen: list[set[str]] = []
    async with AcpRuntime().open(spec) as agent:
        for prompt in ([{"type": "text", "text": "look"}, image],
                       [{"type": "text", "text": "look"}, image, resource]):
            before = len(gemini.requests)
            answer = await agent.call({"jsonrpc": "2.0", "method": "session/prompt", "params": {
                "sessionId": agent.session_id, "prompt": prompt}}, 120.0)
            assert answer["result"]["stopReason"] == "end_turn"
            seen.append(receipts.at_gemini(gemini.requests[before:])[0])
    assert seen == [{hashlib.sha256(png).hexdigest()}, set()]


def _media_member(gemini_bin: Path, gemini: FakeGemini, **extra: Any) -> dict[str, Any]:
    return gemini_member("gem", gemini_bin, gemini, **extra)


def test_real_gemini_gets_every_image_the_receipt_names_alone_beside_a_text_file_and_a_pdf(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """The receipt (``send --wait --json``) names each image and native PDF by sha256: each
    reached the API — an image alone as an image block, an image beside a text file or a PDF
    (native for ``gemini-2.5-flash``: the catalog's pdf) as a resource, which Gemini CLI
    keeps. Before: the image beside a document never reached the API, the receipt said sent."""
    files = receipts.attachments(teamctl.workdir)
    assert teamctl.run("launch", str(teamctl.write_team(
        "web", [_media_member(gemini_bin, gemini)]))).returncode == 0
    for names in (("shot.png",), ("shot.png", "notes.md"), ("shot.png", "spec.pdf")):
        receipt, requests = receipts.send(teamctl, gemini, "gem", "look at [Image #1]",
                                          *(files[n] for n in names))
        receipts.assert_true_receipt(receipt, *receipts.at_gemini(requests))
        routes = [a.get("route") for a in receipt["attachments"][1:]]
        assert routes in ([], ["native"]), routes


def test_real_gemini_gets_an_image_for_a_model_name_it_does_not_know(
        teamctl: Teamctl, gemini_bin: Path, gemini: FakeGemini) -> None:
    """Gemini CLI gates nothing by the model's name: a name neither it nor the catalog knows
    (``vision = true`` for it) gets the image, beside a PDF too (``documents = "native"``)."""
    files = receipts.attachments(teamctl.workdir)
    member = _media_member(gemini_bin, gemini, model="team-proxy-vision", vision=True,
                           documents="native")
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    for names in (("shot.png",), ("shot.png", "spec.pdf")):
        receipt, requests = receipts.send(teamctl, gemini, "gem", "look at [Image #1]",
                                          *(files[n] for n in names))
        receipts.assert_true_receipt(receipt, *receipts.at_gemini(requests))
        assert all("/models/team-proxy-vision:" in r["path"] for r in requests)
