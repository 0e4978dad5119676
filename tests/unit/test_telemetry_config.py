"""``[telemetry]`` and the standard ``OTEL_EXPORTER_OTLP_*`` variables (telemetry_config.py):
each hostile or unusable value refused naming the key or variable, a header's text never shown
(it may hold an API key), ``grpc`` taken from the team file or the variables with the OTel
spec's endpoint (host and port, no path), a missing grpc extra a typed error naming the pip
command, the variables filling what the section leaves out."""

from __future__ import annotations

import sys

import pytest
from pydantic import ValidationError

from orchestrator.config import TeamConfig
from orchestrator.errors import TelemetryConfigInvalid, TelemetryExporterMissing
from orchestrator.telemetry_config import GRPC_MODULES, TelemetrySection, export_settings


def _section(**otlp: object) -> TelemetrySection:
    return TelemetrySection.model_validate({"otlp": otlp})


HOSTILE_ENDPOINTS = [
    "http://user:pw@collector:4318", "http://collector:4318/?token=x", "http://c:4318/#f",
    "ftp://collector", "collector:4318", "http://c:4318/\x1b[2J", "http://" + "a" * 400,
    "javascript:alert(1)", ""]


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.parametrize("endpoint", HOSTILE_ENDPOINTS)
def test_an_endpoint_with_credentials_a_query_or_another_scheme_is_refused(
        endpoint: str, protocol: str) -> None:
    with pytest.raises(ValidationError, match="not an http"):
        _section(endpoint=endpoint, protocol=protocol)


