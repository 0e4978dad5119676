"""A local OTLP/gRPC receiver (a collector's ``otlp`` receiver, its gRPC half): a real grpcio
server on 127.0.0.1 (port 0: the system picks) serving the collector's ``TraceService``,
``MetricsService`` and ``LogsService`` (the logs: the members' CLIs' events) — each ``Export`` on
the wire's bytes, decoded by opentelemetry-proto's messages as the HTTP receiver decodes them.

Each call is decoded and kept as the OTLP/HTTP receiver keeps a request
(tests/support/otlp_receiver.py: ``spans``, ``metrics``, ``logs``, ``raw`` — the request
serialized —
and its switches ``hang``, ``release()``, ``stop()``: the port closed, connections refused);
``headers`` holds each call's gRPC metadata. With ``tls`` (a PEM key and certificate:
``self_signed``) it serves TLS alone.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING

import grpc

from tests.support.otlp_receiver import OtlpReceiver

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

__all__ = ["OtlpGrpcReceiver", "otlp_grpc_receiver", "self_signed"]


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A key and a self-signed certificate for 127.0.0.1 (openssl), written in ``directory``:
    the receiver serves with both, the client trusts the certificate."""
    key, cert = directory / "receiver.key", directory / "receiver.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return key, cert


def _metadata(context: grpc.ServicerContext) -> dict[str, str]:
    return {key: str(value) for key, value in context.invocation_metadata()}


# the collector's services, each with its one method ``Export``, and the path the OTLP/HTTP
# receiver decodes the same request body by (opentelemetry-proto's collector/*/v1 services)
_SERVICES = {"opentelemetry.proto.collector.trace.v1.TraceService": "/v1/traces",
             "opentelemetry.proto.collector.metrics.v1.MetricsService": "/v1/metrics",
             "opentelemetry.proto.collector.logs.v1.LogsService": "/v1/logs"}


def _export(receiver: OtlpReceiver, path: str
            ) -> Callable[[bytes, grpc.ServicerContext], bytes]:
    """``Export`` on the wire's bytes: the request decoded and kept as the HTTP receiver keeps
    it, its serialized response answered."""
    def export(request: bytes, context: grpc.ServicerContext) -> bytes:
        return receiver.received(path, request, _metadata(context))
    return export


class OtlpGrpcReceiver(OtlpReceiver):
    """What the receiver was sent, and its switches; ``url`` is the endpoint to export to with
    ``protocol = "grpc"`` (``http://127.0.0.1:PORT``: plaintext; ``https://`` with ``tls``)."""

    protocol = "grpc"

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        super().__init__()
        self._grpc: grpc.Server | None = None
        self._tls = tls

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> None:
        server = grpc.server(ThreadPoolExecutor(max_workers=8, thread_name_prefix="otlp grpc"))
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            service, {"Export": grpc.unary_unary_rpc_method_handler(_export(self, path))})
            for service, path in _SERVICES.items()])
        where = f"127.0.0.1:{self.port}"
        if self._tls is None:
            self.port = server.add_insecure_port(where)
        else:
            key, cert = (path.read_bytes() for path in self._tls)
            self.port = server.add_secure_port(where, grpc.ssl_server_credentials([(key, cert)]))
        server.start()
        self._grpc = server

    def stop(self) -> None:
        """Connections refused from now on (the port is closed); held calls let go."""
        self._released.set()
        if self._grpc is not None:
            self._grpc.stop(grace=None).wait(10.0)
            self._grpc = None


@contextmanager
def otlp_grpc_receiver(tls: tuple[Path, Path] | None = None) -> Iterator[OtlpGrpcReceiver]:
    receiver = OtlpGrpcReceiver(tls)
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
