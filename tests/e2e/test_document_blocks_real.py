"""Native documents through the real pinned CLIs (issue 31, docs/runtimes.md "Documents"): each
runtime adapter is driven directly (a LaunchSpec, no daemon) against a fake model API, and the
test reads what reached the API — the PDF's bytes (sha256) and the text document's text.

- Claude Code: the ``document`` blocks (PDF base64, text source, ``title``) reach the Messages
  API unchanged, each at its ``[Doc #N]`` anchor.
- OpenCode, model ``anthropic/claude-sonnet-4-5``: the PDF ``file`` part reaches the Messages
  API as a ``document`` block (title: the file name), bytes equal — when the model's modalities
  list ``pdf``; when they do not, OpenCode replaces the file by an error text.
- Qwen Code over ACP (chat-completions): a PDF resource becomes a ``file`` part
  (``file_data`` data URL, bytes equal, filename ``document.pdf``) for a model Qwen believes
  reads PDFs (``claude-*``), and the placeholder ``[document: application/pdf]`` (the bytes
  dropped) for any other; a text resource becomes the text ``File: <uri>\\n<text>``.
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.contracts import DocumentPart, LaunchSpec, TextPart, Turn
from runtimes.acp.runtime import AcpRuntime
from runtimes.claude.runtime import ClaudeRuntime
from runtimes.hosts.local.host import LocalHost
from runtimes.opencode.runtime import OpenCodeRuntime
from tests.support.pdfs import text_pdf

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

PDF = text_pdf("Page one: the contract", "Page two: the price", "Page three: the date")
NOTES = "Release notes — ünïcode\nline two\n".encode()
TEXT = "read [Doc #1] then [Doc #2], and answer"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _turn() -> Turn:
    pdf = DocumentPart("application/pdf", "spec.pdf", _sha(PDF), PDF, pages=3, number=1,
                       anchor=TEXT.index("[Doc #1]") + len("[Doc #1]"))
    notes = DocumentPart("text/plain", "notes.txt", _sha(NOTES), NOTES, number=2,
                         anchor=TEXT.index("[Doc #2]") + len("[Doc #2]"))
    return Turn("msg_doc", (TextPart(TEXT), pdf, notes))


def _spec(tmp_path: Path, executable: Path, **fields: Any) -> LaunchSpec:
    (tmp_path / "state").mkdir(exist_ok=True)
    base: dict[str, Any] = {"team": "t", "member": "m", "executable": str(executable),
                            "prompt": None, "workdir": tmp_path, "state_dir": tmp_path / "state",
                            "permissions": "read", "start_timeout": 90.0,
                            "turn_idle_timeout": 120.0, "host": LocalHost()}
    return LaunchSpec(**(base | fields))


async def _sent() -> None:
    pass


def _last_user_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    [*_, last] = [m for m in body["messages"] if m["role"] == "user"]
    content = last["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _pdf_sha_in(block: dict[str, Any]) -> str:
    return _sha(base64.b64decode(block["source"]["data"]))


# -- Claude Code --------------------------------------------------------------------------------

async def test_real_claude_passes_document_blocks_to_the_api_unchanged(
        tmp_path: Path, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    """The PDF (base64) and the text document (a text source) reach the Messages API as the
    document blocks teamctl wrote — same bytes, same media types, the title kept — each right
    after the text that names it."""
    spec = _spec(tmp_path, claude_bin, model="claude-sonnet-4-5", env={
        "ANTHROPIC_BASE_URL": anthropic.base_url,
        "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy-key-0000",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
        "DISABLE_TELEMETRY": "1"})
    async with ClaudeRuntime().open(spec) as member:
        result = await member.run_turn(_turn(), on_sent=_sent)
    assert result.reply == "pong: , and answer"
    [request] = anthropic.message_requests()
    blocks = [b for b in _last_user_blocks(request["body"])
              if not str(b.get("text", "")).startswith("<system-reminder>")]
    assert [(b["type"], b.get("text")) for b in blocks] == [
        ("text", "read [Doc #1]"), ("document", None), ("text", " then [Doc #2]"),
        ("document", None), ("text", ", and answer")]
    pdf, notes = blocks[1], blocks[3]
    assert (pdf["source"]["type"], pdf["source"]["media_type"], pdf["title"]) == (
        "base64", "application/pdf", "spec.pdf")
    assert _pdf_sha_in(pdf) == _sha(PDF)
    assert notes["source"] == {"type": "text", "media_type": "text/plain",
                               "data": NOTES.decode()}
    assert notes["title"] == "notes.txt"


# -- OpenCode -----------------------------------------------------------------------------------

def _opencode_spec(tmp_path: Path, opencode_bin: Path, anthropic: FakeAnthropic,
                   models: dict[str, Any] | None = None) -> LaunchSpec:
    """OpenCode's built-in ``anthropic`` provider aimed at the fake; its plugin install at a
    closed local port; the model's modalities OpenCode's bundled catalog's unless given."""
    provider: dict[str, Any] = {"options": {"baseURL": f"{anthropic.base_url}/v1"}}
    if models is not None:
        provider["models"] = models
    return _spec(tmp_path, opencode_bin, model="anthropic/claude-sonnet-4-5",
                 env={"ANTHROPIC_API_KEY": "sk-ant-e2e-dummy-key-0000",
                      "npm_config_registry": "http://127.0.0.1:9/"},
                 config={"provider": {"anthropic": provider}})


