"""A receipt against the fake model API (docs/runtimes.md § ACP, "What survives in one prompt"):
``teamctl send --attach … --wait --json`` names the sha256 of every image, page image and native
PDF it sent; these helpers list them, and list what reached the fake API in the requests the
turn made — so a test asserts the receipt is true, byte for byte, whatever the agent did."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any

from tests.support import images
from tests.support.pdfs import text_pdf

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_provider import FakeProvider

NOTES = "# Release notes\n\n- the login form posts to /api/session\n"
# what an agent puts in place of media it decided not to send (Qwen Code's placeholders)
PLACEHOLDERS = ("[image:", "[document:", "[Unsupported ")


def attachments(workdir: Path) -> dict[str, Path]:
    """A screenshot, a text file and a 2-page PDF in ``workdir``, by name."""
    shot = images.save(images.screenshot(1280, 800), workdir / "shot.png", "PNG")
    notes = workdir / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")
    spec = workdir / "spec.pdf"
    spec.write_bytes(text_pdf("Page one: the login form", "Page two: the session API"))
    return {"shot.png": shot, "notes.md": notes, "spec.pdf": spec}


def send(teamctl: Teamctl, api: FakeProvider, member: str, text: str,
         *paths: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``send --attach …`` waited for: its receipt, and the requests the API got meanwhile."""
    before = len(api.requests)
    flags = [arg for path in paths for arg in ("--attach", str(path))]
    done = teamctl.run("send", *flags, member, text, "--wait", "--timeout", "180", "--json",
                       timeout=240)
    assert done.returncode == 0, done.stderr + done.stdout
    with api.lock:
        return json.loads(done.stdout), list(api.requests[before:])


def planned_media(receipt: dict[str, Any]) -> dict[str, str]:
    """Every image, page image and native PDF the receipt says was sent: sha256 → what."""
    planned = {}
    for item in receipt["attachments"]:
        name = item["name"]
        if item.get("kind", "image") == "image" or item["mime"] == "application/pdf":
            planned[item["sha256"]] = f"{name} ({item.get('route') or 'image'})"
        for n, page in enumerate(item.get("page_variants") or [], 1):
            planned[page["sha256"]] = f"{name} page {n}"
    return planned


def _sha(data: str) -> str:
    return hashlib.sha256(base64.b64decode(data.partition(",")[2] or data)).hexdigest()


def at_gemini(requests: list[dict[str, Any]]) -> tuple[set[str], list[str]]:
    """The sha256 of every ``inlineData`` part, and every text part, of the newest user content
    of each request to the fake Gemini API."""
    found, texts = set(), []
    for request in requests:
        users = [c for c in request["body"].get("contents", []) if c.get("role") == "user"]
        for part in (users[-1].get("parts") or []) if users else []:
            if isinstance(part.get("inlineData"), dict):
                found.add(_sha(part["inlineData"]["data"]))
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
    return found, texts


def at_chat(requests: list[dict[str, Any]]) -> tuple[set[str], list[str]]:
    """The sha256 of every ``image_url`` and ``file`` data URL, and every text part, of the
    newest user message of each request to the fake chat-completions API."""
    found, texts = set(), []
    for request in requests:
        users = [m for m in request["body"].get("messages", []) if m.get("role") == "user"]
        content = users[-1].get("content") if users else []
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if part.get("type") == "image_url":
                found.add(_sha(part["image_url"]["url"]))
            elif part.get("type") == "file":
                found.add(_sha(part["file"]["file_data"]))
            elif part.get("type") == "text":
                texts.append(str(part.get("text")))
    return found, texts


def assert_true_receipt(receipt: dict[str, Any], found: set[str], texts: list[str]) -> None:
    """Each image, page and native PDF of the receipt reached the API (sha256), a text file
    its text; no placeholder stood in for any."""
    assert receipt["state"] == "answered", receipt
    missing = {what for sha, what in planned_media(receipt).items() if sha not in found}
    assert not missing, f"the receipt names bytes the API never got: {sorted(missing)}"
    assert not [t for t in texts if t.startswith(PLACEHOLDERS)], texts
    for item in receipt["attachments"]:
        if item["mime"] == "text/plain" and item.get("route") == "native":
            assert any(NOTES.strip() in t for t in texts), "the text file's text arrived"
