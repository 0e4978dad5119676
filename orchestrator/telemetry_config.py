"""The team file's ``[telemetry]`` section (docs/telemetry.md), apart from config.py; and the
standard ``OTEL_EXPORTER_OTLP_*`` variables of the daemon's environment it falls back on.

``otlp = { endpoint = "http://127.0.0.1:4318", protocol = "http/protobuf", headers_env =
"OTLP_HEADERS", timeout = 10.0 }``: where spans and metrics go (``endpoint`` is the base URL:
``/v1/traces`` and ``/v1/metrics`` are added, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is read), the
variable of the daemon's environment that holds the headers (``key=value,key2=value2``: an
API key is a secret, so it is never in the team file, a log or a member's environment);
``include_content``: message text, replies and approval summaries leave only when true, and
then redacted (the members' CLIs log prompts only then too); ``runtimes``: point the members'
CLIs' own telemetry (Claude Code's variables, Codex's ``[otel]``) at the same collector;
``max_queue``: spans waiting for the exporter (past it, each is dropped and counted);
``metric_interval``: seconds between two metric exports.

``protocol = "grpc"`` is refused (docs/telemetry.md, "Why not gRPC"): teamctl exports over
OTLP/HTTP only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated
from urllib.parse import unquote

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from orchestrator.errors import TelemetryConfigInvalid

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ExportSettings", "OtlpSettings", "TelemetrySection", "export_settings"]

_ENV = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_URL = re.compile(r"https?://[A-Za-z0-9.-]+|https?://\[[0-9A-Fa-f:.]+\]")
_PORT_PATH = re.compile(r"(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?")
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")
_MAX_HEADERS = 32


def _endpoint(value: str) -> str:
    """An http(s) base URL: no credentials, query or fragment (they would end in logs)."""
    found = _URL.match(value)
    if found is None or not _PORT_PATH.fullmatch(value[found.end():]) or len(value) > 300:
        raise ValueError(f"endpoint = {value!r} is not an http(s) URL without credentials, "
                         "query or fragment (e.g. \"http://127.0.0.1:4318\", a collector's "
                         "OTLP/HTTP receiver)")
    return value.rstrip("/")


def _protocol(value: str) -> str:
    if value == "grpc":
        raise ValueError("protocol = \"grpc\" is not supported: teamctl exports over OTLP/HTTP "
                         "(\"http/protobuf\") only — every collector serves both (OTLP/HTTP on "
                         "port 4318); docs/telemetry.md says why")
    if value != "http/protobuf":
        raise ValueError(f"protocol = {value!r}: write \"http/protobuf\"")
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

    otlp: OtlpSettings = OtlpSettings()
    include_content: bool = False
    # the members' CLIs' own telemetry pointed at the same collector (Claude Code, Codex)
    runtimes: bool = True
    max_queue: int = Field(default=2048, ge=16, le=65536)
    metric_interval: float = Field(default=60.0, ge=1.0, le=3600.0, allow_inf_nan=False)


@dataclass(frozen=True)
class ExportSettings:
    """Where one exporter sends, resolved from the section and the environment; ``headers``
    are secrets (never logged: ``shown`` leaves them out)."""

    traces_url: str
    metrics_url: str
    headers: tuple[tuple[str, str], ...]
    timeout: float
    include_content: bool
    max_queue: int
    metric_interval: float

    @property
    def shown(self) -> str:
        """What a log line may say of it: the URL, and the header names alone."""
        names = ",".join(name for name, _ in self.headers) or "none"
        return f"{self.traces_url} (headers: {names})"


def export_settings(section: TelemetrySection, environ: Mapping[str, str]) -> ExportSettings:
    """The section's settings, each key it leaves out read from the standard variables
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_TRACES_ENDPOINT``, ``…_METRICS_ENDPOINT``,
    ``…_HEADERS``, ``…_PROTOCOL``, ``…_TIMEOUT`` in milliseconds). A bad value is a
    ``TelemetryConfigInvalid`` naming the key or variable, never its value when it is a
    header."""
    otlp = section.otlp
    protocol = otlp.protocol or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    _checked("OTEL_EXPORTER_OTLP_PROTOCOL", protocol, _protocol)
    base = otlp.endpoint or _env_url(environ, "OTEL_EXPORTER_OTLP_ENDPOINT")
    traces = _env_url(environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") if not otlp.endpoint \
        else None
    metrics = _env_url(environ, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") if not otlp.endpoint \
        else None
    if base is None and traces is None:
        raise TelemetryConfigInvalid(
            "[telemetry] otlp.endpoint", "no endpoint: set [telemetry] otlp.endpoint (e.g. "
            "\"http://127.0.0.1:4318\") or OTEL_EXPORTER_OTLP_ENDPOINT in the daemon's "
            "environment")
    traces = traces or f"{base}/v1/traces"
    metrics = metrics or (f"{base}/v1/metrics" if base else
                          traces.removesuffix("/v1/traces") + "/v1/metrics")
    headers_var = otlp.headers_env or "OTEL_EXPORTER_OTLP_HEADERS"
    if otlp.headers_env is not None and headers_var not in environ:
        raise TelemetryConfigInvalid(
            "[telemetry] otlp.headers_env", f"[telemetry] otlp.headers_env = {headers_var!r}, "
            f"but the daemon's environment has no {headers_var}: export it where the daemon "
            "starts (key=value,key2=value2), or remove headers_env")
    headers = _headers(headers_var, environ.get(headers_var, ""))
    return ExportSettings(traces, metrics, headers, _timeout(otlp, environ),
                          section.include_content, section.max_queue, section.metric_interval)


def _checked(where: str, value: str, check: object) -> str:
    try:
        return check(value)  # type: ignore[operator,no-any-return]
    except ValueError as exc:
        raise TelemetryConfigInvalid(where, str(exc)) from None


def _env_url(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return _checked(name, value, _endpoint) if value else None


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
