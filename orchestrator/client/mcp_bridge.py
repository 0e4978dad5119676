"""``teamctl mcp``: the stdio end of teamctl's MCP server, the process a member's runtime starts
(not for people).

It understands nothing of MCP. Each line the runtime writes (one JSON-RPC message) goes to the
daemon on a connection of its own, opened by the line ``teamctl-mcp/1 TOKEN CWD HOME`` (the
member's per-launch token from ``TEAMCTL_MEMBER_TOKEN``, never an argument; this process's
working directory and ``HOME``, hex-encoded, against which the daemon makes an attachment's
relative or ``~`` path absolute, as the member means it); the daemon answers it as the member's
MCP server (orchestrator/daemon/mcp: the tools, their checks, the member's rights) with one line
— empty for a notification — and the answer goes back to the runtime as it came. The socket is
``TEAMCTL_MCP_HOME/teamctl.sock``: the daemon's, or a sandboxed member's own, or one forwarded to
an SSH host or a pod.

Why a relay and not the server: one of these runs beside every member's runtime, so it loads
only what it must — started as ``python -I -S`` it imports ``_socket`` and ``os`` (a test holds
the list), about 8.5 MiB resident and 3 MiB of its own, where the whole server was 16 MiB
(docs/dev/performance.md, "teamctl's own cost per member"). The standard library of any python3
≥ 3.8 is enough: the same file runs on a member's SSH host or in its pod.

Nothing the runtime sends ends it: a line is at most ``LINE_LIMIT`` bytes (a longer one is
read to its end and refused once); the daemon bounds the rest. When the daemon cannot be
reached or does not answer within ``ANSWER_TIMEOUT``, a request is answered here (``json`` is
imported then, and only then): a tool call as a tool error starting ``daemon_unavailable:``,
anything else as a JSON-RPC error; the runtime's turn goes on.
"""

from __future__ import annotations

import _socket
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

OPENING = b"teamctl-mcp/1"
LINE_LIMIT = 1024 * 1024  # orchestrator.limits.REQUEST_LIMIT_BYTES (a test holds them equal)
ANSWER_LIMIT = 256 * 1024 * 1024
CONNECT_TIMEOUT = 5.0
ANSWER_TIMEOUT = 60.0
_CHUNK = 1 << 16
_TOKEN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_TOO_LARGE = (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request larger than '
              + str(LINE_LIMIT).encode() + b' bytes"}}\n')


def main(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Relay the runtime's lines until its stdin closes; the process exit status."""
    reader = stdin or sys.stdin.buffer
    writer = stdout or sys.stdout.buffer
    home = os.environ.get("TEAMCTL_MCP_HOME") or "."
    path = home.rstrip("/") + "/teamctl.sock"
    opening = _opening(os.environ.get("TEAMCTL_MEMBER_TOKEN", ""))
    while True:
        line = reader.readline(LINE_LIMIT + 1)
        if not line:
            return 0
        if len(line) > LINE_LIMIT and not line.endswith(b"\n"):
            _discard_line(reader)
            _write(writer, _TOO_LARGE)
            continue
        if not line.endswith(b"\n"):
            line += b"\n"  # the last line, at the end of stdin
        why = _exchange(path, opening + line, writer)
        if why is not None:
            _write(writer, _unanswered(line, path, why))


def _opening(token: str) -> bytes:
    """The first line of each connection: the protocol, the token (a token of other characters
    than the daemon makes is sent empty: refused there as unknown, never garbled), this
    process's working directory and HOME (hex: any bytes a path holds)."""
    raw = token.encode("utf-8", "replace")
    if not raw or not set(raw) <= _TOKEN_CHARS:
        raw = b"-"
    try:
        cwd = os.getcwd().encode("utf-8", "surrogateescape")
    except OSError:  # its directory was removed
        cwd = b""
    home = os.environ.get("HOME", "").encode("utf-8", "surrogateescape")
    return b" ".join((OPENING, raw, cwd.hex().encode() or b"-", home.hex().encode() or b"-")) \
        + b"\n"


def _exchange(path: str, request: bytes, writer: BinaryIO) -> str | None:
    """``request`` sent on a new connection, the daemon's answer line written to ``writer``
    (a blank one, a notification's, is not) before the connection is closed — the daemon
    takes the close as "the runtime has it"; None, or why there is no answer."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(path)
        sock.settimeout(ANSWER_TIMEOUT)
        sock.sendall(request)
        answer = _answer_line(sock)
        if answer is None:
            return "the connection was closed before the answer"
        if answer.strip():
            _write(writer, answer)
        return None
    except _socket.timeout:
        return f"no answer within {ANSWER_TIMEOUT:g}s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    finally:
        sock.close()


def _answer_line(sock: _socket.socket) -> bytes | None:
    """One line from ``sock`` (at most ``ANSWER_LIMIT`` bytes), or None at its end first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(_CHUNK)
        if not chunk:
            return None
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)
        if size > ANSWER_LIMIT:
            raise OSError(f"the answer is larger than {ANSWER_LIMIT} bytes")


def _unanswered(line: bytes, path: str, why: str) -> bytes:
    """What the runtime gets when the daemon did not answer: nothing for a notification (or a
    line that is not JSON), a tool error for a tool call, else a JSON-RPC error."""
    import json  # only here: the relay's memory is the daemon-reached path's

    try:
        message = json.loads(line)
    except ValueError:
        return b""
    if not isinstance(message, dict) or message.get("id") is None:
        return b""
    text = (f"daemon_unavailable: teamctl's daemon did not answer at {path} ({why}); "
            "try again in a moment — if it keeps failing, the operator runs 'teamctl status'")
    if message.get("method") == "tools/call":
        body = {"result": {"content": [{"type": "text", "text": text}], "isError": True}}
    else:
        body = {"error": {"code": -32603, "message": text}}
    answer = {"jsonrpc": "2.0", "id": message["id"], **body}
    return json.dumps(answer, separators=(",", ":")).encode() + b"\n"


def _discard_line(reader: BinaryIO) -> None:
    """Read and drop the rest of an over-long line (to its newline or EOF), so it is answered
    once and its tail is not taken for the next request."""
    while True:
        chunk = reader.readline(LINE_LIMIT)
        if not chunk or chunk.endswith(b"\n"):
            return


def _write(writer: BinaryIO, data: bytes) -> None:
    writer.write(data)
    writer.flush()


if __name__ == "__main__":
    sys.exit(main())
