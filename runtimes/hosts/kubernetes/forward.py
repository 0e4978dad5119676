"""A port of a member's pod reached from here (docs/scaling.md, "OpenCode in a pod"): what
``ssh -L`` is for an SSH member, over the API server's ``pods/{name}/portforward``.

A listener on ``127.0.0.1:LOCAL`` here; each connection it accepts gets its own port-forward
stream to ``REMOTE`` on the pod's loopback and its bytes are carried both ways until either end
closes. The stream is the official client's: its URL, ``Authorization`` header (refreshed by
the kubeconfig's hook), TLS options and proxy as ``kube_exec.connection`` resolves them, and its
framing ``kubernetes.stream.ws_client.PortForward`` (``v4.channel.k8s.io``: per port a data and
an error channel, each opened by a frame of the port number, 2 bytes little-endian). Only the
WebSocket's connect is this module's own, to bound it (the client's has no timeout).

Threads, not tasks: the client's stream is blocking ``websocket-client`` with a thread of its
own per stream; each connection adds one carrying thread (daemon threads). ``close`` (the
member's next launch, its stop) shuts the listener and every carried connection.

Failures are typed: opening a stream goes through ``kube_host.classify`` (a 403 on ``create
pods/portforward`` is ``kube_forbidden``); a port the pod refused, told on the error channel, is
``kube_forward_refused``. Past the start (where ``open_forward`` opens one stream to check the
way) they are logged and the connection closed: the runtime's own client sees it fail.
"""

from __future__ import annotations

import contextlib
import functools
import select
import socket
import threading
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.contracts import HostUnavailable
from runtimes.hosts.kubernetes import exec as kube_exec

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Forward", "open_forward"]

log = structlog.get_logger("teamctl.kube")

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")  # the client's offer; the API takes v4
CONNECT_TIMEOUT = 10.0
_CHUNK = 1 << 16
_TICK = 1.0  # how often a carrying thread looks whether its forward was closed


