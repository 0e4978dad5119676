"""Documents through the daemon and the CLI with the real pinned CLIs (issue 31,
docs/runtimes.md "Documents"): ``teamctl send --attach spec.pdf --attach notes.md`` to a member
of each runtime, then what reached the fake model API is compared with what teamctl planned and
journaled (``history --json``) for that member — the route, and the sha256 of every variant.

- Claude Code: both natively — the PDF as a base64 ``document`` block with the planned sha256
  (the file itself), the notes as a text-source ``document`` block equal to the file's text.
- Codex (``gpt-5.4-mini``): the pages route — the 3 rendered pages as ``input_image``s with the
  planned sha256s, the page-marked text, and the path of the PDF itself, readable there.
- OpenCode: ``anthropic/claude-sonnet-4-5`` (catalog pdf = true) natively, the planned bytes
  at the Messages API; ``openrouter/moonshotai/kimi-k2.6`` (no pdf) as its page images.
- Qwen Code over ACP (``vision = true``; the catalog does not know Qwen models): the notes as
  an embedded resource (its text at the chat API), the PDF as its page images.

Run with ``-s`` for the table of planned and API sha256 per runtime (docs/runtimes.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import fake_chat, fake_responses
from tests.support.pdfs import text_pdf
from tests.support.real_members import claude_member, codex_member, opencode_member, qwen_member

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e

PAGES = ("Page one: the login form", "Page two: the session API", "Page three: errors")
NOTES = "# Notes\n\n- the login form posts to /api/session\n- été: UTF-8 kept\n"
TEXT = "compare [Doc #1] with [Doc #2]"
_ROWS: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _table() -> Iterator[None]:
    """The rows every test adds, printed once at the end (``-s``)."""
    yield
    print("\n| runtime / model | document | route | planned sha256 | at the API | note |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(_ROWS))


def _row(label: str, what: str, route: str, planned: str, api: str | None,
         note: str = "") -> None:
    """One table row; ``api``: the sha256 at the API, or what was found there (a text)."""
    cell = "—" if api is None else api[:12] if re.fullmatch("[0-9a-f]{64}", api) else api
    _ROWS.append(f"| {label} | {what} | {route} | {planned[:12]} | {cell} | {note} |")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _documents(teamctl: Teamctl) -> tuple[Path, Path]:
    spec = teamctl.workdir / "spec.pdf"
    spec.write_bytes(text_pdf(*PAGES))
    notes = teamctl.workdir / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")
    return spec, notes


def _launch(teamctl: Teamctl, *members: dict[str, Any]) -> None:
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", list(members))),
                           timeout=240)
    assert launched.returncode == 0, launched.stderr + launched.stdout


def _send(teamctl: Teamctl, member: str) -> list[dict[str, Any]]:
    """``send --attach spec.pdf --attach notes.md`` (waited for); the attachments as
    ``history --json`` journals them, checked equal to the send receipt's."""
    spec, notes = _documents(teamctl)
    sent = teamctl.run("send", "--attach", str(spec), "--attach", str(notes), member, TEXT,
                       "--wait", "--timeout", "180", "--json", timeout=240)
    assert sent.returncode == 0, sent.stderr + sent.stdout
    receipt = json.loads(sent.stdout)
    [message] = [m for m in teamctl.json("history", member)["messages"]
                 if m["id"] == receipt["id"]]
    assert [_journaled(a) for a in receipt["attachments"]] == [
        _journaled(a) for a in message["attachments"]], "the receipt is what is journaled"
    attachments: list[dict[str, Any]] = message["attachments"]
    assert [(a["number"], a["name"], a["original_sha256"]) for a in attachments] == [
        (1, "spec.pdf", _sha(spec.read_bytes())), (2, "notes.md", _sha(NOTES.encode()))]
    return attachments


def _journaled(attachment: dict[str, Any]) -> tuple[Any, ...]:
    return (attachment["kind"], attachment["route"], attachment["pages"],
            attachment["sha256"], [p["sha256"] for p in attachment["page_variants"]])


