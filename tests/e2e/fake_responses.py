"""A fake OpenAI Responses API on 127.0.0.1 for the real Codex CLI (protocols/codex.md §4–§6):
``POST /v1/responses`` answered with the SSE frames codex needs; an error status on demand.

It records every request (headers without the key, the JSON body) and answers
``pong: <newest user text>``. ``input_image`` data URLs are decoded and described (MIME, width,
height, bytes, sha256) so a test can prove the bytes codex sent.
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


class FakeResponses:
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
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> FakeResponses:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def response_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["path"].endswith("/responses")]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                headers.pop("authorization", None)
                with fake.lock:
                    fake.requests.append({"path": self.path, "headers": headers, "body": body})
                if fake.error_status:
                    self._error(fake.error_status)
                else:
                    self._stream(f"pong: {newest_user_text(body)}", body.get("model", "?"))

            def _error(self, status: int) -> None:
                payload = json.dumps({"error": {
                    "message": "Incorrect API key provided (fake 401)",
                    "type": "invalid_request_error", "code": "invalid_api_key"}}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, text: str, model: str) -> None:
                rid, mid = f"resp_{uuid.uuid4().hex[:12]}", f"msg_{uuid.uuid4().hex[:12]}"
                item = {"type": "message", "id": mid, "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}
                events = [
                    ("response.created", {"type": "response.created", "response": {
                        "id": rid, "object": "response", "model": model,
                        "status": "in_progress", "output": []}}),
                    ("response.output_item.done", {"type": "response.output_item.done",
                                                   "output_index": 0, "item": item}),
                    ("response.completed", {"type": "response.completed", "response": {
                        "id": rid, "object": "response", "model": model, "status": "completed",
                        "output": [item], "usage": {
                            "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                            "output_tokens": 10,
                            "output_tokens_details": {"reasoning_tokens": 0},
                            "total_tokens": 110}}}),
                ]
                data = b"".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
                                for name, payload in events)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
