"""The runtimes' own telemetry joins teamctl's (docs/telemetry.md): a real Claude Code member of
a team with `[telemetry]` exports its own events, metrics and spans to the same local receiver
as teamctl's spans, each carrying the resource attributes that name its team and member (and
its session id), and teamctl's trace of the same turn arrives beside them. Each test runs over
OTLP/HTTP and over gRPC (a real grpcio receiver: the CLIs are pointed over the team's
protocol)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.support.otlp_grpc_receiver import OtlpGrpcReceiver, otlp_grpc_receiver
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.support.real_members import claude_member, codex_member

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


@pytest.fixture(params=[otlp_receiver, otlp_grpc_receiver], ids=["http", "grpc"])
def receiver(request: pytest.FixtureRequest, teamctl: Teamctl) -> Iterator[OtlpReceiver]:
    with request.param() as found:
        yield found
        # the daemon stopped while the receiver is up: its last export is answered, not
        # retried against a closed port until its 5 s timeout
        teamctl.shutdown()


def _telemetry(receiver: OtlpReceiver) -> str:
    """The team file's ``[telemetry]``, exporting to ``receiver`` over its protocol."""
    protocol = "grpc" if isinstance(receiver, OtlpGrpcReceiver) else "http/protobuf"
    return (f'\n[telemetry]\notlp = {{ endpoint = "{receiver.url}", protocol = "{protocol}", '
            'timeout = 5.0 }\n')


def _answered(teamctl: Teamctl, member: dict[str, Any], receiver: OtlpReceiver
              ) -> dict[str, Any]:
    """The one member launched in a team exporting to ``receiver``, and its answered turn."""
    team = teamctl.write_team("e2e", [member])
    team.write_text(team.read_text() + _telemetry(receiver))
    assert teamctl.run("launch", str(team)).returncode == 0
    done: dict[str, Any] = teamctl.json("send", "rev", "why is this button misaligned?",
                                        "--wait", "--timeout", "120")
    assert done["state"] == "answered"
    return done


def _codex_exporter(receiver: OtlpReceiver, signal: str) -> dict[str, Any]:
    """A Codex ``[otel]`` exporter table sending ``signal`` to ``receiver``."""
    if isinstance(receiver, OtlpGrpcReceiver):
        return {"otlp-grpc": {"endpoint": receiver.url}}
    return {"otlp-http": {"endpoint": f"{receiver.url}/v1/{signal}", "protocol": "binary"}}


def test_a_real_claude_members_own_telemetry_arrives_with_its_names(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic,
        receiver: OtlpReceiver) -> None:
    member = claude_member("rev", claude_bin, anthropic)
    # the CLI's export intervals, shortened for the test (a member's own env wins)
    member["env"] = {**member["env"], "OTEL_METRIC_EXPORT_INTERVAL": "1000",  # type: ignore[dict-item]
                     "OTEL_LOGS_EXPORT_INTERVAL": "500"}
    team = teamctl.write_team("e2e", [member])
    team.write_text(team.read_text() + _telemetry(receiver))
    assert teamctl.run("launch", str(team)).returncode == 0
    session = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    done = teamctl.json("send", "rev", "why is this button misaligned?", "--wait",
                        "--timeout", "120")
    assert done["state"] == "answered"

    def arrived(r: OtlpReceiver) -> bool:
        events = {log["attributes"].get("event.name") for log in r.logs
                  if log["resource"].get("service.name") == "claude-code"}
        ours = any(s["resource"].get("service.name") == "teamctl" for s in r.spans)
        return "api_request" in events and ours and bool(r.metrics)

    assert receiver.wait_for(arrived, 60), [log["body"] for log in receiver.logs]
    claude_logs = [log for log in receiver.logs
                   if log["resource"].get("service.name") == "claude-code"]
    for log in claude_logs:
        assert log["resource"]["teamctl.team"] == "e2e"
        assert log["resource"]["teamctl.member"] == "rev"
        assert log["resource"]["teamctl.runtime"] == "claude"
    [request] = [log for log in claude_logs
                 if log["attributes"].get("event.name") == "api_request"][:1]
    assert request["attributes"]["session.id"] == session, "correlated by the session id"
    assert request["attributes"]["model"] == "claude-sonnet-4-5"
    prompts = [log for log in claude_logs
               if log["attributes"].get("event.name") == "user_prompt"]
    assert all(p["attributes"].get("prompt") in (None, "<REDACTED>") for p in prompts), \
        "no prompt text without include_content"
    assert all("misaligned" not in str(log) for log in claude_logs)
    trace = teamctl.json("trace", done["id"])
    ours = {s["span_id"] for s in receiver.spans if s["resource"]["service.name"] == "teamctl"}
    assert {s["span_id"] for s in trace["spans"]} <= ours
    body = b"".join(receiver.raw)
    assert b"sk-ant-e2e-dummy-key" not in body, "no credential leaves"