def _pages_planned(pdf: dict[str, Any]) -> list[str]:
    """A PDF on the pages route: its 3 planned page images' sha256, in order."""
    assert (pdf["kind"], pdf["route"], pdf["pages"]) == ("document", "pages", 3), pdf
    pages = [p["sha256"] for p in pdf["page_variants"]]
    assert len(pages) == 3 and all(p["mime"].startswith("image/") for p in pdf["page_variants"])
    return pages


def _page_rows(label: str, pdf: dict[str, Any], api: list[str]) -> None:
    pages = pdf["page_variants"]
    for n, (page, got) in enumerate(zip(pages, api + [""] * len(pages), strict=False), 1):
        size = f"{page['mime']} {page['width']}×{page['height']} {page['bytes']:,} B"
        _row(label, f"spec.pdf page {n}", "pages", page["sha256"], got or None,
             f"{size}, as planned" if page["sha256"] == got else f"{size}, DIFFERS")


def _derived_text_said(text: str) -> None:
    """The PDF's page-marked text under its [Doc #1] header, as the member reads it."""
    assert "[Doc #1] spec.pdf (a PDF of 3 pages): pages 1 to 3 are the 3 page images" in text
    for n, words in enumerate(PAGES, 1):
        assert f"--- page {n} ---\n{words}\n" in text, (n, text)


# -- what reached each fake API -----------------------------------------------------------------

def _newest_user_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The newest user message's blocks (Messages API) or parts (chat completions)."""
    [*_, last] = [m for m in body["messages"] if m["role"] == "user"]
    content = last["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _anthropic_turn(anthropic: FakeAnthropic) -> list[dict[str, Any]]:
    """The newest user message's blocks of the first request that carried a document."""
    for request in anthropic.message_requests():
        blocks = _newest_user_parts(request["body"])
        if any(b.get("type") == "document" for b in blocks):
            return blocks
    seen = [_newest_user_parts(r["body"]) for r in anthropic.message_requests()]
    raise AssertionError(f"no request carried a document block: {seen}")


def _texts(parts: list[dict[str, Any]]) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts if "text" in p)


