"""The one table of runtimes: name, the variable that overrides its executable, its default
executable, and the capability fields the core reads instead of a runtime's name (the ledger,
the supervisor and the team file's checks ask "does it report cost?", never "is it Codex?").
The team file's ``runtime`` values, ``teamctl doctor``, the registry and the runtime adapters
all read it (standard library only: the CLI imports it). This module and the ``RuntimeName``
literal are the only places in ``orchestrator/`` that spell a runtime's name
(tests/unit/test_layering.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args
from urllib.parse import quote

__all__ = ["ACP", "CLAUDE", "CODEX", "OPENCODE", "RUNTIMES", "Collector", "OtlpTarget",
           "OwnTelemetry", "RuntimeInfo", "RuntimeName", "runtime_info"]

RuntimeName = Literal["claude", "codex", "opencode", "acp"]
_SIGNALS = ("traces", "metrics", "logs")


@dataclass(frozen=True)
class OtlpTarget:
    """Where one signal goes: ``protocol`` ``"http/protobuf"`` with ``url`` the signal's own
    URL (``…/v1/logs``), or ``"grpc"`` with ``url`` the collector's ``scheme://host:port``."""

    protocol: str
    url: str


@dataclass(frozen=True)
class Collector:
    """The team's collector as a member's CLI is pointed at it, per signal (the CLIs' events,
    OTLP logs, go where teamctl's traces go: docs/telemetry.md)."""

    traces: OtlpTarget
    metrics: OtlpTarget
    logs: OtlpTarget

    def targets(self) -> dict[str, OtlpTarget]:
        return {signal: getattr(self, signal) for signal in _SIGNALS}

    def shared(self) -> OtlpTarget | None:
        """One protocol and one endpoint for every signal (as ``OTEL_EXPORTER_OTLP_ENDPOINT``
        reads it: over OTLP/HTTP the base URL the ``/v1/<signal>`` paths are added to), or
        None when the signals part."""
        targets = self.targets()
        protocols = {t.protocol for t in targets.values()}
        bases = {_base(signal, t) for signal, t in targets.items()}
        if len(protocols) != 1 or len(bases) != 1 or None in bases:
            return None
        return OtlpTarget(protocols.pop(), str(bases.pop()))


def _base(signal: str, target: OtlpTarget) -> str | None:
    """The endpoint ``target`` is read from as a general one (None: a path of its own)."""
    if target.protocol == "grpc":
        return target.url
    suffix = f"/v1/{signal}"
    return target.url.removesuffix(suffix) if target.url.endswith(suffix) else None


# how a runtime's own OpenTelemetry export is pointed at a collector: (where each signal goes,
# the resource attributes naming the member, whether content may leave) → (env, config) added
# to its launch — never a secret (docs/telemetry.md, "The runtimes' own telemetry")
OwnTelemetry = Callable[[Collector, Mapping[str, str], bool],
                        tuple[dict[str, str], dict[str, Any]]]


def _resource(attributes: Mapping[str, str]) -> str:
    """``OTEL_RESOURCE_ATTRIBUTES``: ``key=value,…``, values percent-encoded (W3C Baggage)."""
    return ",".join(f"{k}={quote(v, safe='')}" for k, v in attributes.items())


