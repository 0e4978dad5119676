"""A fake Gemini API on 127.0.0.1 for the real Gemini CLI (``GOOGLE_GEMINI_BASE_URL`` points its
API client here; docs/runtimes.md § ACP, "Gemini CLI at the API"): ``POST
/v1beta/models/{model}:streamGenerateContent?alt=sse`` answered with SSE chunks of
``GenerateContentResponse`` and ``POST /v1beta/models/{model}:generateContent`` (the CLI's
``generateJson`` utility calls: the model router's classifier, …) with one JSON response.

It records every request (the ``x-goog-api-key`` header only as a fingerprint) and answers
``pong: <newest user text>`` with usage metadata; scripted texts make it call a tool.
``inlineData`` parts are decoded and described (MIME, width, height, bytes, sha256).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures"))
from imageinfo import describe

from tests.support.fake_provider import FakeProvider, sse

PROMPT_TOKENS, OUTPUT_TOKENS = 17, 5


def _last_user(body: dict[str, Any]) -> list[dict[str, Any]]:
    for content in reversed(body.get("contents", [])):
        if content.get("role") == "user":
            return list(content.get("parts") or [])
    return []


def newest_user_text(body: dict[str, Any]) -> str:
    for part in reversed(_last_user(body)):
        if isinstance(part.get("text"), str) and part["text"].strip():
            return str(part["text"])
    return ""


def newest_user_images(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``inlineData`` parts of the newest user content, decoded and described."""
    found = []
    for part in _last_user(body):
        inline = part.get("inlineData")
        if isinstance(inline, dict):
            info = describe(base64.b64decode(inline.get("data", "")))
            info["inline_mime"] = inline.get("mimeType")
            found.append(info)
    return found


def user_texts(body: dict[str, Any]) -> list[str]:
    """Every user text part of the request's conversation, oldest first (the history)."""
    return [str(p["text"]) for c in body.get("contents", []) if c.get("role") == "user"
            for p in c.get("parts") or [] if isinstance(p.get("text"), str)]


def declared_tools(body: dict[str, Any]) -> set[str]:
    return {d.get("name") for t in body.get("tools", [])
            for d in t.get("functionDeclarations", [])}


def function_response(body: dict[str, Any]) -> dict[str, Any] | None:
    """The newest ``functionResponse`` part when the last content answers a tool call."""
    contents = body.get("contents", [])
    for part in (contents[-1].get("parts") or []) if contents else []:
        if isinstance(part.get("functionResponse"), dict):
            return part["functionResponse"]  # type: ignore[no-any-return]
    return None


class FakeGemini(FakeProvider):
    @property
    def base_url(self) -> str:
        return self.root

    def accepts(self, path: str) -> bool:
        return path.startswith("/v1beta/models/")

    def turn_requests(self) -> list[dict[str, Any]]:
        """The turn's own requests (streamGenerateContent), not the utility calls."""
        return self.recorded(":streamGenerateContent")

    def error_body(self, status: int) -> dict[str, Any]:
        return {"error": {"code": status, "message": f"API key not valid (fake {status})",
                          "status": "INVALID_ARGUMENT"}}

    def answer(self, path: str, body: dict[str, Any]) -> tuple[bytes, str]:
        if ":streamGenerateContent" in path:
            return self.stream(body), "text/event-stream"
        schema = (body.get("generationConfig") or {}).get("responseJsonSchema") or {}
        fields = set(schema.get("properties") or {})
        if {"complexity_score", "complexity_reasoning"} <= fields:  # the model router
            text = json.dumps({"complexity_reasoning": "a fake's answer", "complexity_score": 5})
        elif fields:
            text = json.dumps({name: "" for name in fields})
        else:
            text = f"pong: {newest_user_text(body)}"
        return json.dumps(_response([{"text": text}])).encode(), "application/json"

    def stream(self, body: dict[str, Any]) -> bytes:
        """``pong: <text>``; scripted tools: ``DO_CALL <tool> <json args>`` → that function
        call, ``DO_SHELL <command>`` → ``run_shell_command``, ``DO_WRITE <path>`` →
        ``write_file``; after the tool's answer, ``done: <its response>``."""
        answered = function_response(body)
        text = newest_user_text(body)
        call = None
        if answered is not None:
            parts: list[dict[str, Any]] = [
                {"text": f"done: {json.dumps(answered.get('response'))[-300:]}"}]
        elif text.startswith("DO_CALL "):
            _, tool, arguments = text.split(" ", 2)
            call = {"name": tool, "args": json.loads(arguments)}
        elif text.startswith("DO_SHELL "):
            call = {"name": "run_shell_command",
                    "args": {"command": text[9:], "description": "Run a test command"}}
        elif text.startswith("DO_WRITE "):
            call = {"name": "write_file", "args": {"file_path": text[9:],
                                                   "content": "written by fake model\n"}}
        if call is not None:
            parts = [{"functionCall": call}]
        elif answered is None:
            parts = [{"text": f"pong: {text}"}]
        return sse([(None, _response(parts))])


def _response(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``GenerateContentResponse``: the parts, the finish reason and the usage."""
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0,
                            "finishReason": "STOP"}], "modelVersion": "fake-gemini",
            "usageMetadata": {"promptTokenCount": PROMPT_TOKENS,
                              "candidatesTokenCount": OUTPUT_TOKENS,
                              "totalTokenCount": PROMPT_TOKENS + OUTPUT_TOKENS}}
