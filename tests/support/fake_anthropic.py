"""A fake Anthropic Messages API on 127.0.0.1, for the real Claude Code CLI (protocols/claude.md
§3.9): ``POST /v1/messages?beta=true`` answered with SSE; ``HEAD`` answered 200.

It records every request (headers with the key redacted, the JSON body) and answers
``pong: <newest user text>``, or, when ``error_status`` is set, an API error of that status.
Scripted tools (as protocols/teammates.md's fakes): a user text ``DO_WRITE <path>`` is
answered with a ``Write`` tool call, ``DO_BASH <command>`` with a ``Bash`` one, ``DO_ASK
<question>`` with an ``AskUserQuestion`` one; teamctl's describer instruction ("Describe this
image…") with the header facts of each image (MIME, size, sha256); once the tool
result comes back, the answer is ``done: <the tool result's text>``.
Images in the newest user message are decoded and described (MIME, width, height, sha256) so a
test can prove the bytes that reached the API.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures"))
from imageinfo import describe

from tests.support.fake_provider import FakeProvider, sse
from tests.support.fake_responses import seen_images

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def newest_user_text(body: dict[str, Any]) -> str:
    """The last text block of the last user message that is not CLI bookkeeping (§3.6)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in reversed(blocks or []):
            text = block.get("text", "") if block.get("type") == "text" else ""
            if text and not text.startswith(("<system-reminder>", "[Image")):
                return str(text)
        return ""
    return ""


CONTINUATION = "[teamctl] your previous turn on message "


def _redone(text: str, body: dict[str, Any]) -> str:
    """A teamctl continuation of a cut DO_WRITE/DO_BASH turn is answered as a model that finishes
    its step would: the same tool call again (its reminder, the message, is the last paragraph)
    — on the model call that is offered the tools, not on the CLI's side calls."""
    reminder = text.rpartition("\n\n")[2]
    tools = {t.get("name") for t in body.get("tools", [])}
    if text.startswith(CONTINUATION) and reminder.startswith(("DO_WRITE ", "DO_BASH ")) \
            and {"Write", "Bash"} & tools:
        return reminder
    return text


def newest_tool_result(body: dict[str, Any]) -> str | None:
    """The text of a tool_result in the last user message, if that message carries one."""
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    content = last.get("content") if last.get("role") == "user" else None
    for block in content if isinstance(content, list) else []:
        if block.get("type") == "tool_result":
            inner = block.get("content")
            if isinstance(inner, list):
                inner = " ".join(str(b.get("text", "")) for b in inner if isinstance(b, dict))
            return str(inner or "")[:300]
    return None


def newest_user_images(body: dict[str, Any]) -> list[dict[str, Any]]:
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user" or not isinstance(message.get("content"), list):
            continue
        images = []
        for block in message["content"]:
            if block.get("type") == "image":
                source = block.get("source", {})
                info = describe(base64.b64decode(source.get("data", "")))
                info["media_type"] = source.get("media_type")
                images.append(info)
        return images
    return []


class FakeAnthropic(FakeProvider):
    input_tokens, output_tokens = 10, 5  # what every message reports it used

    @property
    def base_url(self) -> str:
        return self.root

    def message_requests(self) -> list[dict[str, Any]]:
        return self.recorded("/v1/messages")

    def error_body(self, status: int) -> dict[str, Any]:
        kind = _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind,
                                           "message": f"fake {kind.replace('_', ' ')}"}}

    def stream(self, body: dict[str, Any]) -> bytes:
        model = body.get("model", "?")
        result = newest_tool_result(body)
        if result is not None:
            return self._text(model, f"done: {result}")
        text = newest_user_text(body)
        if text.startswith("Describe this image"):  # teamctl's describer (describe_with)
            return self._text(model, seen_images(newest_user_images(body)))
        if text.startswith("DO_SEND "):  # teamctl's MCP tool, as the model would call it
            _, to, message = text.split(" ", 2)
            return self._tool(model, "mcp__teamctl__send_message", {"to": to, "text": message})
        if text.startswith("DO_TOOL "):  # DO_TOOL <tool> <json arguments>: any teamctl tool
            _, tool, arguments = text.split(" ", 2)
            return self._tool(model, f"mcp__teamctl__{tool}", json.loads(arguments))
        if text.startswith("DO_PINGPONG "):  # DO_PINGPONG <me> <other>: pass it back, forever
            _, me, other = text.split(" ", 2)
            return self._tool(model, "mcp__teamctl__send_message",
                              {"to": other, "text": f"DO_PINGPONG {other} {me}"})
        if text.startswith("DO_SEND_IMAGE "):  # DO_SEND_IMAGE <to> <path> <text>
            _, to, path, message = text.split(" ", 3)
            return self._tool(model, "mcp__teamctl__send_message",
                              {"to": to, "text": message, "attachments": [path]})
        if text.startswith("DO_ASK "):  # AskUserQuestion (offered with the stdio prompt tool)
            return self._tool(model, "AskUserQuestion", {"questions": [{
                "question": text[7:], "header": "Question", "multiSelect": False,
                "options": [{"label": "tabs", "description": "tabs"},
                            {"label": "spaces", "description": "spaces"}]}]})
        text = _redone(text, body)
        if text.startswith(("DO_WRITE ", "DO_BASH ")):
            verb, _, argument = text.partition(" ")
            if verb == "DO_WRITE":
                return self._tool(model, "Write", {"file_path": argument,
                                                   "content": "written by fake model\n"})
            return self._tool(model, "Bash", {"command": argument,
                                              "description": "Run a test command"})
        return self._text(model, f"pong: {text}")

    def _tool(self, model: str, name: str, arguments: dict[str, Any]) -> bytes:
        block = {"type": "tool_use", "id": f"toolu_fake_{uuid.uuid4().hex[:12]}", "name": name,
                 "input": {}}
        return _message(model, block, {"type": "input_json_delta",
                                       "partial_json": json.dumps(arguments)}, "tool_use",
                        self.input_tokens, self.output_tokens)

    def _text(self, model: str, text: str) -> bytes:
        return _message(model, {"type": "text", "text": ""},
                        {"type": "text_delta", "text": text}, "end_turn", self.input_tokens,
                        self.output_tokens)


def _message(model: str, block: dict[str, Any], delta: dict[str, Any], stop: str,
             input_tokens: int = 10, output_tokens: int = 5) -> bytes:
    """One streamed assistant message of one content block."""
    return sse([
        ("message_start", {"type": "message_start", "message": {
            "id": f"msg_fake_{uuid.uuid4().hex[:20]}", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ])

if __name__ == "__main__":
    with FakeAnthropic() as api:
        print(api.base_url, flush=True)
        threading.Event().wait()