def _claude_endpoints(collector: Collector) -> dict[str, str]:
    """The standard variables Claude Code's SDK reads: the general pair when every signal
    shares one endpoint, else each signal's own (2.1.332 honours them, per-signal protocols
    included)."""
    shared = collector.shared()
    if shared is not None:
        return {"OTEL_EXPORTER_OTLP_PROTOCOL": shared.protocol,
                "OTEL_EXPORTER_OTLP_ENDPOINT": shared.url}
    env: dict[str, str] = {}
    for signal, target in collector.targets().items():
        env[f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"] = target.protocol
        env[f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"] = target.url
    return env


def _claude_telemetry(collector: Collector, attributes: Mapping[str, str], content: bool
                      ) -> tuple[dict[str, str], dict[str, Any]]:
    """Claude Code's telemetry variables: metrics, events (logs) and its beta traces over
    OTLP/HTTP or gRPC (captured from 2.1.332: docs/telemetry.md); prompts and tool details
    only with content."""
    env = {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
           "OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp",
           "OTEL_TRACES_EXPORTER": "otlp", **_claude_endpoints(collector),
           "OTEL_RESOURCE_ATTRIBUTES": _resource(attributes)}
    if content:
        env |= {"OTEL_LOG_USER_PROMPTS": "1", "OTEL_LOG_TOOL_DETAILS": "1"}
    return env, {}


def _codex_exporter(target: OtlpTarget) -> dict[str, Any]:
    """One of Codex's ``OtelExporterKind`` tables (``otlp-http`` or ``otlp-grpc``)."""
    if target.protocol == "grpc":
        return {"otlp-grpc": {"endpoint": target.url}}
    return {"otlp-http": {"endpoint": target.url, "protocol": "binary"}}


def _codex_telemetry(collector: Collector, attributes: Mapping[str, str], content: bool
                     ) -> tuple[dict[str, str], dict[str, Any]]:
    """Codex's ``[otel]``: its events (logs) and metrics over OTLP/HTTP or gRPC (its traces,
    ~380 spans a turn, are the operator's to turn on in the member's ``config``); the resource
    attributes through the standard variable, which its Rust SDK reads (0.171.0)."""
    return {"OTEL_RESOURCE_ATTRIBUTES": _resource(attributes)}, {"otel": {
        "exporter": _codex_exporter(collector.logs),
        "metrics_exporter": _codex_exporter(collector.metrics),
        "log_user_prompt": content}}


@dataclass(frozen=True)
class RuntimeInfo:
    """One runtime: how its executable is found, and what the core may count on.

    ``reports_cost``: its usage readings carry a cost (else tokens only, priced from the price
    table — a money budget on an unpriced model could never be enforced).
    ``budget_backstop``: its CLI takes the budget left as an argument of its process
    (``--max-budget-usd``), so a changed budget means a recycled process.
    ``cannot_ask_on``: the transports on which it cannot put a question to the operator
    (the ``ask`` profile needs another).
    ``agent_presets``: it runs any agent of a protocol, named by a preset (``acp_agent``) or
    by its ``command`` — it has no executable of its own (``default_executable`` empty).
    ``asks_through_own_sandbox``: its ``ask`` profile is its own OS sandbox's refusals turned
    into questions, a sandbox that cannot start inside teamctl's (``ask`` with ``sandbox =
    "process"`` is refused: docs/permissions.md).
    ``daemon_connects_in``: the daemon talks to it through a server it runs (OpenCode's HTTP
    API), not over its stdio: sandboxed on another host with its network cut, that way in is
    not there yet (refused: docs/security.md).
    ``options``: the member keys of the team file that only this runtime reads (Codex's
    ``transport``, ACP's ``acp_agent``): handed to its adapter as ``LaunchSpec.options``, which
    the adapter types and reads (``CodexOptions``, ``AcpOptions``) — the core passes them on by
    this row, never by name.
    ``footprint_mib``: the resident memory one member's process tree is expected to hold
    until teamctl has measured that runtime's members on this machine — memory admission's
    default (docs/scaling.md, "Starts that fit"); an ACP preset states its own.
    ``credentials``: the variables of a member's env its CLI takes a credential from, in the
    order the CLI prefers them, each with the account it names (``anthropic:key``: the quota
    account ``anthropic:key…3f2a``, by the value's fingerprint; docs/costs.md, "Quota
    windows"); a member with none of them set uses its login.
    ``own_telemetry``: how its CLI's own OpenTelemetry export is pointed at the team's
    collector (None: it has none teamctl can point)."""

    name: RuntimeName
    env_var: str
    default_executable: str
    reports_cost: bool = True
    budget_backstop: bool = False
    cannot_ask_on: frozenset[str] = frozenset()
    agent_presets: bool = False
    asks_through_own_sandbox: bool = False
    daemon_connects_in: bool = False
    options: tuple[str, ...] = ()
    credentials: tuple[tuple[str, str], ...] = ()
    footprint_mib: int = 300
    own_telemetry: OwnTelemetry | None = None

    def can_ask(self, transport: str) -> bool:
        """Whether a member on ``transport`` can ask the operator (``permissions = "ask"``)."""
        return transport not in self.cannot_ask_on


# the footprints: Claude Code 110-700 MiB a session, 258 MiB the median (issue 47); a Codex
# app-server ~136 MiB idle, 169 MiB after a turn (docs/scaling.md); OpenCode 1.18.33's serve
# 373 MiB at its start, 311 MiB a few seconds later (measured here)
CLAUDE = RuntimeInfo("claude", "TEAMCTL_CLAUDE_BIN", "claude", budget_backstop=True,
                     footprint_mib=260,
                     credentials=(("ANTHROPIC_AUTH_TOKEN", "anthropic:token"),
                                  ("ANTHROPIC_API_KEY", "anthropic:key"),
                                  ("CLAUDE_CODE_OAUTH_TOKEN", "claude:token")),
                     own_telemetry=_claude_telemetry)
CODEX = RuntimeInfo("codex", "TEAMCTL_CODEX_BIN", "codex", reports_cost=False,
                    cannot_ask_on=frozenset({"exec"}), asks_through_own_sandbox=True,
                    options=("transport",), footprint_mib=170,
                    credentials=(("CODEX_API_KEY", "openai:key"),),
                    own_telemetry=_codex_telemetry)
OPENCODE = RuntimeInfo("opencode", "TEAMCTL_OPENCODE_BIN", "opencode", daemon_connects_in=True,
                       footprint_mib=350)
ACP = RuntimeInfo("acp", "TEAMCTL_ACP_BIN", "", reports_cost=False, agent_presets=True,
                  options=("acp_agent",))
RUNTIMES: tuple[RuntimeInfo, ...] = (CLAUDE, CODEX, OPENCODE, ACP)
assert tuple(r.name for r in RUNTIMES) == get_args(RuntimeName)


def runtime_info(name: RuntimeName) -> RuntimeInfo:
    """The row of ``name`` (a validated team file's ``runtime``, or an adapter's own)."""
    return next(r for r in RUNTIMES if r.name == name)
