"""A fake OpenAI Responses API on 127.0.0.1 for the real Codex CLI (protocols/codex.md §4–§6):
``POST /v1/responses`` answered with the SSE frames codex needs; an error status on demand.

It records every request (headers without the key, the JSON body) and answers
``pong: <newest user text>``. Scripted tools: ``DO_WRITE <path>`` and ``DO_BASH <command>``
are answered with an ``exec_command`` function call (a write, or the command), and
``DO_ESCALATE <command>`` with one that asks to run outside the sandbox (``require_escalated``:
an approval request under approval ``on-request``); once its output comes back the answer is
``done: <output>``. ``input_image`` data URLs are decoded and
described (MIME, width, height, bytes, sha256) so a test can prove the bytes codex sent.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures"))
from imageinfo import describe

from tests.support.fake_provider import FakeProvider, sse


def _user_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in body.get("input", [])
            if item.get("type") == "message" and item.get("role") == "user"]


def newest_user_text(body: dict[str, Any]) -> str:
    """The last input_text of the last user message that is not an <image> wrapper."""
    for message in reversed(_user_messages(body)):
        for part in reversed(message.get("content") or []):
            text = part.get("text", "") if part.get("type") == "input_text" else ""
            if text and not text.startswith(("<image", "</image", "<environment_context")):
                return str(text)
    return ""


def newest_user_images(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = _user_messages(body)
    images = []
    for part in (messages[-1].get("content") or []) if messages else []:
        if part.get("type") == "input_image":
            header, _, data = str(part.get("image_url", "")).partition(",")
            info = describe(base64.b64decode(data))
            info["data_url_mime"] = header.removeprefix("data:").removesuffix(";base64")
            info["detail"] = part.get("detail")
            images.append(info)
    return images


def seen_images(images: list[dict[str, Any]]) -> str:
    """What the fake model "sees" when asked to describe images: each one's header facts."""
    return "; ".join(f"a screenshot: {i['mime']} {i['width']}x{i['height']} sha256={i['sha256']}"
                     for i in images) or "no image"


class FakeResponses(FakeProvider):
    input_tokens, output_tokens = 100, 10  # what every response reports it used

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def response_requests(self) -> list[dict[str, Any]]:
        return self.recorded("/responses")

    # a 429's body when set: the ChatGPT backend's refusal of a spent window (``resets_at``)
    usage_limit: dict[str, Any] | None = None

    def error_body(self, status: int) -> dict[str, Any]:
        if status == 429 and self.usage_limit is not None:
            return {"error": {"type": "usage_limit_reached",
                              "message": "The usage limit has been reached", **self.usage_limit}}
        if status == 429:
            return {"error": {"message": "Rate limit reached (fake 429)", "type": "requests",
                              "code": "rate_limit_exceeded"}}
        return {"error": {"message": "Incorrect API key provided (fake 401)",
                          "type": "invalid_request_error", "code": "invalid_api_key"}}

    def stream(self, body: dict[str, Any]) -> bytes:
        model = body.get("model", "?")
        items = body.get("input", [])
        last = items[-1] if items else {}
        rid, mid = f"resp_{uuid.uuid4().hex[:12]}", f"msg_{uuid.uuid4().hex[:12]}"
        text = newest_user_text(body)
        if last.get("type") == "function_call_output":
            output = last.get("output")
            if isinstance(output, list):
                output = " ".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
            text = f"done: {str(output)[-300:]}"
        elif text.startswith("Describe this image"):  # teamctl's describer (describe_with)
            text = seen_images(newest_user_images(body))
        elif text.startswith(("DO_SEND ", "DO_TOOL ")):  # an MCP tool: namespace + name
            _, first, rest = text.split(" ", 2)  # (teammates.md §2.7); DO_TOOL <tool> <json>
            tool, arguments = ("send_message", json.dumps({"to": first, "text": rest})) \
                if text.startswith("DO_SEND ") else (first, rest)
            call = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:12]}",
                    "call_id": f"call_{uuid.uuid4().hex[:12]}", "name": tool,
                    "namespace": "mcp__teamctl", "arguments": arguments, "status": "completed"}
            return self._frames(rid, model, call)
        elif text.startswith(("DO_WRITE ", "DO_BASH ", "DO_ESCALATE ")):
            verb, _, argument = text.partition(" ")
            command = (f"printf 'written by fake model\\n' > {argument}"
                       if verb == "DO_WRITE" else argument)
            arguments: dict[str, Any] = {"cmd": command, "yield_time_ms": 2000}
            if verb == "DO_ESCALATE":  # the model asks to run outside the sandbox
                arguments.update(sandbox_permissions="require_escalated",
                                 justification="the test needs to write this file")
            call = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:12]}",
                    "call_id": f"call_{uuid.uuid4().hex[:12]}", "name": "exec_command",
                    "arguments": json.dumps(arguments), "status": "completed"}
            return self._frames(rid, model, call)
        else:
            text = f"pong: {text}"
        item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        return self._frames(rid, model, item)

    def _frames(self, rid: str, model: str, item: dict[str, Any]) -> bytes:
        return sse([
            ("response.created", {"type": "response.created", "response": {
                "id": rid, "object": "response", "model": model, "status": "in_progress",
                "output": []}}),
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": {
                "id": rid, "object": "response", "model": model, "status": "completed",
                "output": [item], "usage": {
                    "input_tokens": self.input_tokens,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": self.output_tokens,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": self.input_tokens + self.output_tokens}}}),
        ])
