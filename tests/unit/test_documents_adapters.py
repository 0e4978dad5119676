"""Native documents in each runtime adapter (issue 31, docs/runtimes.md "Documents"): a
DocumentPart becomes a Claude ``document`` block at its ``[Doc #N]`` anchor, an OpenCode PDF
``file`` part, an ACP embedded resource (only to an agent with ``embeddedContext``); Codex takes
none. Whatever cannot be carried is a typed, non-retryable refusal — never a crash, never bytes
sent as text. A hostile name (quotes, newlines, ``../``) never breaks the JSON or the file name."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.contracts import (
    DocumentPart,
    ImagePart,
    LaunchSpec,
    TextPart,
    Turn,
    TurnFailed,
)
from runtimes.acp.runtime import AcpRuntime
from runtimes.claude.runtime import ClaudeRuntime, user_line
from runtimes.codex.app_server import CodexAppServer
from runtimes.codex.exec import CodexMember
from runtimes.codex.runtime import CodexRuntime
from runtimes.hosts.local.host import LocalHost
from runtimes.kit.documents import safe_name
from runtimes.opencode.message import message_body
from runtimes.opencode.runtime import OpenCodeRuntime, OpenCodeServer
from tests.support.driver import REPO
from tests.support.pdfs import text_pdf

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

FAKE_ACP = REPO / "fixtures" / "bin" / "fake-acp"
PDF = text_pdf("one", "two", "three")
NOTES = "notes: ünïcode, \"quotes\", a {brace}\n".encode()
HOSTILE = 'a"b\n../../etc/passwd\\..\\x\u202e.pdf'


def _doc(data: bytes, mime: str, name: str = "spec.pdf", number: int = 1,
         anchor: int | None = None) -> DocumentPart:
    return DocumentPart(mime, name, hashlib.sha256(data).hexdigest(), data,
                        pages=3 if mime == "application/pdf" else None, number=number,
                        anchor=anchor)


def _after(text: str, marker: str) -> int:
    return text.index(marker) + len(marker)


def _spec(tmp_path: Path, **fields: Any) -> LaunchSpec:
    (tmp_path / "state").mkdir(exist_ok=True)
    base: dict[str, Any] = {"team": "t", "member": "m", "executable": str(FAKE_ACP),
                            "model": None, "prompt": None, "workdir": tmp_path,
                            "state_dir": tmp_path / "state", "start_timeout": 20.0,
                            "host": LocalHost()}
    return LaunchSpec(**(base | fields))


class _NoProcess:
    """A process that was never started: the adapters refuse before they write to it."""

    pid = None
    returncode = None
    stdin = stdout = stderr = None


async def _sent() -> None:
    raise AssertionError("a refused turn is never reported sent")


# -- what each transport says it carries ---------------------------------------------------------

def test_each_runtime_declares_the_documents_it_carries_natively() -> None:
    """The planner sends a document natively only where the adapter carries it: Claude and ACP
    take PDF and text, OpenCode PDF only, Codex none (openai/codex#1797)."""
    assert ClaudeRuntime.capabilities.document_mimes == {"application/pdf", "text/plain"}
    assert AcpRuntime.capabilities.document_mimes == {"application/pdf", "text/plain"}
    assert OpenCodeRuntime.capabilities.document_mimes == {"application/pdf"}
    assert CodexRuntime.capabilities.document_mimes == frozenset()


# -- Claude ----------------------------------------------------------------------------------------

def test_claude_puts_each_document_right_after_the_marker_that_names_it() -> None:
    """Text before the marker, the document (a PDF as base64, a text file as its text), the
    text after; an image and a document interleave by their anchors; an unnamed document goes
    after the text; no text is lost or repeated."""
    text = "read [Doc #1] and look at [Image #1], then answer"
    pdf = _doc(PDF, "application/pdf", anchor=_after(text, "[Doc #1]"))
    image = ImagePart("image/png", 1, 1, "c" * 64, b"png", anchor=_after(text, "[Image #1]"))
    notes = _doc(NOTES, "text/plain", "notes.txt", number=2)
    content = user_line(Turn("01A", (TextPart(text), pdf, image, notes)))["message"]["content"]
    assert [b["type"] for b in content] == ["text", "document", "text", "image", "text",
                                            "document"]
    assert [b["text"] for b in content if b["type"] == "text"] == [
        "read [Doc #1]", " and look at [Image #1]", ", then answer"]
    assert content[1] == {"type": "document", "title": "spec.pdf", "source": {
        "type": "base64", "media_type": "application/pdf",
        "data": base64.b64encode(PDF).decode()}}
    assert hashlib.sha256(base64.b64decode(content[1]["source"]["data"])).hexdigest() == \
        pdf.sha256
    assert content[5] == {"type": "document", "title": "notes.txt", "source": {
        "type": "text", "media_type": "text/plain", "data": NOTES.decode()}}


def test_claude_titles_a_hostile_document_with_its_safe_base_name_on_one_json_line() -> None:
    """The block's ``title`` (which Claude Code passes to the API) is the safe base name, and
    no name breaks the stdin line: it stays one line of valid JSON."""
    from runtimes.kit.framing import encode_line

    part = _doc(NOTES, "text/plain", HOSTILE)
    line = encode_line(user_line(Turn("01A", (TextPart("see"), part))))
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    block = json.loads(line)["message"]["content"][1]
    assert block == {"type": "document", "title": "x_.pdf", "source": {
        "type": "text", "media_type": "text/plain", "data": NOTES.decode()}}


def test_claude_refuses_a_text_document_that_is_not_utf8_as_a_typed_turn_failure() -> None:
    """Never an unhandled UnicodeDecodeError: a TurnFailed, not retryable, saying what to do."""
    part = _doc(b"caf\xe9", "text/plain", "latin1.txt")
    with pytest.raises(TurnFailed) as failed:
        user_line(Turn("01A", (TextPart("see"), part)), member="m")
    assert failed.value.retryable is False
    assert "not UTF-8" in failed.value.message and 'documents = "text"' in failed.value.message


# -- OpenCode --------------------------------------------------------------------------------------

def _opencode_spec(tmp_path: Path) -> LaunchSpec:
    return _spec(tmp_path, model="anthropic/claude-sonnet-4-5")


def _opencode(tmp_path: Path) -> OpenCodeServer:
    process: Process = _NoProcess()  # type: ignore[assignment]
    return OpenCodeServer(process, _opencode_spec(tmp_path), 1, "pw", 30.0)


@pytest.mark.anyio
async def test_opencode_sends_a_pdf_as_a_file_part_with_a_data_url(tmp_path: Path) -> None:
    """A PDF is a ``file`` part: its MIME, a safe base name, the bytes as a data URL."""
    body = message_body(_opencode_spec(tmp_path),
                        Turn("01A", (TextPart("read [Doc #1]"), _doc(PDF, "application/pdf"))))
    assert body["parts"][1] == {"type": "file", "mime": "application/pdf",
                                "filename": "spec.pdf",
                                "url": "data:application/pdf;base64,"
                                       + base64.b64encode(PDF).decode()}
    data = body["parts"][1]["url"].partition(",")[2]
    assert hashlib.sha256(base64.b64decode(data)).hexdigest() == hashlib.sha256(PDF).hexdigest()


@pytest.mark.anyio
async def test_opencode_gets_a_safe_base_name_for_a_hostile_document_name(
        tmp_path: Path) -> None:
    """Quotes, newlines, path separators, ``..`` and control or bidi characters never reach
    OpenCode's file name: a plain base name does; the body stays valid JSON."""
    body = message_body(_opencode_spec(tmp_path),
                        Turn("01A", (_doc(PDF, "application/pdf", HOSTILE),)))
    name = body["parts"][0]["filename"]
    assert name == "x_.pdf"
    assert json.loads(json.dumps(body)) == body
    for bad in ('"', "\n", "/", "\\", "..", "\u202e"):
        assert bad not in name


def test_a_name_with_nothing_safe_left_is_named_after_its_sha256() -> None:
    """An empty or dots-only base name becomes ``document-<sha12>``; a long one is cut to 120
    characters, keeping its extension."""
    part = _doc(PDF, "application/pdf", "../..")
    assert safe_name(part) == f"document-{part.sha256[:12]}"
    long = safe_name(_doc(PDF, "application/pdf", "x" * 300 + ".pdf"))
    assert len(long) == 120 and long.endswith("x.pdf")


@pytest.mark.anyio
async def test_opencode_refuses_a_text_document_before_anything_is_sent(tmp_path: Path) -> None:
    """OpenCode turns a text file part into a Read-tool transcript of a path (protocols/
    opencode.md §3): a text document is never planned for it, and one that arrives anyway
    fails the turn, not retryable, before the message is posted."""
    server = _opencode(tmp_path)
    turn = Turn("01A", (TextPart("read"), _doc(NOTES, "text/plain", "notes.txt")))
    with pytest.raises(TurnFailed) as failed:
        await server.run_turn(turn, on_sent=_sent)
    assert failed.value.retryable is False
    assert "PDF documents only" in failed.value.message


# -- ACP -------------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_acp_sends_documents_as_embedded_resources(tmp_path: Path) -> None:
    """To an agent with ``embeddedContext`` (the fake, as Qwen Code), a PDF is a ``resource``
    with a base64 ``blob``, a text file one with its ``text``; each names itself with a
    ``teamctl://doc/<sha12>/<safe name>`` URI, the hostile name quoted, never a file: URI."""
    log = tmp_path / "received.jsonl"
    spec = _spec(tmp_path, env={"FAKE_ACP_LOG": str(log)})
    pdf = _doc(PDF, "application/pdf")
    notes = _doc(NOTES, "text/plain", HOSTILE, number=2)

    async def sent() -> None:
        pass

    async with AcpRuntime().open(spec) as agent:
        assert agent.embedded_context
        await agent.run_turn(Turn("msg_1", (TextPart("read both"), pdf, notes)), on_sent=sent)
    [prompt] = [json.loads(line)["params"]["prompt"] for line in log.read_text().splitlines()
                if json.loads(line).get("method") == "session/prompt"]
    assert prompt == [
        {"type": "text", "text": "read both"},
        {"type": "resource", "resource": {
            "uri": f"teamctl://doc/{pdf.sha256[:12]}/spec.pdf", "mimeType": "application/pdf",
            "blob": base64.b64encode(PDF).decode()}},
        {"type": "resource", "resource": {
            "uri": f"teamctl://doc/{notes.sha256[:12]}/x_.pdf", "mimeType": "text/plain",
            "text": NOTES.decode()}},
    ]


@pytest.mark.anyio
async def test_acp_refuses_a_document_to_an_agent_without_embedded_context(
        tmp_path: Path) -> None:
    """An agent whose promptCapabilities lack ``embeddedContext`` gets no resource: the turn
    fails before ``session/prompt``, not retryable, saying to send documents as text."""
    log = tmp_path / "received.jsonl"
    spec = _spec(tmp_path, env={"FAKE_ACP_LOG": str(log)})
    async with AcpRuntime().open(spec) as agent:
        agent.capabilities = {**agent.capabilities, "promptCapabilities": {"image": True}}
        with pytest.raises(TurnFailed) as failed:
            await agent.run_turn(Turn("msg_1", (TextPart("read"),
                                                _doc(PDF, "application/pdf"))), on_sent=_sent)
    assert failed.value.retryable is False
    assert "does not take documents" in failed.value.message
    assert 'documents = "text"' in failed.value.message
    assert "session/prompt" not in log.read_text()


# -- Codex -----------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_codex_exec_refuses_a_document_instead_of_crashing(tmp_path: Path) -> None:
    """Codex takes no document (document_mimes is empty); one that arrives anyway is a
    non-retryable TurnFailed before any ``codex exec`` is started — never an AssertionError."""
    member = CodexMember(_spec(tmp_path), None, "0.171.0")  # type: ignore[arg-type]
    with pytest.raises(TurnFailed) as failed:
        await member.run_turn(Turn("01A", (TextPart("read"), _doc(PDF, "application/pdf"))),
                              on_sent=_sent)
    assert failed.value.retryable is False and "codex takes" in failed.value.message


@pytest.mark.anyio
async def test_codex_app_server_refuses_a_document_instead_of_crashing(tmp_path: Path) -> None:
    """As exec: a document never reaches ``turn/start``; the turn fails, not retryable."""
    process: Process = _NoProcess()  # type: ignore[assignment]
    server = CodexAppServer(process, _spec(tmp_path))
    with pytest.raises(TurnFailed) as failed:
        await server.run_turn(Turn("01A", (TextPart("read"), _doc(NOTES, "text/plain"))),
                              on_sent=_sent)
    assert failed.value.retryable is False and "codex takes" in failed.value.message
