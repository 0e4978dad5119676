"""The team file's ``[telemetry]`` section (docs/telemetry.md), apart from config.py; and the
standard ``OTEL_EXPORTER_OTLP_*`` variables of the daemon's environment it falls back on.

``otlp = { endpoint = "http://127.0.0.1:4318", protocol = "http/protobuf", headers_env =
"OTLP_HEADERS", timeout = 10.0 }``: where spans and metrics go, the variable of the daemon's
environment that holds the headers (``key=value,key2=value2``: an API key is a secret, so it is
never in the team file, a log or a member's environment); ``include_content``: message text,
replies and approval summaries leave only when true, and then redacted (the members' CLIs log
prompts only then too); ``runtimes``: point the members' CLIs' own telemetry (Claude Code's
variables, Codex's ``[otel]``) at the same collector; ``max_queue``: spans waiting for the
exporter (past it, each is dropped and counted); ``metric_interval``: seconds between two
metric exports.

``protocol`` is ``"http/protobuf"`` (OTLP/HTTP: ``endpoint`` is the base URL, ``/v1/traces``
and ``/v1/metrics`` are added, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is read) or ``"grpc"`` (OTLP
over gRPC, as the OpenTelemetry spec reads it: ``endpoint`` is the collector's ``host:port``
with a scheme and no path, ``http://`` plaintext, ``https://`` TLS; the header names become
lower-case gRPC metadata keys). gRPC needs teamctl's ``grpc`` extra (grpcio and the SDK's gRPC
exporter): a protocol of ``grpc`` without it is a ``TelemetryExporterMissing`` at launch,
naming the pip command — never an ImportError. Per signal, ``OTEL_EXPORTER_OTLP_TRACES_*`` and
``..._METRICS_*`` (endpoint, protocol) win over the general variables; the team file's keys win
over every variable.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal, cast
from urllib.parse import unquote, urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from orchestrator.errors import TelemetryConfigInvalid, TelemetryExporterMissing

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["GRPC_MODULES", "ExportSettings", "OtlpProtocol", "OtlpSettings", "TelemetrySection",
           "export_settings"]

OtlpProtocol = Literal["http/protobuf", "grpc"]
_PROTOCOLS = ("http/protobuf", "grpc")
# what protocol = "grpc" imports (teamctl's grpc extra): looked for at launch, never imported then
GRPC_MODULES = ("grpc", "opentelemetry.exporter.otlp.proto.grpc")
_ENV = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_URL = re.compile(r"https?://[A-Za-z0-9.-]+|https?://\[[0-9A-Fa-f:.]+\]")
_PORT_PATH = re.compile(r"(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?")
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")
_GRPC_KEY = re.compile(r"[0-9a-z_.-]{1,100}")  # a gRPC metadata key, once lower-cased
_GRPC_VALUE = re.compile(r"[\x20-\x7e]*")  # an ASCII metadata value (no "-bin" keys)
_MAX_HEADERS = 32


def _endpoint(value: str) -> str:
    """An http(s) base URL: no credentials, query or fragment (they would end in logs)."""
    found = _URL.match(value)
    if found is None or not _PORT_PATH.fullmatch(value[found.end():]) or len(value) > 300:
        raise ValueError(f"endpoint = {value!r} is not an http(s) URL without credentials, "
                         "query or fragment (e.g. \"http://127.0.0.1:4318\", a collector's "
                         "OTLP/HTTP receiver, or \"http://127.0.0.1:4317\" with protocol = "
                         "\"grpc\")")
    return value.rstrip("/")


def _protocol(value: str) -> str:
    if value not in _PROTOCOLS:
        raise ValueError(f"protocol = {value!r}: write \"http/protobuf\" (OTLP/HTTP, a "
                         "collector's port 4318) or \"grpc\" (OTLP/gRPC, port 4317)")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class OtlpSettings(_Strict):
    """``[telemetry] otlp``: where the exporter sends (None: the standard variables say)."""

    endpoint: Annotated[str, AfterValidator(_endpoint)] | None = None
    protocol: Annotated[str, Field(max_length=40), AfterValidator(_protocol)] | None = None
    headers_env: Annotated[str, Field(pattern=_ENV)] | None = None
    timeout: float = Field(default=10.0, gt=0, le=60, allow_inf_nan=False)


class TelemetrySection(_Strict):
    """``[telemetry]``: the team's work exported as OpenTelemetry traces and metrics."""

    otlp: OtlpSettings = Field(default_factory=OtlpSettings)
    include_content: bool = False
    # the members' CLIs' own telemetry pointed at the same collector (Claude Code, Codex)
    runtimes: bool = True
    max_queue: int = Field(default=2048, ge=16, le=65536)
    metric_interval: float = Field(default=60.0, ge=1.0, le=3600.0, allow_inf_nan=False)