def open_stream(api: Any, target: kube_exec.ExecTarget, port: int, lock: threading.Lock) -> Any:
    """The client's ``PortForward`` of ``port`` in the pod, its connect bounded (blocking: a
    thread's). Raises the client's ``ApiException`` (``status`` 0, the handshake's status in its
    text, as the client's own ``portforward`` raises it)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream.ws_client import get_websocket_url
    from websocket import WebSocket

    with lock:  # the kubeconfig's refresh hook may run: one thread at a time
        spec = kube_exec.connection(api, target, [])
    path = f"/api/v1/namespaces/{target.namespace}/pods/{target.pod}/portforward"
    url = get_websocket_url(api.configuration.host + path,  # type: ignore[no-untyped-call]
                            [("ports", str(port))])
    ws = WebSocket(sslopt=spec["sslopt"], skip_utf8_validation=True)
    try:
        ws.connect(url, header=spec["header"], subprotocols=list(PROTOCOLS),  # type: ignore[no-untyped-call]
                   timeout=CONNECT_TIMEOUT, **spec["proxy"])
        ws.settimeout(None)  # a carried connection is quiet as long as its ends are
        return _stream_class()(ws, [port])
    except Exception as exc:
        ws.shutdown()  # type: ignore[no-untyped-call]
        raise ApiException(status=0, reason=str(exc)) from None


@functools.cache
def _stream_class() -> Any:
    """The client's ``PortForward``, its WebSocket closed when its thread ends (the client
    leaves it open when the API server closed first) and a broken frame logged, not raised
    in the thread."""
    from kubernetes.stream.ws_client import PortForward

    class Stream(PortForward):
        def _proxy(self) -> None:
            try:
                super()._proxy()  # type: ignore[no-untyped-call]
            except Exception as exc:  # a frame out of the protocol
                log.warning("kube_forward_broken", reason=str(exc)[:300])
                for port in self.local_ports.values():
                    port.python.close()
            finally:
                self.websocket.shutdown()

    return Stream


class Forward:
    """The listener of one launch and the connections it carries."""

    def __init__(self, member: str, host: str, local: int, remote: int,
                 opener: Callable[[], Any],
                 report: Callable[[HostUnavailable], None] | None = None) -> None:
        self.member, self.host, self.local, self.remote = member, host, local, remote
        self._opener = opener  # a typed HostUnavailable when the stream cannot be opened
        self._report = report
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[Any] = set()  # the sockets to shut at close (both ends of each)
        self.listener = socket.socket()
        try:
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.listener.bind(("127.0.0.1", local))
            self.listener.listen(16)
        except OSError as exc:
            self.listener.close()
            raise HostUnavailable(member, host, "kube_forward_failed",
                                  f"cannot listen on 127.0.0.1:{local} for the pod's port "
                                  f"({exc}); the member's next start picks another port",
                                  retryable=True) from None
        threading.Thread(target=self._accept, daemon=True,
                         name=f"kube-forward {local}->{remote}").start()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                if self._closed.is_set():
                    conn.close()
                    return
                self._open.add(conn)
            threading.Thread(target=self._carry, args=(conn,), daemon=True).start()

    def _carry(self, conn: socket.socket) -> None:
        """One connection: its own stream, bytes both ways until either end closes."""
        stream: Any = None
        try:
            stream = self._opener()
            far = stream.socket(self.remote)
            with self._lock:
                self._open.add(far)
            with contextlib.suppress(OSError):  # a write to a side that just ended (EPIPE):
                _pipe(conn, far, self._closed)  # still read why, on the error channel
            refused = stream.error(self.remote)
            if refused:
                self._failed(HostUnavailable(
                    self.member, self.host, "kube_forward_refused",
                    f"the pod refused port {self.remote} ({refused.strip()[:300]}); is the "
                    "runtime's server still up there?", retryable=True))
        except HostUnavailable as exc:
            self._failed(exc)
        except OSError:
            pass  # an end cut: the connection ends
        finally:
            with self._lock:
                self._open.discard(conn)
                if stream is not None:
                    self._open.discard(stream.socket(self.remote))
            conn.close()
            if stream is not None:
                stream.close()

    def _failed(self, error: HostUnavailable) -> None:
        log.warning("kube_forward_failed", host=self.host, member=self.member,
                    code=error.code, reason=error.reason, port=self.remote)
        if self._report is not None:
            self._report(error)

    def close(self) -> None:
        """Stop listening and cut every carried connection (their threads then end)."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _pipe(near: socket.socket, far: Any, closed: threading.Event) -> None:
    """Bytes both ways until either side ends (or the forward closes)."""
    other = {near.fileno(): far, far.fileno(): near}
    while not closed.is_set():
        ready, _, _ = select.select([near, far], [], [], _TICK)
        for sock in ready:
            data = sock.recv(_CHUNK)
            if not data:
                return
            other[sock.fileno()].sendall(data)


async def open_forward(member: str, host: str, api: Any, target: kube_exec.ExecTarget,
                       local: int, remote: int,
                       error: Callable[[BaseException, str, str], HostUnavailable]) -> Forward:
    """Check the way with one stream, within a deadline (RBAC, the API server; typed by
    ``error``: ``kube_host.classify``), then listen on ``127.0.0.1:local``."""
    lock = threading.Lock()

    def opener() -> Any:
        try:
            return open_stream(api, target, remote, lock)
        except Exception as exc:
            raise error(exc, "create", "pods/portforward") from None

    try:  # nothing listens there yet: the pod refuses the port, the stream itself opened
        with anyio.fail_after(CONNECT_TIMEOUT * 2):
            await anyio.to_thread.run_sync(lambda: opener().close(), abandon_on_cancel=True)
    except TimeoutError:
        raise error(TimeoutError(f"no stream within {CONNECT_TIMEOUT * 2:g}s"), "create",
                    "pods/portforward") from None
    return Forward(member, host, local, remote, opener)
