"""``[telemetry]`` and the standard ``OTEL_EXPORTER_OTLP_*`` variables (telemetry_config.py):
each hostile or unusable value refused naming the key or variable, a header's text never shown
(it may hold an API key), ``grpc`` refused with the reason, the variables filling what the
section leaves out."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestrator.config import TeamConfig
from orchestrator.errors import TelemetryConfigInvalid
from orchestrator.telemetry_config import TelemetrySection, export_settings


def _section(**otlp: object) -> TelemetrySection:
    return TelemetrySection.model_validate({"otlp": otlp})


@pytest.mark.parametrize("endpoint", [
    "http://user:pw@collector:4318", "http://collector:4318/?token=x", "http://c:4318/#f",
    "ftp://collector", "collector:4318", "http://c:4318/\x1b[2J", "http://" + "a" * 400,
    "javascript:alert(1)", ""])
def test_an_endpoint_with_credentials_a_query_or_another_scheme_is_refused(
        endpoint: str) -> None:
    with pytest.raises(ValidationError, match="not an http"):
        _section(endpoint=endpoint)


def test_grpc_is_refused_with_the_reason_and_the_fix() -> None:
    with pytest.raises(ValidationError, match=r"OTLP/HTTP.*4318"):
        _section(endpoint="http://127.0.0.1:4317", protocol="grpc")
    with pytest.raises(TelemetryConfigInvalid, match="not supported") as caught:
        export_settings(TelemetrySection(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                             "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert caught.value.details["where"] == "OTEL_EXPORTER_OTLP_PROTOCOL"
    assert caught.value.exit_code == 2


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