@dataclass(frozen=True)
class ExportSettings:
    """Where one exporter sends, resolved from the section and the environment: per signal its
    URL and protocol (over gRPC the URL is the collector's ``scheme://host:port``); ``headers``
    are secrets (never logged: ``shown`` leaves them out)."""

    traces_url: str
    metrics_url: str
    headers: tuple[tuple[str, str], ...] = field(repr=False)  # secrets: never in a repr
    timeout: float
    include_content: bool
    max_queue: int
    metric_interval: float
    traces_protocol: OtlpProtocol = "http/protobuf"
    metrics_protocol: OtlpProtocol = "http/protobuf"

    @property
    def shown(self) -> str:
        """What a log line may say of it: the URL, the protocol, and the header names alone."""
        names = ",".join(name for name, _ in self.headers) or "none"
        protocol = self.traces_protocol if self.traces_protocol == self.metrics_protocol else \
            f"traces {self.traces_protocol}, metrics {self.metrics_protocol} {self.metrics_url}"
        return f"{self.traces_url} ({protocol}; headers: {names})"


@dataclass(frozen=True)
class _Found:
    """A resolved value and the key or variable it came from (what an error names)."""

    value: str
    where: str


def export_settings(section: TelemetrySection, environ: Mapping[str, str]) -> ExportSettings:
    """The section's settings, each key it leaves out read from the standard variables
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_TRACES_ENDPOINT``, ``…_METRICS_ENDPOINT``,
    ``…_HEADERS``, ``…_PROTOCOL``, ``…_TRACES_PROTOCOL``, ``…_METRICS_PROTOCOL``,
    ``…_TIMEOUT`` in milliseconds). A bad value is a ``TelemetryConfigInvalid`` naming the key
    or variable, never its value when it is a header; gRPC asked for where its extra is not
    installed, a ``TelemetryExporterMissing``."""
    otlp = section.otlp
    traces_protocol = _protocol_of(otlp, environ, "TRACES")
    metrics_protocol = _protocol_of(otlp, environ, "METRICS")
    traces, metrics = _urls(otlp, environ, traces_protocol.value, metrics_protocol.value)
    headers_var = otlp.headers_env or "OTEL_EXPORTER_OTLP_HEADERS"
    if otlp.headers_env is not None and headers_var not in environ:
        raise TelemetryConfigInvalid(
            "[telemetry] otlp.headers_env", f"[telemetry] otlp.headers_env = {headers_var!r}, "
            f"but the daemon's environment has no {headers_var}: export it where the daemon "
            "starts (key=value,key2=value2), or remove headers_env")
    headers = _headers(headers_var, environ.get(headers_var, ""))
    grpc = [(url, protocol) for url, protocol in ((traces, traces_protocol),
                                                  (metrics, metrics_protocol))
            if protocol.value == "grpc"]
    if grpc:
        _grpc_can_send([url for url, _ in grpc], headers_var, headers, grpc[0][1].where)
    return ExportSettings(
        traces.value, metrics.value, headers, _timeout(otlp, environ), section.include_content,
        section.max_queue, section.metric_interval,
        traces_protocol=cast("OtlpProtocol", traces_protocol.value),
        metrics_protocol=cast("OtlpProtocol", metrics_protocol.value))


def _protocol_of(otlp: OtlpSettings, environ: Mapping[str, str], signal: str) -> _Found:
    """A signal's protocol: the section's, else its own variable's, else the general one's."""
    if otlp.protocol is not None:
        return _Found(otlp.protocol, "[telemetry] otlp.protocol")
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = environ.get(name, "").strip()
        if value:
            return _Found(_checked(name, value, _protocol), name)
    return _Found("http/protobuf", "the default protocol")


def _urls(otlp: OtlpSettings, environ: Mapping[str, str], traces_protocol: str,
          metrics_protocol: str) -> tuple[_Found, _Found]:
    """Each signal's URL: its own variable's as it is (unless the section names an endpoint),
    else the base endpoint's — with ``/v1/<signal>`` over OTLP/HTTP, alone over gRPC."""
    base = _Found(otlp.endpoint, "[telemetry] otlp.endpoint") if otlp.endpoint else \
        _env_found(environ, "OTEL_EXPORTER_OTLP_ENDPOINT")
    traces = _own_url(otlp, environ, "TRACES") or (
        None if base is None else _from_base(base, "traces", traces_protocol))
    if traces is None:
        raise TelemetryConfigInvalid(
            "[telemetry] otlp.endpoint", "no endpoint: set [telemetry] otlp.endpoint (e.g. "
            "\"http://127.0.0.1:4318\") or OTEL_EXPORTER_OTLP_ENDPOINT in the daemon's "
            "environment")
    metrics = _own_url(otlp, environ, "METRICS") or _from_base(
        base or _Found(traces.value.removesuffix("/v1/traces"), traces.where), "metrics",
        metrics_protocol)
    return traces, metrics


