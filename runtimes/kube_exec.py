"""The exec streams of a member in a pod, through the official ``kubernetes`` Python client
(``pods/exec`` over WebSocket: ``v5.channel.k8s.io``, else ``v4``; 0 stdin, 1 stdout, 2 stderr,
3 the exit Status, 255 close).

Two uses. **A side call** (``run``): one short command in the pod with its stdin given, its
stdout, stderr and exit code back, within a deadline (the pod's probe, an image copy, a glob, a
version). **The member's own stream** (``python -m runtimes.kube_exec CONFIG``): a local process
whose stdin, stdout and stderr are the exec'd command's — what ``kubectl exec -i`` is, and what
the ssh client is for an SSH member. The adapters read and write it as they would a local
runtime; killing it, or losing the stream, ends the member's stream (the remote side then stops
the runtime, as over SSH). It exits with the command's exit code, or 255 with a line on stderr
when the stream was cut without one. CONFIG (argv, JSON) holds no secret: the kubeconfig's path,
context, namespace, pod, container and command; the member's environment travels on stdin.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["DROPPED", "ExecTarget", "api_client", "open_stream", "relay_argv", "run"]

DROPPED = 255  # the relay's exit code when the stream ended without the command's Status
_CHUNK = 1 << 16


@dataclass(frozen=True)
class ExecTarget:
    """Which cluster and pod (no credential: the kubeconfig file holds it)."""

    kubeconfig: str | None
    context: str | None
    namespace: str
    pod: str
    container: str


def api_client(kubeconfig: str | None, context: str | None) -> Any:
    """An ``ApiClient`` of the kubeconfig (``$KUBECONFIG``, ``~/.kube/config`` by default)."""
    from kubernetes import config

    return config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig, context=context)


def open_stream(api: Any, target: ExecTarget, command: list[str]) -> Any:
    """A ``WSClient`` exec'ing ``command`` in the pod, stdin open, bytes on every channel.
    ``api`` must be a client no other thread uses meanwhile (``stream`` swaps its transport)."""
    from kubernetes import client
    from kubernetes.stream import stream

    return stream(client.CoreV1Api(api).connect_get_namespaced_pod_exec, target.pod,
                  target.namespace, container=target.container, command=command, stdin=True,
                  stdout=True, stderr=True, tty=False, _preload_content=False, binary=True)


def exit_code(ws: Any) -> int | None:
    """The command's exit code from channel 3's Status; None when none came (a cut stream)."""
    raw = ws.read_channel(3)
    if not raw:
        return None
    try:
        status = json.loads(raw)
        if status.get("status") == "Success":
            return 0
        return int(status["details"]["causes"][0]["message"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def run(api: Any, target: ExecTarget, command: list[str], stdin: bytes,
        deadline: float) -> tuple[int | None, bytes, bytes]:
    """One side call (blocking: a worker thread's): exit code (None: cut or past the
    deadline), stdout, stderr."""
    ws = open_stream(api, target, command)
    try:
        if stdin:
            ws.write_stdin(stdin)
        ws.close_channel(0)  # v5: the end of stdin (v4 cannot say it: commands read no more)
        ws.run_forever(timeout=deadline)
        if ws.is_open():
            return None, b"", b"past the deadline"
        return exit_code(ws), bytes(ws.read_stdout() or b""), bytes(ws.read_stderr() or b"")
    finally:
        ws.close()


def relay_argv(python: str, target: ExecTarget, command: list[str]) -> list[str]:
    """The member's stream as a local process (``python -m runtimes.kube_exec CONFIG``)."""
    return [python, "-m", "runtimes.kube_exec",
            json.dumps({**asdict(target), "command": command})]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _pump_stdin(ws: Any) -> None:
    """This process's stdin to channel 0; at its end, close channel 0 (v5), or the whole
    stream (v4 cannot half-close: the remote side's stdin must end)."""
    try:
        while True:
            chunk = os.read(0, _CHUNK)
            if not chunk:
                break
            ws.write_stdin(chunk)
        if ws.subprotocol == "v5.channel.k8s.io":
            ws.close_channel(0)
        else:
            ws.close()
    except Exception:  # the stream is gone: the main loop sees it
        return


def relay(ws: Any, pod: str) -> int:
    threading.Thread(target=_pump_stdin, args=(ws,), daemon=True).start()
    try:
        while ws.is_open():
            ws.update(timeout=None)
            for channel, fd in ((1, 1), (2, 2)):
                data = ws.read_channel(channel)
                if data:
                    _write_all(fd, bytes(data))
    except Exception as exc:  # a cut connection: websocket-client raises, or OSError
        sys.stderr.write(f"teamctl-kube: the exec stream of pod {pod} dropped ({exc})\n")
        return DROPPED
    code = exit_code(ws)
    if code is None:
        sys.stderr.write(f"teamctl-kube: the exec stream of pod {pod} ended without its "
                         "command's exit status (dropped)\n")
        return DROPPED
    return code


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    command = list(spec.pop("command"))
    target = ExecTarget(**spec)
    started = time.monotonic()
    try:
        ws = open_stream(api_client(target.kubeconfig, target.context), target, command)
    except Exception as exc:  # typed by the daemon from this line (kube_host.classify)
        sys.stderr.write(f"teamctl-kube: cannot open the exec stream of pod {target.pod} "
                         f"({exc}) after {time.monotonic() - started:.1f}s\n")
        return DROPPED
    return relay(ws, target.pod)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
