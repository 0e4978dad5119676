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
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures"))
from imageinfo import describe


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


class FakeChat:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.error_status: int | None = None
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    @property
    def dead_registry(self) -> str:
        return f"{self.root}/npmreg/"

    def __enter__(self) -> FakeChat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def chat_requests(self, *, titles: bool = False) -> list[dict[str, Any]]:
        """Chat requests; the title-generator requests are left out unless asked for."""
        with self.lock:
            found = [r for r in self.requests if r["path"].endswith("/chat/completions")]
        if titles:
            return found
        return [r for r in found if "title generator" not in json.dumps(
            r["body"].get("messages", [])[:1])]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._empty(404)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if not self.path.startswith("/v1/"):
                    self._empty(404)
                    return
                body = json.loads(raw or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                headers.pop("authorization", None)
                with fake.lock:
                    fake.requests.append({"path": self.path, "headers": headers, "body": body})
                if fake.error_status:
                    self._error(fake.error_status)
                else:
                    self._stream(f"pong: {newest_user_text(body)}", body.get("model", "?"))

            def _empty(self, status: int) -> None:
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def _error(self, status: int) -> None:
                payload = json.dumps({"error": {
                    "message": "Incorrect API key provided (fake)",
                    "type": "invalid_request_error", "code": "invalid_api_key"}}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, text: str, model: str) -> None:
                cid, now = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())

                def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
                    return {"id": cid, "object": "chat.completion.chunk", "created": now,
                            "model": model, "choices": [{"index": 0, "delta": delta,
                                                         "finish_reason": finish}]}

                frames = [chunk({"role": "assistant", "content": text}, None),
                          chunk({}, "stop"),
                          {"id": cid, "object": "chat.completion.chunk", "created": now,
                           "model": model, "choices": [],
                           "usage": {"prompt_tokens": 11, "completion_tokens": 3,
                                     "total_tokens": 14}}]
                data = b"".join(f"data: {json.dumps(f)}\n\n".encode() for f in frames)
                data += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