def test_a_real_codex_exec_members_own_trace_continues_teamctls_attempt_span(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses,
        receiver: OtlpReceiver) -> None:
    """Codex's ``exec`` starts a process per turn and reads ``TRACEPARENT`` at its start
    (captured, 0.171.0): teamctl passes each turn its attempt span's context, so with the
    member's own trace exporter on (its ``config``; teamctl leaves codex's ~400 spans a turn
    off) the ``codex.exec`` span is a child of teamctl's attempt span, in teamctl's trace;
    the events it logs inside its spans (its prompt, its API request) carry that trace id."""
    member = codex_member("rev", codex_bin, responses, transport="exec")
    member["config"]["otel"] = {  # type: ignore[index]
        name: _codex_exporter(receiver, signal)
        for name, signal in (("trace_exporter", "traces"), ("exporter", "logs"))}
    done = _answered(teamctl, member, receiver)
    trace = teamctl.json("trace", done["id"])
    [attempt] = [s for s in trace["spans"] if s["kind"] == "attempt"]

    def codex_spans(r: OtlpReceiver) -> list[dict[str, Any]]:
        return [s for s in r.spans if s["resource"].get("service.name") == "codex_exec"]

    assert receiver.wait_for(lambda r: any(s["name"] == "codex.exec" for s in codex_spans(r)),
                             60), [s["name"] for s in receiver.spans]
    [run] = [s for s in codex_spans(receiver) if s["name"] == "codex.exec"]
    assert (run["trace_id"], run["parent_id"]) == (trace["trace_id"], attempt["span_id"])
    assert run["resource"]["teamctl.member"] == "rev"
    assert receiver.wait_for(lambda r: any(
        log["body"] == "TRACEPARENT detected; continuing trace from parent context"
        and log["resource"].get("teamctl.member") == "rev" for log in r.logs), 30)
    events = {log["attributes"].get("event.name"): log for log in receiver.logs
              if log["resource"].get("teamctl.member") == "rev"}
    for name in ("codex.user_prompt", "codex.api_request"):
        assert events[name]["trace_id"] == trace["trace_id"], (name, events[name])
    assert b"sk-e2e-dummy-key" not in b"".join(receiver.raw), "no credential leaves"


@pytest.mark.parametrize("transport", ["exec", "app-server"])
def test_a_real_codex_member_pointed_by_teamctl_sends_its_events_and_metrics(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses,
        receiver: OtlpReceiver, transport: str) -> None:
    """No ``[otel]`` of the member's own: teamctl's tables (``otlp-http``, or ``otlp-grpc``
    when the team exports over gRPC) make the real codex — one process a turn, or its
    long-lived app-server — send its events (OTLP logs) and its metrics to the team's
    receiver, each naming the member; no prompt text without ``include_content``."""
    member = codex_member("rev", codex_bin, responses, transport=transport)
    # the Rust SDK's metric interval (60 s), shortened for the test (a member's own env wins):
    # the app-server exports its metrics on it, not at a process's end
    member["env"] = {**member["env"], "OTEL_METRIC_EXPORT_INTERVAL": "1000"}  # type: ignore[dict-item]
    _answered(teamctl, member, receiver)

    def codex(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [i for i in items if i["resource"].get("teamctl.member") == "rev"]

    def arrived(r: OtlpReceiver) -> bool:
        events = {log["attributes"].get("event.name") for log in codex(r.logs)}
        return "codex.api_request" in events and any(
            m["name"] == "codex.turn.e2e_duration_ms" for m in codex(r.metrics))

    assert receiver.wait_for(arrived, 60), [log["attributes"] for log in receiver.logs]
    for item in codex(receiver.logs) + codex(receiver.metrics):
        assert (item["resource"]["teamctl.team"], item["resource"]["teamctl.member"],
                item["resource"]["teamctl.runtime"]) == ("e2e", "rev", "codex")
    assert all("misaligned" not in str(log) for log in codex(receiver.logs))
    assert not codex(receiver.spans), "codex's own traces stay off unless the member asks"
    assert b"sk-e2e-dummy-key" not in b"".join(receiver.raw), "no credential leaves"