def _chat_turn(chat: FakeChat, marker: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The newest user message of the first chat request whose text names ``marker``: its
    parts, and the sha256 of each image that arrived in it."""
    for request in chat.chat_requests():
        parts = _newest_user_parts(request["body"])
        if marker in _texts(parts):
            return parts, [i["sha256"] for i in fake_chat.newest_user_images(request["body"])]
    raise AssertionError(f"no chat request names {marker!r}")


# -- Claude Code --------------------------------------------------------------------------------

def test_real_claude_gets_the_pdf_and_the_notes_as_the_planned_document_blocks(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    """Both natively: the PDF as a base64 document block whose bytes are the journaled
    variant's (the file itself, 3 pages), the notes as a text-source block equal to the file;
    the receipt says route native for each."""
    _launch(teamctl, claude_member("lead", claude_bin, anthropic))
    pdf, notes = _send(teamctl, "lead")
    assert (pdf["kind"], pdf["route"], pdf["pages"], pdf["page_variants"]) == (
        "document", "native", 3, [])
    assert pdf["sha256"] == pdf["original_sha256"], "native: the PDF itself"
    assert (notes["kind"], notes["route"]) == ("text", "native")
    blocks = _anthropic_turn(anthropic)
    documents = [b for b in blocks if b["type"] == "document"]
    assert [(d["source"]["type"], d["source"]["media_type"], d.get("title"))
            for d in documents] == [("base64", "application/pdf", "spec.pdf"),
                                    ("text", "text/plain", "notes.md")]
    api_pdf = _sha(base64.b64decode(documents[0]["source"]["data"]))
    api_notes = documents[1]["source"]["data"]
    label = "Claude Code 2.1.332, claude-sonnet-4-5"
    _row(label, "spec.pdf", "native", pdf["sha256"], api_pdf)
    _row(label, "notes.md", "native", notes["sha256"], _sha(api_notes.encode()),
         "text source, equal to the file" if api_notes == NOTES else "text DIFFERS")
    assert api_pdf == pdf["sha256"]
    assert api_notes == NOTES and _sha(api_notes.encode()) == notes["sha256"]


# -- Codex --------------------------------------------------------------------------------------

def test_real_codex_gets_the_planned_page_images_the_page_text_and_the_pdfs_path(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    """Codex takes no PDF: the 3 planned page images reach the Responses API byte for byte
    (codex passes a planned image through), the text page by page under [Doc #1], the notes
    under [Doc #2], and the PDF itself at a path its tools can read."""
    _launch(teamctl, codex_member("rev", codex_bin, responses))
    pdf, notes = _send(teamctl, "rev")
    planned = _pages_planned(pdf)
    assert (notes["kind"], notes["route"]) == ("text", "text")
    [request] = [r for r in responses.response_requests()
                 if fake_responses.newest_user_images(r["body"])][:1]
    api = [i["sha256"] for i in fake_responses.newest_user_images(request["body"])]
    _page_rows("codex 0.171.0, gpt-5.4-mini", pdf, api)
    text = "\n".join(str(p.get("text", "")) for m in request["body"]["input"]
                     if m.get("type") == "message" and m.get("role") == "user"
                     for p in m.get("content") or [] if p.get("type") == "input_text")
    _row("codex 0.171.0, gpt-5.4-mini", "notes.md", "text", notes["sha256"],
         "its text" if NOTES.rstrip() in text else None, "in the input text")
    assert api == planned
    _derived_text_said(text)
    assert f"[Doc #2] notes.md (a text file):\n{NOTES.rstrip()}\n--- end of [Doc #2] ---" in text
    found = re.search(r"\(the file itself, spec\.pdf, is at (\S+): your tools can read it\)",
                      text)
    assert found, text
    placed = Path(found[1])
    assert _sha(placed.read_bytes()) == pdf["original_sha256"], "the PDF's bytes, readable"


# -- OpenCode -----------------------------------------------------------------------------------

def _opencode_anthropic(name: str, opencode_bin: Path, anthropic: FakeAnthropic) -> dict[str, Any]:
    """OpenCode's built-in ``anthropic`` provider aimed at the fake Messages API; the model's
    modalities are teamctl's to write (the catalog says pdf = true)."""
    return {"name": name, "runtime": "opencode", "model": "anthropic/claude-sonnet-4-5",
            "command": str(opencode_bin), "start_timeout": 90.0, "turn_idle_timeout": 120.0,
            "env": {"ANTHROPIC_API_KEY": "sk-ant-e2e-dummy-key-0000",
                    "npm_config_registry": "http://127.0.0.1:9/"},
            "config": {"provider": {"anthropic": {
                "options": {"baseURL": f"{anthropic.base_url}/v1"}}}}}


def _opencode_openrouter(name: str, opencode_bin: Path, chat: FakeChat) -> dict[str, Any]:
    """kimi-k2.6 through OpenCode's ``openrouter`` provider aimed at the fake chat API."""
    member = opencode_member(name, opencode_bin, chat, model="openrouter/moonshotai/kimi-k2.6")
    member["config"] = {"provider": {"openrouter": {
        "options": {"baseURL": chat.base_url, "apiKey": "sk-e2e-dummy-openrouter-key"}}}}
    return member


def test_real_opencode_gets_a_pdf_natively_or_as_pages_by_its_models_catalog_entry(
        teamctl: Teamctl, opencode_bin: Path, anthropic: FakeAnthropic, chat: FakeChat) -> None:
    """anthropic/claude-sonnet-4-5 (pdf = true, written into OpenCode's modalities): the PDF
    reaches the Messages API natively with the planned sha256. kimi-k2.6 (no pdf): the pages
    route, the planned page images at the chat API, its page text, no error text."""
    _launch(teamctl, _opencode_anthropic("doc", opencode_bin, anthropic),
            _opencode_openrouter("kimi", opencode_bin, chat))
    pdf, notes = _send(teamctl, "doc")
    assert (pdf["route"], pdf["pages"], pdf["sha256"]) == ("native", 3, pdf["original_sha256"])
    assert notes["route"] == "text", "OpenCode carries no text document"
    blocks = _anthropic_turn(anthropic)
    [document] = [b for b in blocks if b["type"] == "document"]
    api_pdf = _sha(base64.b64decode(document["source"]["data"]))
    label = "OpenCode 1.18.33, anthropic/claude-sonnet-4-5"
    _row(label, "spec.pdf", "native", pdf["sha256"], api_pdf,
         f"document block, title {document.get('title')!r}")
    _row(label, "notes.md", "text", notes["sha256"],
         "its text" if NOTES.rstrip() in _texts(blocks) else None, "in a text block")
    assert api_pdf == pdf["sha256"]
    assert "Cannot read" not in _texts(blocks)
    assert f"[Doc #2] notes.md (a text file):\n{NOTES.rstrip()}" in _texts(blocks)

    pdf, notes = _send(teamctl, "kimi")
    planned = _pages_planned(pdf)
    parts, api = _chat_turn(chat, "[Doc #1] spec.pdf")
    _page_rows("OpenCode 1.18.33, openrouter/moonshotai/kimi-k2.6", pdf, api)
    assert api == planned
    _derived_text_said(_texts(parts))
    assert "ERROR: Cannot read" not in _texts(parts), "OpenCode replaced nothing"
    assert not [p for p in parts if p.get("type") == "file"], "no PDF part"


# -- Qwen Code over ACP -------------------------------------------------------------------------

def test_real_qwen_gets_the_notes_as_a_resource_and_the_pdf_as_its_page_images(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    """The notes reach Qwen as an embedded resource (native): the chat API gets its text. The
    PDF goes derived — the catalog does not know Qwen models, the member says vision = true —
    so its planned page images reach the API, and its page text."""
    _launch(teamctl, qwen_member("qw", qwen_bin, chat, model="qwen3-vl-plus", vision=True))
    pdf, notes = _send(teamctl, "qw")
    planned = _pages_planned(pdf)
    assert (notes["kind"], notes["route"], notes["sha256"]) == (
        "text", "native", _sha(NOTES.encode()))
    parts, api = _chat_turn(chat, "[Doc #1] spec.pdf")
    label = "Qwen Code 0.24.4 (ACP), qwen3-vl-plus"
    _page_rows(label, pdf, api)
    text = _texts(parts)
    resource = [p["text"] for p in parts if p.get("type") == "text"
                and str(p.get("text", "")).endswith(NOTES)]
    _row(label, "notes.md", "native", notes["sha256"],
         _sha(NOTES.encode()) if resource else None,
         f"text part {resource[0].partition(chr(10))[0]!r} + the text" if resource else "")
    assert api == planned
    _derived_text_said(text)
    assert resource and resource[0].startswith(
        f"File: teamctl://doc/{notes['sha256'][:12]}/notes.md\n"), parts
    assert "[document:" not in text


def test_real_qwen_does_not_glue_a_documents_text_to_the_resource_mention_before_it(
        teamctl: Teamctl, qwen_bin: Path, chat: FakeChat) -> None:
    """Qwen Code joins a prompt's text blocks and its resources' ``@<uri>`` mentions into one
    text with nothing between them: the ACP adapter starts each text block after the first on
    its own paragraph, so the model reads ``[Doc #1] spec.pdf …`` as a header of its own,
    never ``…/notes.md[Doc #1] spec.pdf`` (a URI running into the header)."""
    _launch(teamctl, qwen_member("qw", qwen_bin, chat, model="qwen3-vl-plus", vision=True))
    _send(teamctl, "qw")
    parts, _ = _chat_turn(chat, "[Doc #1] spec.pdf")
    [joined] = [p["text"] for p in parts if p.get("type") == "text"
                and "[Doc #1] spec.pdf" in str(p.get("text"))]
    assert joined.startswith(f"{TEXT}@teamctl://doc/"), joined
    assert "/notes.md\n\n[Doc #1] spec.pdf (a PDF of 3 pages)" in joined, joined
