"""The common part of the fake model APIs the e2e tests start on 127.0.0.1: a threaded stdlib
HTTP server that records every request (secrets dropped from the headers) and answers each POST
with the subclass's SSE stream, or with its JSON error for ``error_status``."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_SECRET_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")


def fingerprint(value: str) -> str:
    """What the fakes record of a credential header: enough to tell which one arrived."""
    import hashlib

    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


def sse(frames: list[tuple[str | None, Any]]) -> bytes:
    """``event:``/``data:`` frames; an event name of None writes a bare ``data:`` frame and a
    payload that is a str is written as is (``[DONE]``)."""
    out = []
    for name, payload in frames:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out.append((f"event: {name}\n" if name else "") + f"data: {data}\n\n")
    return "".join(out).encode()


class FakeProvider:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.error_status: int | None = None
        self.error_headers: dict[str, str] = {}  # sent with an error_status reply
        self.ok_headers: dict[str, str] = {}  # sent with every answered POST (rate limits)
        # each POST's (status, headers) in turn, before error_status: a script of replies
        self.script: list[tuple[int, dict[str, str]]] = []
        self.hang_next = False  # the next POST gets headers, then nothing for 60 s
        self.released = threading.Event()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        # a short poll: shutdown() waits for the loop to look (socketserver's 0.5 s default)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,),
                                       daemon=True)

    @property
    def root(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Any:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def recorded(self, suffix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["path"].split("?")[0].endswith(suffix)]

    # -- what a subclass says ---------------------------------------------------------------

    def accepts(self, path: str) -> bool:
        return True

    def error_body(self, status: int) -> dict[str, Any]:
        raise NotImplementedError

    def stream(self, body: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def answer(self, path: str, body: dict[str, Any]) -> tuple[bytes, str]:
        """The reply's bytes and content type for a POST to ``path``: the SSE stream unless a
        subclass answers some paths otherwise (the Gemini API's non-streaming JSON)."""
        return self.stream(body), "text/event-stream"

    # -- the server -------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self._reply(200, b"", None)

            def do_GET(self) -> None:
                self._reply(404, b"", None)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if not fake.accepts(self.path):
                    self._reply(404, b"", None)
                    return
                body = json.loads(raw or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()
                           if k.lower() not in _SECRET_HEADERS}
                for name in _SECRET_HEADERS:  # which credential came, never the secret itself
                    if self.headers.get(name):
                        headers[name] = fingerprint(self.headers[name])
                with fake.lock:
                    fake.requests.append({"path": self.path, "headers": headers, "body": body})
                with fake.lock:
                    hang, fake.hang_next = fake.hang_next, False
                if hang:
                    self._hang()
                    return
                with fake.lock:
                    scripted = fake.script.pop(0) if fake.script else None
                status, extra = scripted or (fake.error_status, fake.error_headers)
                if status and status >= 400:
                    self._reply(status, json.dumps(fake.error_body(status)).encode(),
                                "application/json", extra)
                else:
                    self._reply(200, *fake.answer(self.path, body),
                                extra if scripted else fake.ok_headers)

            def _hang(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                self.wfile.flush()
                fake.released.wait(60)
                self.close_connection = True

            def _reply(self, status: int, data: bytes, content_type: str | None,
                       headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                if content_type:
                    self.send_header("content-type", content_type)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("request-id", f"req_fake_{threading.get_ident()}")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
