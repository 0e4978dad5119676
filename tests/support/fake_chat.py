"""A fake OpenAI-compatible chat-completions API on 127.0.0.1, for the real OpenCode
(protocols/opencode.md §4.3, §5.4): ``POST /v1/chat/completions`` answered with SSE chunks, an
error status on demand, and a dead npm registry under ``/npmreg/`` (OpenCode tries to install a
plugin at every start; pointing ``npm_config_registry`` here makes that fail fast and locally).

It records every chat request and answers ``pong: <newest user text>``. ``image_url`` data URLs
are decoded and described (MIME, width, height, bytes, sha256).
"""

from __future__ import annotations

import base64
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures"))
from imageinfo import describe

from tests.support.fake_provider import FakeProvider, sse


def _last_user(body: dict[str, Any]) -> list[dict[str, Any]]:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return [{"type": "text", "text": content}]
            return list(content or [])
    return []


def newest_user_text(body: dict[str, Any]) -> str:
    for part in reversed(_last_user(body)):
        text = part.get("text", "") if part.get("type") == "text" else ""
        if text and not text.startswith(("ERROR: Cannot read", "Called the Read tool")):
            return str(text)
    return ""


def newest_user_images(body: dict[str, Any]) -> list[dict[str, Any]]:
    images = []
    for part in _last_user(body):
        if part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            header, _, data = url.partition(",")
            info = describe(base64.b64decode(data))
            info["data_url_mime"] = header.removeprefix("data:").removesuffix(";base64")
            images.append(info)
    return images


def replaced_images(body: dict[str, Any]) -> list[str]:
    """OpenCode's silent replacement of an image for a model it thinks is text-only."""
    return [p["text"] for p in _last_user(body) if p.get("type") == "text"
            and str(p.get("text", "")).startswith("ERROR: Cannot read")]


class FakeChat(FakeProvider):
    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    @property
    def dead_registry(self) -> str:
        return f"{self.root}/npmreg/"

    def accepts(self, path: str) -> bool:
        return path.startswith("/v1/")  # everything else (the npm registry) is a 404

    def chat_requests(self, *, titles: bool = False) -> list[dict[str, Any]]:
        """Chat requests; the title-generator requests are left out unless asked for."""
        found = self.recorded("/chat/completions")
        if titles:
            return found
        return [r for r in found if "title generator" not in json.dumps(
            r["body"].get("messages", [])[:1])]

    def error_body(self, status: int) -> dict[str, Any]:
        return {"error": {"message": "Incorrect API key provided (fake)",
                          "type": "invalid_request_error", "code": "invalid_api_key"}}

    def stream(self, body: dict[str, Any]) -> bytes:
        """``pong: <text>``; scripted tools: ``DO_WRITE <path>`` → a ``write`` call,
        ``DO_BASH <command>`` → a ``bash`` call, ``DO_ASK <question>`` → a ``question`` call;
        after the tool's answer, ``done: <it>``."""
        model = body.get("model", "?")
        cid, now = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())
        messages = body.get("messages", [])
        last = messages[-1] if messages else {}
        text = newest_user_text(body)
        call = None
        if last.get("role") == "tool":
            text = f"done: {str(last.get('content'))[-300:]}"
        elif text.startswith("DO_SEND "):  # teamctl's MCP tool, as OpenCode names it
            _, to, message = text.split(" ", 2)
            call = ("teamctl_send_message", {"to": to, "text": message})
        elif text.startswith("DO_TOOL "):  # DO_TOOL <tool> <json arguments>: any teamctl tool
            _, tool, arguments = text.split(" ", 2)
            call = (f"teamctl_{tool}", json.loads(arguments))
        elif text.startswith("DO_CALL "):  # DO_CALL <tool as the CLI names it> <json>
            _, tool, arguments = text.split(" ", 2)
            call = (tool, json.loads(arguments))
        elif text.startswith("DO_ASK "):  # OpenCode's question tool: the user is asked
            call = ("question", {"questions": [{"question": text[7:], "header": "Question",
                                                "options": [{"label": "yes",
                                                             "description": "say yes"}]}]})
        elif text.startswith(("DO_WRITE ", "DO_BASH ")):
            verb, _, argument = text.partition(" ")
            call = ("write", {"filePath": argument, "content": "written by fake model\n"}) \
                if verb == "DO_WRITE" else ("bash", {"command": argument,
                                                      "description": "Run a test command"})
        else:
            text = f"pong: {text}"

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            return {"id": cid, "object": "chat.completion.chunk", "created": now,
                    "model": model, "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": finish}]}

        if call is not None:
            name, arguments = call
            return sse([
                (None, chunk({"role": "assistant", "content": None, "tool_calls": [{
                    "index": 0, "id": f"call_fake_{uuid.uuid4().hex[:8]}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)}}]}, None)),
                (None, chunk({}, "tool_calls")),
                (None, "[DONE]"),
            ])
        return sse([
            (None, chunk({"role": "assistant", "content": text}, None)),
            (None, chunk({}, "stop")),
            (None, {"id": cid, "object": "chat.completion.chunk", "created": now,
                    "model": model, "choices": [],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}),
            (None, "[DONE]"),
        ])
