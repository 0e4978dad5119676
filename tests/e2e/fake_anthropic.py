"""A fake Anthropic Messages API on 127.0.0.1, for the real Claude Code CLI (protocols/claude.md
§3.9): ``POST /v1/messages?beta=true`` answered with SSE; ``HEAD`` answered 200.

It records every request (headers with the key redacted, the JSON body) and answers
``pong: <newest user text>``, or, when ``error_status`` is set, an API error of that status.
Images in the newest user message are decoded and described (MIME, width, height, sha256) so a
test can prove the bytes that reached the API.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures"))
from imageinfo import describe

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


class FakeAnthropic:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.error_status: int | None = None
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def message_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["path"].startswith("/v1/messages")]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                headers.pop("x-api-key", None)
                with fake.lock:
                    fake.requests.append({"path": self.path, "headers": headers, "body": body})
                if fake.error_status:
                    self._error(fake.error_status)
                else:
                    self._stream(f"pong: {newest_user_text(body)}", body.get("model", "?"))

            def _error(self, status: int) -> None:
                kind = _ERROR_TYPES.get(status, "api_error")
                payload = json.dumps({"type": "error", "error": {
                    "type": kind, "message": f"fake {kind.replace('_', ' ')}"}}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("request-id", f"req_fake_{uuid.uuid4().hex[:16]}")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, text: str, model: str) -> None:
                message_id = f"msg_fake_{uuid.uuid4().hex[:20]}"
                events = [
                    ("message_start", {"type": "message_start", "message": {
                        "id": message_id, "type": "message", "role": "assistant",
                        "model": model, "content": [], "stop_reason": None,
                        "stop_sequence": None, "usage": {"input_tokens": 10,
                                                         "output_tokens": 1}}}),
                    ("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": text}}),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    ("message_delta", {"type": "message_delta", "delta": {
                        "stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": 5}}),
                    ("message_stop", {"type": "message_stop"}),
                ]
                data = b"".join(
                    f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
                    for name, payload in events
                )
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("request-id", f"req_fake_{uuid.uuid4().hex[:16]}")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


if __name__ == "__main__":
    with FakeAnthropic() as api:
        print(api.base_url, flush=True)
        threading.Event().wait()