@pytest.mark.parametrize("endpoint", [e for e in HOSTILE_ENDPOINTS if e])
def test_a_hostile_endpoint_variable_is_refused_over_grpc_too(endpoint: str) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        with pytest.raises(TelemetryConfigInvalid, match="not an http") as caught:
            export_settings(TelemetrySection(), {name: endpoint,
                                                 "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
        assert caught.value.details["where"] == name


def test_grpc_from_the_team_file_sends_both_signals_to_the_host_and_port() -> None:
    settings = export_settings(_section(endpoint="http://127.0.0.1:4317/", protocol="grpc"),
                               {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    assert (settings.traces_url, settings.metrics_url) == ("http://127.0.0.1:4317",) * 2, \
        "no /v1/traces over gRPC"
    assert (settings.traces_protocol, settings.metrics_protocol) == ("grpc", "grpc"), \
        "the team file wins over the variable"
    tls = export_settings(_section(endpoint="https://collector.example:443", protocol="grpc"),
                          {})
    assert tls.traces_url == "https://collector.example:443"
    assert "grpc" in settings.shown


def test_grpc_from_the_standard_variables_general_and_per_signal() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    settings = export_settings(TelemetrySection(), env)
    assert (settings.traces_url, settings.traces_protocol) == ("http://collector:4317", "grpc")
    assert (settings.metrics_url, settings.metrics_protocol) == ("http://collector:4317", "grpc")
    mixed = export_settings(TelemetrySection(), {
        **env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"})
    assert (mixed.traces_url, mixed.traces_protocol) == ("http://collector:4317", "grpc")
    assert (mixed.metrics_url, mixed.metrics_protocol) == ("http://collector:4318/v1/metrics",
                                                           "http/protobuf")
    assert "traces grpc, metrics http/protobuf" in mixed.shown
    metrics_only = export_settings(TelemetrySection(), {
        **env, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"})
    assert metrics_only.traces_url == "http://collector:4317/v1/traces"
    assert (metrics_only.metrics_url, metrics_only.metrics_protocol) == (
        "http://collector:4317", "grpc")


@pytest.mark.parametrize("name", ["OTEL_EXPORTER_OTLP_PROTOCOL",
                                  "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                                  "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"])
@pytest.mark.parametrize("value", ["http/json", "GRPC", "grpc\x1b[2J", "h2", "x" * 300])
def test_a_bad_protocol_variable_is_refused_naming_it(name: str, value: str) -> None:
    with pytest.raises(TelemetryConfigInvalid, match="write \"http/protobuf\"") as caught:
        export_settings(TelemetrySection(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                             name: value})
    assert caught.value.details["where"] == name
    assert caught.value.exit_code == 2


def test_a_grpc_endpoint_with_a_path_is_refused_naming_where_it_came_from() -> None:
    with pytest.raises(TelemetryConfigInvalid, match="host and port alone") as caught:
        export_settings(_section(endpoint="http://c:4317/v1/traces", protocol="grpc"), {})
    assert caught.value.details["where"] == "[telemetry] otlp.endpoint"
    with pytest.raises(TelemetryConfigInvalid, match="host and port alone") as caught:
        export_settings(TelemetrySection(), {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4317/v1/metrics"})
    assert caught.value.details["where"] == "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"


@pytest.mark.parametrize("raw", ["bad!name=v", "Grpc-Timeout=1S", "key-bin=AAAA",
                                 "x-api-key=s3cr3t-välue", "x-api-key=s3cr3t%C3%A9"])
def test_a_header_that_is_no_grpc_metadata_is_refused_without_its_text(raw: str) -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "HDRS": raw}
    http = export_settings(_section(headers_env="HDRS"), {**environ, "HDRS": "bad!name=v"})
    assert http.headers == (("bad!name", "v"),), "a token name is an HTTP header"
    with pytest.raises(TelemetryConfigInvalid, match="cannot be gRPC metadata") as caught:
        export_settings(_section(headers_env="HDRS", protocol="grpc"), environ)
    assert caught.value.details["where"] == "HDRS"
    assert "s3cr3t" not in caught.value.message and "bad!" not in caught.value.message


def test_the_header_values_are_in_no_repr_and_no_shown_line() -> None:
    settings = export_settings(_section(endpoint="http://c:4317", protocol="grpc",
                                        headers_env="HDRS"),
                               {"HDRS": "X-Api-Key=s3cr3t-value"})
    assert settings.headers == (("X-Api-Key", "s3cr3t-value"),)
    assert "s3cr3t" not in settings.shown and "X-Api-Key" in settings.shown
    assert "s3cr3t" not in repr(settings)


@pytest.mark.parametrize("module", GRPC_MODULES)
def test_grpc_without_its_extra_is_a_typed_error_naming_the_pip_command(
        monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """The extra missing (simulated: its module cannot be imported) is refused at launch with
    ``telemetry_grpc_missing``, the exact command in the message — not an ImportError; a team
    over OTLP/HTTP is not concerned."""
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(TelemetryExporterMissing) as caught:
        export_settings(_section(endpoint="http://c:4317", protocol="grpc"), {})
    error = caught.value
    assert (error.code, error.retryable, error.exit_code) == ("telemetry_grpc_missing", False, 2)
    assert f"{sys.executable} -m pip install 'teamctl[grpc]'" in error.message
    assert error.details["where"] == "[telemetry] otlp.protocol"
    assert isinstance(error, TelemetryConfigInvalid), "caught where a bad setting is"
    with pytest.raises(TelemetryExporterMissing) as caught:
        export_settings(TelemetrySection(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
                                             "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"})
    assert caught.value.details["where"] == "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    export_settings(_section(endpoint="http://c:4318"), {})


@pytest.mark.parametrize("bad", [{"timeout": 0}, {"timeout": float("nan")},
                                 {"headers_env": "A B"}, {"headers_env": "$(id)"},
                                 {"protocol": "http/json"}, {"endpoint": 4318},
                                 {"unknown": 1}])
def test_hostile_keys_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        _section(**bad)


def test_the_section_bounds_its_queue_and_interval() -> None:
    for bad in ({"max_queue": 0}, {"max_queue": 10**9}, {"metric_interval": 0.01},
                {"include_content": "yes please"}):
        with pytest.raises(ValidationError):
            TelemetrySection.model_validate(bad)


def test_the_standard_variables_fill_what_the_section_leaves_out() -> None:
    settings = export_settings(TelemetrySection(), {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=abc%3D,tenant = team1",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"})
    assert settings.traces_url == "http://collector:4318/v1/traces"
    assert settings.metrics_url == "http://collector:4318/v1/metrics"
    assert settings.headers == (("x-api-key", "abc="), ("tenant", "team1"))
    assert settings.timeout == 2.5
    assert "abc" not in settings.shown and "x-api-key" in settings.shown
    own = export_settings(_section(endpoint="http://127.0.0.1:4318"),
                          {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://elsewhere:4318"})
    assert own.traces_url == "http://127.0.0.1:4318/v1/traces", "the team file wins"
    traces_only = export_settings(TelemetrySection(), {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert traces_only.metrics_url == "http://c:4318/v1/metrics"


@pytest.mark.parametrize("raw", ["x-api-key", "k=v\x1b[2J", "bad name=v", "=v",
                                 ",".join(f"k{i}=v" for i in range(40))])
def test_a_bad_header_is_refused_without_showing_its_text(raw: str) -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "HDRS": raw}
    with pytest.raises(TelemetryConfigInvalid) as caught:
        export_settings(_section(headers_env="HDRS"), environ)
    assert caught.value.details["where"] == "HDRS"
    assert "\x1b" not in caught.value.message and "bad name" not in caught.value.message


def test_headers_env_that_is_not_set_and_a_bad_timeout_are_refused() -> None:
    with pytest.raises(TelemetryConfigInvalid, match="has no OTLP_KEY"):
        export_settings(_section(endpoint="http://c:4318", headers_env="OTLP_KEY"), {})
    with pytest.raises(TelemetryConfigInvalid, match="milliseconds"):
        export_settings(TelemetrySection(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                             "OTEL_EXPORTER_OTLP_TIMEOUT": "-1"})
    with pytest.raises(TelemetryConfigInvalid, match="not an http"):
        export_settings(TelemetrySection(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "file:///etc"})


def test_no_member_is_handed_the_headers_variable() -> None:
    team = {"team": {"name": "web", "workdir": "/tmp"},
            "telemetry": {"otlp": {"endpoint": "http://c:4318", "headers_env": "OTLP_KEY"}}}
    for key, value in (("pass_env", ["OTLP_KEY"]), ("env", {"OTLP_KEY": "x"})):
        with pytest.raises(ValidationError, match="the telemetry exporter's headers"):
            TeamConfig.model_validate({**team, "members": [
                {"name": "a", "runtime": "claude", key: value}]})
