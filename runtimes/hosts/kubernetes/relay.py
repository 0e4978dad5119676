"""The member's exec stream as a local process (``python -m runtimes.hosts.kubernetes.relay``): its
stdin,
stdout and stderr are the command's in the pod — what ``kubectl exec -i`` is, and what the ssh
client is for an SSH member.

Light on purpose: the standard library and ``websocket-client`` only (the ``kubernetes``
package's import is 1.6–2.2 s and ~44 MiB a process; this one starts in ~0.15 s). The daemon
resolves the connection once with the official client (``kube_exec.connection``: the exec URL,
the ``Authorization`` header, the TLS files, a proxy) and sends it as the **first line of this
process's stdin** — never argv, never a file: the token is only in this process's memory. The
rest of stdin is the command's.

``pods/exec`` over WebSocket: ``v5.channel.k8s.io``, else ``v4``; 0 stdin, 1 stdout, 2 stderr,
3 the exit ``Status``, 255 close (v5). The relay exits with the command's exit code, or
``DROPPED`` (255) with a line on stderr when the stream was cut without one; at the end of its
stdin it closes channel 0 (v5) or the whole stream (v4 cannot half-close).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

__all__ = ["DROPPED", "PROTOCOLS", "exit_status"]

DROPPED = 255  # the exit code when the stream ended without the command's Status
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
_CHUNK = 1 << 16


def exit_status(raw: bytes | str | None) -> int | None:
    """The command's exit code from channel 3's ``Status``; None when none came."""
    if not raw:
        return None
    try:
        status = json.loads(raw)
        if status.get("status") == "Success":
            return 0
        return int(status["details"]["causes"][0]["message"])
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def _first_line() -> tuple[dict[str, Any], bytes]:
    """The connection (line 1 of stdin) and whatever of the command's stdin came with it."""
    buffered = b""
    while b"\n" not in buffered:
        chunk = os.read(0, _CHUNK)
        if not chunk:
            raise ValueError("stdin ended before the connection line")
        buffered += chunk
    line, rest = buffered.split(b"\n", 1)
    spec: dict[str, Any] = json.loads(line)
    return spec, rest


def _connect(spec: dict[str, Any]) -> Any:
    from websocket import WebSocket

    ws = WebSocket(sslopt=spec.get("sslopt") or {}, skip_utf8_validation=True,
                   enable_multithread=True)
    options = {"header": list(spec.get("header") or []), "subprotocols": list(PROTOCOLS),
               "timeout": spec.get("timeout", 30), **(spec.get("proxy") or {})}
    ws.connect(spec["url"], **options)  # type: ignore[no-untyped-call]
    ws.settimeout(None)  # a member's stream is quiet for as long as its runtime is
    return ws


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _pump_stdin(ws: Any, first: bytes) -> None:
    """This process's stdin to channel 0; at its end close channel 0 (v5) or the stream."""
    try:
        chunk = first
        while True:
            if chunk:
                ws.send_binary(b"\x00" + chunk)
            chunk = os.read(0, _CHUNK)
            if not chunk:
                break
        if ws.subprotocol == PROTOCOLS[0]:
            ws.send_binary(b"\xff\x00")
        else:
            ws.close()
    except Exception:  # the stream is gone: the main loop sees it
        return


def relay(ws: Any, first: bytes, pod: str) -> int:
    """Channels 1 and 2 to this process's stdout and stderr until the stream ends."""
    from websocket import ABNF

    threading.Thread(target=_pump_stdin, args=(ws, first), daemon=True).start()
    status = b""
    try:
        while True:
            opcode, frame = ws.recv_data_frame(True)
            if opcode == ABNF.OPCODE_CLOSE:
                break
            data = frame.data if isinstance(frame.data, bytes) else bytes(frame.data or b"")
            if opcode not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) or not data:
                continue
            channel, payload = data[0], data[1:]
            if channel in (1, 2) and payload:
                _write_all(channel, payload)
            elif channel == 3:
                status += payload
    except Exception as exc:  # a cut connection: websocket-client raises, or OSError
        if not status:
            sys.stderr.write(f"teamctl-kube: the exec stream of pod {pod} dropped ({exc})\n")
            return DROPPED
    code = exit_status(status)
    if code is None:
        sys.stderr.write(f"teamctl-kube: the exec stream of pod {pod} ended without its "
                         "command's exit status (dropped)\n")
        return DROPPED
    return code


def _forward_mcp(spec: dict[str, Any]) -> None:
    """The second exec stream (runtimes/hosts/kubernetes/mux.py): a socket in the pod whose
    connections
    are this process's to the daemon's member socket; waits until it is bound."""
    from runtimes.hosts.kubernetes import mux as kube_mux

    ws = _connect({**spec, "url": spec["mcp"]["url"]})
    ws.settimeout(spec.get("timeout", 30))  # bound within this, else the member's start fails
    frames, early = kube_mux.wait_ready(ws)
    ws.settimeout(None)
    threading.Thread(target=kube_mux.serve, args=(ws, spec["mcp"]["socket"], frames, early),
                     daemon=True).start()


def main() -> int:
    started = time.monotonic()
    pod = "?"
    try:
        spec, first = _first_line()
        pod = str(spec.get("pod", pod))
        if spec.get("mcp"):  # teamctl's MCP tools: the pod's socket bound before the runtime
            _forward_mcp(spec)
        ws = _connect(spec)
    except Exception as exc:  # typed by the daemon from this line (kube_host.classify)
        sys.stderr.write(f"teamctl-kube: cannot open the exec stream of pod {pod} "
                         f"({exc}) after {time.monotonic() - started:.1f}s\n")
        return DROPPED
    return relay(ws, first, pod)


if __name__ == "__main__":
    sys.exit(main())