def _own_url(otlp: OtlpSettings, environ: Mapping[str, str], signal: str) -> _Found | None:
    return None if otlp.endpoint else _env_found(environ, f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")


def _from_base(base: _Found, signal: str, protocol: str) -> _Found:
    return base if protocol == "grpc" else _Found(f"{base.value}/v1/{signal}", base.where)


def _grpc_can_send(urls: list[_Found], headers_var: str, headers: tuple[tuple[str, str], ...],
                   asked: str) -> None:
    """Refuse what gRPC cannot send: an endpoint with a path (the collector's host and port
    alone), a header that is no gRPC metadata; the extra not installed (``asked``: where gRPC
    was asked for)."""
    for url in urls:
        if urlsplit(url.value).path:
            raise TelemetryConfigInvalid(
                url.where, f"{url.where} = {url.value!r} has a path: over gRPC the endpoint is "
                "the collector's host and port alone (e.g. \"http://127.0.0.1:4317\", no "
                "/v1/traces)")
    for index, (name, value) in enumerate(headers, 1):
        key = name.lower()
        if not _GRPC_KEY.fullmatch(key) or key.startswith("grpc-") or key.endswith("-bin") \
                or not _GRPC_VALUE.fullmatch(value):
            raise TelemetryConfigInvalid(
                headers_var, f"{headers_var}: header {index} cannot be gRPC metadata (a name "
                "of letters, digits, '-', '_' or '.', not grpc-* or *-bin; a printable ASCII "
                "value); its text is not shown: it may hold a secret")
    if any(_not_installed(module) for module in GRPC_MODULES):
        raise TelemetryExporterMissing(asked, sys.executable)


def _not_installed(module: str) -> bool:
    """``module`` cannot be imported here, found without importing it (looked for again with
    fresh caches before saying so: the extra may have been installed since the daemon
    started)."""
    if _found(module):
        return False
    importlib.invalidate_caches()
    return not _found(module)


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # its parent missing; a None in sys.modules
        return False


def _checked(where: str, value: str, check: object) -> str:
    try:
        return check(value)  # type: ignore[operator,no-any-return]
    except ValueError as exc:
        raise TelemetryConfigInvalid(where, str(exc)) from None


def _env_found(environ: Mapping[str, str], name: str) -> _Found | None:
    value = environ.get(name, "").strip()
    return _Found(_checked(name, value, _endpoint), name) if value else None


def _timeout(otlp: OtlpSettings, environ: Mapping[str, str]) -> float:
    if "timeout" in otlp.model_fields_set:
        return otlp.timeout
    raw = environ.get("OTEL_EXPORTER_OTLP_TIMEOUT", "").strip()
    if not raw:
        return otlp.timeout
    if not raw.isdigit() or not 0 < int(raw) <= 60_000:
        raise TelemetryConfigInvalid("OTEL_EXPORTER_OTLP_TIMEOUT",
                                     "OTEL_EXPORTER_OTLP_TIMEOUT is milliseconds, 1 to 60000")
    return int(raw) / 1000.0


def _headers(var: str, raw: str) -> tuple[tuple[str, str], ...]:
    """``key=value,key2=value2`` (values URL-encoded), as the OTel variables write them; a
    bad pair is refused by its position, never shown (it may hold a key)."""
    pairs = [p for p in raw.split(",") if p.strip()]
    if len(pairs) > _MAX_HEADERS or len(raw) > 8192:
        raise TelemetryConfigInvalid(var, f"{var}: at most {_MAX_HEADERS} headers, 8 KiB")
    found = []
    for index, pair in enumerate(pairs, 1):
        name, sep, value = pair.partition("=")
        name, value = name.strip(), unquote(value.strip())
        if not sep or not _HEADER_NAME.fullmatch(name) or re.search(r"[\x00-\x1f\x7f]", value):
            raise TelemetryConfigInvalid(var, f"{var}: header {index} is not key=value (a "
                                         "token name, a value without control characters); "
                                         "its text is not shown: it may hold a secret")
        found.append((name, value))
    return tuple(found)