async def test_real_opencode_passes_a_pdf_file_part_to_the_api_as_a_document_block(
        tmp_path: Path, opencode_bin: Path, anthropic: FakeAnthropic) -> None:
    """A PDF ``file`` part (data URL) to a model whose modalities list ``pdf`` reaches the
    Messages API as a base64 ``document`` block titled with the file name, bytes equal."""
    turn = Turn("msg_doc", (TextPart("read [Doc #1]"), _turn().parts[1]))
    async with OpenCodeRuntime().open(_opencode_spec(tmp_path, opencode_bin, anthropic)) as m:
        await m.run_turn(turn, on_sent=_sent)
    [request] = [r for r in anthropic.message_requests()
                 if any(b.get("type") == "document" for b in _last_user_blocks(r["body"]))]
    [pdf] = [b for b in _last_user_blocks(request["body"]) if b["type"] == "document"]
    assert (pdf["source"]["type"], pdf["source"]["media_type"], pdf["title"]) == (
        "base64", "application/pdf", "spec.pdf")
    assert _pdf_sha_in(pdf) == _sha(PDF)


async def test_real_opencode_replaces_a_pdf_by_an_error_text_when_the_modalities_lack_pdf(
        tmp_path: Path, opencode_bin: Path, anthropic: FakeAnthropic) -> None:
    """OpenCode's own gate: the same model declared ``input: [text, image]`` gets no document,
    only ``ERROR: Cannot read "spec.pdf" (this model does not support pdf input)`` — so the
    modalities OpenCode is configured with must list ``pdf`` for a native PDF."""
    models = {"claude-sonnet-4-5": {"modalities": {"input": ["text", "image"],
                                                   "output": ["text"]}}}
    spec = _opencode_spec(tmp_path, opencode_bin, anthropic, models)
    turn = Turn("msg_doc", (TextPart("read [Doc #1]"), _turn().parts[1]))
    async with OpenCodeRuntime().open(spec) as member:
        await member.run_turn(turn, on_sent=_sent)
    blocks = [b for r in anthropic.message_requests() for b in _last_user_blocks(r["body"])]
    assert not [b for b in blocks if b["type"] == "document"]
    assert any('Cannot read "spec.pdf" (this model does not support pdf input)'
               in str(b.get("text")) for b in blocks)


# -- Qwen Code over ACP -------------------------------------------------------------------------

async def _qwen_turn(tmp_path: Path, qwen_bin: Path, chat: FakeChat,
                     model: str) -> list[dict[str, Any]]:
    spec = _spec(tmp_path, qwen_bin, model=model, options={"acp_agent": "qwen"},
                 args=("--acp", "--auth-type", "openai"),
                 env={"OPENAI_API_KEY": "sk-e2e-dummy-qwen-key", "OPENAI_BASE_URL": chat.base_url})
    async with AcpRuntime().open(spec) as member:
        assert member.embedded_context
        await member.run_turn(_turn(), on_sent=_sent)
    [first, *_] = chat.chat_requests()
    return [p for p in _last_user_blocks(first["body"])
            if not str(p.get("text", "")).startswith("<system-reminder>")]


async def test_real_qwen_sends_a_pdf_resource_as_a_file_part_for_a_pdf_model(
        tmp_path: Path, qwen_bin: Path, chat: FakeChat) -> None:
    """For a model Qwen Code's modality table says reads PDFs (``claude-*``): the PDF resource
    is a chat-completions ``file`` part, bytes equal (named ``document.pdf``, not by its URI);
    the text resource is ``File: <uri>`` and the text; the prompt text comes last, with the
    resources' ``@<uri>`` mentions appended."""
    parts = await _qwen_turn(tmp_path, qwen_bin, chat, "claude-sonnet-4-5")
    [pdf, notes, prompt] = parts
    assert pdf["type"] == "file" and pdf["file"]["filename"] == "document.pdf"
    header, _, data = pdf["file"]["file_data"].partition(",")
    assert header == "data:application/pdf;base64" and _sha(base64.b64decode(data)) == _sha(PDF)
    uri = f"teamctl://doc/{_sha(NOTES)[:12]}/notes.txt"
    assert notes == {"type": "text", "text": f"File: {uri}\n{NOTES.decode()}"}
    assert prompt["text"] == (f"{TEXT}@teamctl://doc/{_sha(PDF)[:12]}/spec.pdf@{uri}")


async def test_real_qwen_drops_a_pdf_resource_for_a_model_it_thinks_reads_no_pdf(
        tmp_path: Path, qwen_bin: Path, chat: FakeChat) -> None:
    """For any other model name the PDF's bytes never reach the API: a placeholder text
    ``[document: application/pdf]`` does; the text resource still arrives whole."""
    parts = await _qwen_turn(tmp_path, qwen_bin, chat, "text-model")
    assert parts[0] == {"type": "text", "text": "[document: application/pdf]"}
    assert not [p for p in parts if p["type"] == "file"]
    assert parts[1]["text"].endswith(f"\n{NOTES.decode()}")
