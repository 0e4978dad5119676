"""Telemetry's export (daemon/telemetry/), through the real OpenTelemetry SDK exporters to a
local OTLP/HTTP receiver and a local OTLP/gRPC receiver (a real grpcio server), both decoding
with the OpenTelemetry protobuf definitions (no collector runs here: tests/support/
otlp_receiver.py, otlp_grpc_receiver.py): the lead → reviewer → designer chain over three
runtimes is one trace with the right parents, attributes and costs, the very ids `teamctl
trace` prints, over either protocol; a re-delivered turn is a second attempt span; no content
leaves without ``include_content``, and with it redacted; a receiver that is down or wedged
never holds a turn — its spans are dropped or failed, counted and logged; gRPC's headers
arrive as lower-case metadata and in no log; gRPC without its extra is a typed error."""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.contracts import ApprovalRequest, TurnResult
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from orchestrator.daemon.telemetry import CheckRan, Delays, TraceJournal, build_trace
from orchestrator.errors import RuntimeExited, TelemetryConfigInvalid, TelemetryExporterMissing
from tests.support.chains import USED, Chain, chain_team, quiet
from tests.support.fakes import FakeRuntime, asking_step, core, team_config
from tests.support.otlp_grpc_receiver import OtlpGrpcReceiver, otlp_grpc_receiver, self_signed
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.support.settle import until

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from pathlib import Path

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import LaunchSpec, Turn
    from tests.support.fakes import FakeProcess

pytestmark = pytest.mark.anyio

SECRET = "sk-ant-api03-" + "x" * 40
# an exporter timeout under the SDK's first gRPC retry backoff (1 s ± 20 %): an export to a
# receiver that is down fails at once, never after a retry's wait — and one to a live receiver
# (milliseconds here) still has 0.75 s
BELOW_RETRY = 0.75
# the tests that hold for either protocol: each runs against both receivers
BOTH = pytest.mark.parametrize("receiving", [otlp_receiver, otlp_grpc_receiver],
                               ids=["http", "grpc"])


def _telemetry(receiver: OtlpReceiver, timeout: float = 5.0, headers_env: str | None = None,
               **more: Any) -> dict[str, Any]:
    protocol = "grpc" if isinstance(receiver, OtlpGrpcReceiver) else "http/protobuf"
    otlp = {"endpoint": receiver.url, "protocol": protocol, "timeout": timeout,
            "headers_env": headers_env}
    return {"telemetry": {"otlp": otlp, **more}}


async def _wait(receiver: OtlpReceiver, check: Any) -> None:
    assert await anyio.to_thread.run_sync(receiver.wait_for, check), receiver.spans


@BOTH
async def test_the_chain_is_one_exported_trace_with_its_parents_attributes_and_costs(
        tmp_path: Path, receiving: Callable[[], AbstractContextManager[OtlpReceiver]]) -> None:
    chain = Chain()
    runtimes = chain.runtimes()

    async def replied() -> bool:  # the chain's last turn: the reviewer's reply to the lead
        return len(runtimes["claude"].turns) >= 2

    with receiving() as receiver:
        async with core(tmp_path, runtimes=runtimes, environ={}) as c:
            chain.c = c
            await c.teams.launch(chain_team(tmp_path, **_telemetry(receiver)), "t.toml",
                                 wait=True, timeout=10)
            sent = await c.teams.send(None, "lead", "plan the login page", wait=True,
                                      timeout=10)
            # quiet alone may look between an answer and the reply it sends (nothing
            # queued for a moment): the trace read then lacked the last turns
            await until(replied)
            await quiet(c)
            rows = await TraceJournal(c.store).rows(sent.id)
            assert rows is not None
            local = build_trace(rows)
            await _wait(receiver, lambda r: len(r.spans) >= len(local.spans))
            assert c.built is not None and c.built.telemetry.dropped == 0

    spans = {s["span_id"]: s for s in receiver.spans}
    assert {s["trace_id"] for s in receiver.spans} == {local.trace_id}, "one trace"
    assert set(spans) == {s.span_id for s in local.spans}, "the ids teamctl trace prints"
    for span in local.spans:
        assert spans[span.span_id]["parent_id"] == span.parent_id
    turns = {s["attributes"]["teamctl.member"]: s["attributes"] for s in receiver.spans
             if s["attributes"]["teamctl.kind"] == "attempt"
             and "asks" not in str(s["attributes"])}
    for member, runtime in (("lead", "claude"), ("reviewer", "codex"),
                            ("designer", "opencode")):
        attrs = [s["attributes"] for s in receiver.spans
                 if s["attributes"]["teamctl.kind"] == "attempt"
                 and s["attributes"]["teamctl.member"] == member]
        assert {a["teamctl.runtime"] for a in attrs} == {runtime}
        first = attrs[0]
        assert (first["teamctl.team"], first["teamctl.attempt"], first["teamctl.epoch"],
                first["teamctl.outcome"]) == ("web", 1, 1, "answered")
        assert first["gen_ai.usage.input_tokens"] == USED[member][0]
        assert first["teamctl.cost_usd"] == pytest.approx(USED[member][2])
        assert first["teamctl.started_at"] <= first["teamctl.sent_at"] <= \
            first["teamctl.ended_at"]
    assert turns["designer"]["gen_ai.request.model"] == "openrouter/moonshotai/kimi-k2.6"
    [to_reviewer] = [s for s in receiver.spans if s["name"] == "deliver to reviewer"
                     and s["attributes"]["teamctl.sender"] == "lead"]
    assert spans[to_reviewer["parent_id"]]["attributes"]["teamctl.member"] == "lead"
    assert {s["resource"]["service.name"] for s in receiver.spans} == {"teamctl"}
    # the metrics, sent when the exporter closed: turns and cost by member and model
    metrics = {m["name"]: m["points"] for m in receiver.metrics}
    turns_by = {p["attributes"]["teamctl.member"]: p["value"] for p in metrics["teamctl.turns"]}
    assert turns_by["designer"] == 1 and turns_by["lead"] >= 2  # its own, then the reply
    cost = {(p["attributes"]["teamctl.member"], p["attributes"]["gen_ai.request.model"]):
            p["value"] for p in metrics["teamctl.cost"]}
    assert cost[("designer", "openrouter/moonshotai/kimi-k2.6")] == pytest.approx(0.03)
    assert {p["attributes"]["teamctl.member"] for p in metrics["teamctl.queue.depth"]} == {
        "lead", "reviewer", "designer"}
    body = b"".join(receiver.raw)
    assert b"plan the login page" not in body and b"asks: look at it" not in body, \
        "no content without include_content"
    assert not any(k.startswith(("teamctl.message.text", "teamctl.reply"))
                   for s in receiver.spans for k in s["attributes"])


async def test_content_leaves_only_with_the_switch_and_redacted(tmp_path: Path) -> None:
    runtime = FakeRuntime(["answer"])
    with otlp_receiver() as receiver:
        config = team_config(tmp_path, {"name": "lead"})
        config = config.model_validate({**config.model_dump(exclude_defaults=True),
                                        **_telemetry(receiver, include_content=True)})
        async with core(tmp_path, runtime, environ={}) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
            await c.teams.send(None, "lead", f"deploy with {SECRET}", wait=True, timeout=10)
            await _wait(receiver, lambda r: any(s["name"] == "deliver to lead"
                                                for s in r.spans))
    [delivery] = [s for s in receiver.spans if s["name"] == "deliver to lead"]
    text = delivery["attributes"]["teamctl.message.text"]
    assert text.startswith("deploy with ") and SECRET not in text
    assert "teamctl.reply" in delivery["attributes"]
    assert SECRET.encode() not in b"".join(receiver.raw)


async def _tooling(process: FakeProcess, turn: Turn) -> TurnResult:
    """A turn whose runtime reports two tool calls, one failed, one given a secret."""
    tools = process.spec.tools
    assert tools is not None
    tools.tool(turn.message_id, "c1", "Bash", "running", {"command": f"curl -H {SECRET}"})
    tools.tool(turn.message_id, "c1", "Bash", "running")  # a repeat: nothing new
    tools.tool(turn.message_id, "c1", "Bash", "completed")
    tools.tool(turn.message_id, "c2", "Edit", "failed", {"file_path": "a.md"})
    return TurnResult(reply="done")


@pytest.mark.parametrize("include", [False, True])
async def test_tool_calls_are_exported_as_children_of_their_turn_arguments_only_with_content(
        tmp_path: Path, include: bool) -> None:
    runtime = FakeRuntime([_tooling])
    with otlp_receiver() as receiver:
        config = team_config(tmp_path, {"name": "lead"})
        config = config.model_validate({**config.model_dump(exclude_defaults=True),
                                        **_telemetry(receiver, include_content=include)})
        async with core(tmp_path, runtime, environ={}) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
            await c.teams.send(None, "lead", "run it", wait=True, timeout=10)
            await _wait(receiver, lambda r: len(r.spans) >= 4)
    by_name = {s["name"]: s for s in receiver.spans}
    turn, bash, edit = by_name["turn lead #1"], by_name["tool Bash"], by_name["tool Edit"]
    assert bash["parent_id"] == edit["parent_id"] == turn["span_id"]
    assert (bash["attributes"]["teamctl.kind"], bash["attributes"]["teamctl.outcome"],
            edit["attributes"]["teamctl.outcome"]) == ("tool", "completed", "failed")
    assert (edit["status"], bash["status"]) == (2, 0), "failed: ERROR; else UNSET"
    if include:
        shown = bash["attributes"]["teamctl.tool.arguments"]
        assert shown.startswith('{"command": "curl -H ') and SECRET not in shown
        assert edit["attributes"]["teamctl.tool.arguments"] == '{"file_path": "a.md"}'
    else:
        assert not any("teamctl.tool.arguments" in s["attributes"] for s in receiver.spans)
        assert b"a.md" not in b"".join(receiver.raw)
    assert SECRET.encode() not in b"".join(receiver.raw)


async def test_a_check_that_ends_after_its_turn_is_exported_under_it_alone(
        tmp_path: Path) -> None:
    """The gate (inside the turn) leaves with its attempt; the merge queue's integration
    check, ended after the attempt was exported, follows as a child of it — and nothing of
    what was already sent is sent again."""
    holder: list[Any] = []

    async def completing(process: FakeProcess, turn: Turn) -> TurnResult:
        board, task_id = holder
        await board.complete(task_id, by=Actor("lead"), summary="did it")
        return TurnResult(reply="done")

    with otlp_receiver() as receiver:
        config = team_config(tmp_path, {"name": "lead"})
        config = config.model_validate({**config.model_dump(exclude_defaults=True),
                                        **_telemetry(receiver)})
        async with core(tmp_path, FakeRuntime([completing]), environ={}) as c:
            assert c.built is not None
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
            task = await c.built.board.create("web", "x", created_by=OPERATOR, assignee=Assignee(
                "lead", c.supervisor.member("web", "lead").epoch))
            holder[:] = [c.built.board, task.id]
            await c.teams.send(None, "lead", "finish it", wait=True, timeout=10)
            await _wait(receiver, lambda r: any(s["name"] == f"gate T{task.id}"
                                                for s in r.spans))
            sent = len(receiver.spans)
            c.built.telemetry.checked(CheckRan("web", task.id, "integration", time.time(),
                                               time.time() + 0.5, "passed"))
            await _wait(receiver, lambda r: len(r.spans) > sent)
            await quiet(c)
    by_name = {s["name"]: s for s in receiver.spans}
    turn = by_name["turn lead #1"]
    check = by_name[f"integration check T{task.id}"]
    assert by_name[f"gate T{task.id}"]["parent_id"] == check["parent_id"] == turn["span_id"]
    assert check["attributes"]["teamctl.outcome"] == "passed"
    ids = [s["span_id"] for s in receiver.spans]
    assert len(ids) == len(set(ids)), "a span already sent is never sent again"


async def _spent(process: FakeProcess, turn: Turn) -> TurnResult:
    """A turn whose runtime says the account's window is spent for an hour (a quota hold)."""
    meter = process.spec.meter
    assert meter is not None
    meter.rate_limited(time.time() + 3600, "the account's usage limit was reached")
    return TurnResult(reply="spent")


def _gauge(receiver: OtlpReceiver, name: str) -> dict[str, float]:
    """The newest export of gauge ``name``: its value per member."""
    found = [m for m in receiver.metrics if m["name"] == name]
    return {} if not found else {p["attributes"]["teamctl.member"]: p["value"]
                                 for p in found[-1]["points"]}


@BOTH
async def test_restarts_approvals_waiting_and_held_are_exported_per_member(
        tmp_path: Path, receiving: Callable[[], AbstractContextManager[OtlpReceiver]]) -> None:
    """The gauges the chain test does not reach, at the receiver: a member restarted once
    (its process exited mid-turn), one with a request waiting on the operator, one held by a
    spent quota window — each counted on its own member, the others at zero. The metrics
    leave every 50 ms (the core's ``Delays``: a team's ``metric_interval`` is 1 s at least);
    the crasher restarts at once."""
    asked: list[Any] = []
    runtimes = {"claude": FakeRuntime(["exit", "answer"]),
                "codex": FakeRuntime([asking_step(ApprovalRequest("permission", "Bash",
                                                                  "rm -rf build"), asked)]),
                "opencode": FakeRuntime([_spent, "answer"])}
    for name, runtime in runtimes.items():
        runtime.name = name  # type: ignore[misc]
    with receiving() as receiver:
        config = team_config(tmp_path, {"name": "crasher", "backoff": [0.01, 0.1]},
                             {"name": "asker", "runtime": "codex", "permissions": "ask"},
                             {"name": "spent", "runtime": "opencode"})
        config = config.model_validate({**config.model_dump(exclude_defaults=True),
                                        **_telemetry(receiver)})
        delays = Delays(batch=0.02, export=0.02, metrics=0.05)
        async with core(tmp_path, runtimes=runtimes, environ={}, telemetry_delays=delays) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
            await c.teams.send(None, "asker", "clean up", wait=False, timeout=10)
            with anyio.fail_after(10):
                [pending] = (await c.approvals.query(wait=5.0)).approvals
            done = await c.teams.send(None, "crasher", "hello", wait=True, timeout=20)
            assert (done.state, done.attempts) == ("answered", 2)
            done = await c.teams.send(None, "spent", "hello", wait=True, timeout=20)
            assert done.state == "answered"

            gauges: dict[str, dict[str, float]] = {}

            def seen(r: OtlpReceiver) -> bool:
                """The newest export's gauges, kept: whether each counts its own member."""
                gauges.update({n: _gauge(r, n) for n in ("teamctl.member.restarts",
                                                         "teamctl.approvals.waiting",
                                                         "teamctl.member.held")})
                return (gauges["teamctl.member.restarts"].get("crasher") == 1
                        and gauges["teamctl.approvals.waiting"].get("asker") == 1
                        and gauges["teamctl.member.held"].get("spent") == 1)

            assert await anyio.to_thread.run_sync(receiver.wait_for, seen), gauges
            await c.approvals.decide(pending.id, "deny", message="not now")
    # that export, the others at zero (an export after the deny counts no request waiting)
    assert gauges["teamctl.member.restarts"] == {"crasher": 1, "asker": 0, "spent": 0}
    assert gauges["teamctl.approvals.waiting"] == {"crasher": 0, "asker": 1, "spent": 0}
    assert gauges["teamctl.member.held"] == {"crasher": 0, "asker": 0, "spent": 1}
    assert [a.decision for a in asked] == ["deny"], "it waited until the operator decided"


async def test_a_redelivered_turn_is_a_second_attempt_span_of_one_exported_trace(
        tmp_path: Path) -> None:
    runtime = FakeRuntime([RuntimeExited("lead", 1, []), "answer"])
    with otlp_receiver() as receiver:
        config = team_config(tmp_path, {"name": "lead"})
        config = config.model_validate({**config.model_dump(exclude_defaults=True),
                                        **_telemetry(receiver)})
        async with core(tmp_path, runtime, environ={}) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
            sent = await c.teams.send(None, "lead", "hello", wait=True, timeout=20)
            await _wait(receiver, lambda r: len(r.spans) >= 3)
    attempts = sorted((s for s in receiver.spans if s["attributes"]["teamctl.kind"] == "attempt"),
                      key=lambda s: s["attributes"]["teamctl.attempt"])
    [delivery] = [s for s in receiver.spans if s["attributes"]["teamctl.kind"] == "delivery"]
    assert [a["attributes"]["teamctl.outcome"] for a in attempts] == ["requeued", "answered"]
    assert {a["parent_id"] for a in attempts} == {delivery["span_id"]}
    assert len({s["trace_id"] for s in receiver.spans}) == 1
    assert delivery["attributes"]["teamctl.message.id"] == sent.id


@BOTH
async def test_a_receiver_that_hangs_never_holds_a_turn_and_its_drops_are_counted(
        tmp_path: Path, receiving: Callable[[], AbstractContextManager[OtlpReceiver]]) -> None:
    """The collector wedged (each request read, never answered): every turn is answered as
    without telemetry; past the exporter's queue the spans are dropped, counted, logged."""
    runtime = FakeRuntime(["answer"] * 60)
    with receiving() as receiver:
        receiver.hang = True
        config = team_config(tmp_path, {"name": "lead"})
        config = config.model_validate({**config.model_dump(exclude_defaults=True),
                                        **_telemetry(receiver, max_queue=16)})
        with capture_logs() as logs:
            async with core(tmp_path, runtime, environ={}) as c:
                await c.teams.launch(config, "t.toml", wait=True, timeout=10)
                for n in range(40):
                    done = await c.teams.send(None, "lead", f"turn {n}", wait=True,
                                              timeout=10)
                    assert done.state == "answered"
                assert c.built is not None
                telemetry = c.built.telemetry

                async def logged() -> bool:
                    return any(e["event"] == "telemetry_spans_dropped" for e in logs)

                await until(logged)
                receiver.release()

                # each of the 40 turns' spans (its delivery and its attempt) is dropped and
                # counted, or sent once — the last turns' spans are read after a batch delay:
                # waited for, not read at the core's exit. How many the wedged requests held
                # depends on how the batches formed (a loaded machine makes fewer, larger
                # ones: a bound on the drops alone read 56 < 60 there)
                async def accounted() -> bool:
                    return telemetry.dropped + telemetry.exported + telemetry.failed >= 40 * 2

                await until(accounted, deadline=60)
    assert telemetry.dropped > 0
    assert telemetry.dropped + telemetry.exported + telemetry.failed == 40 * 2
    # a wedged request the exporter gave up on (its timeout: counted failed) is still read
    # by the collector once released — as a real collector may: failed means unconfirmed
    assert telemetry.exported <= len(receiver.spans) <= telemetry.exported + telemetry.failed
    dropped = [e for e in logs if e["event"] == "telemetry_spans_dropped"]
    assert len(dropped) == 1, "logged once a minute, not once a span"
    assert dropped[0]["dropped"] > 0


def _one_member(tmp_path: Path, telemetry: dict[str, Any]) -> TeamConfig:
    config = team_config(tmp_path, {"name": "lead"})
    return config.model_validate({**config.model_dump(exclude_defaults=True), **telemetry})


async def test_grpc_headers_arrive_as_lower_case_metadata_and_in_no_log(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``headers_env``'s headers are each call's gRPC metadata, keys lower-cased (grpcio
    refuses others); their values are in no log line — teamctl's, the SDK's (stdlib logging,
    its failures too: the receiver stops mid-way) or grpcio's own (the process's stderr).
    ``http://`` is plaintext whatever OTEL_EXPORTER_OTLP_INSECURE says."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "false")
    runtime = FakeRuntime(["answer", "answer"])
    with otlp_grpc_receiver() as receiver, capture_logs() as logs:
        config = _one_member(tmp_path, _telemetry(receiver, timeout=BELOW_RETRY,
                                                  headers_env="OTLP_KEY"))
        environ = {"OTLP_KEY": "X-Api-Key=s3cr3t-value,Tenant=team1"}
        async with core(tmp_path, runtime, environ=environ) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
            await c.teams.send(None, "lead", "hello", wait=True, timeout=10)
            await _wait(receiver, lambda r: len(r.spans) >= 2)
            assert c.built is not None
            telemetry = c.built.telemetry
            receiver.stop()  # the exporter's failures are logged too
            done = await c.teams.send(None, "lead", "again", wait=True, timeout=10)
            assert done.state == "answered"

            async def failed() -> bool:
                return telemetry.failed >= 2

            await until(failed, deadline=30)
    assert receiver.headers, "the calls carried metadata"
    for metadata in receiver.headers:
        assert (metadata["x-api-key"], metadata["tenant"]) == ("s3cr3t-value", "team1")
        assert "X-Api-Key" not in metadata
    [started] = [e for e in logs if e["event"] == "telemetry_exporter_started"]
    assert "X-Api-Key" in started["endpoint"] and "grpc" in started["endpoint"]
    assert any("Failed to export" in r.getMessage() for r in caplog.records), \
        "the SDK's failure lines were captured"
    out, err = capfd.readouterr()
    for text in (str(logs), caplog.text, out, err):
        assert "s3cr3t" not in text


async def test_an_https_grpc_endpoint_is_tls(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``https://`` over gRPC is TLS, checked against the roots the SDK is given
    (OTEL_EXPORTER_OTLP_CERTIFICATE): a receiver serving TLS alone gets the turn's spans."""
    key, cert = self_signed(tmp_path)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(cert))
    runtime = FakeRuntime(["answer"])
    with otlp_grpc_receiver(tls=(key, cert)) as receiver:
        assert receiver.url.startswith("https://")
        config = _one_member(tmp_path, _telemetry(receiver))
        async with core(tmp_path, runtime, environ={}) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
            await c.teams.send(None, "lead", "hello", wait=True, timeout=10)
            await _wait(receiver, lambda r: len(r.spans) >= 2)
    assert {s["name"] for s in receiver.spans} >= {"deliver to lead", "turn lead #1"}


async def test_a_grpc_receiver_that_is_down_never_holds_a_turn_its_spans_failed_or_dropped(
        tmp_path: Path) -> None:
    """Connections refused (the collector down) over gRPC: every turn is answered as without
    telemetry; each span is counted — failed once the exporter's timeout leaves no room for
    a retry, or dropped past the queue — and none is counted as sent."""
    runtime = FakeRuntime(["answer"] * 20)
    with otlp_grpc_receiver() as receiver:
        receiver.stop()
        config = _one_member(tmp_path, _telemetry(receiver, timeout=BELOW_RETRY,
                                                  max_queue=16))
        async with core(tmp_path, runtime, environ={}) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
            for n in range(20):
                done = await c.teams.send(None, "lead", f"turn {n}", wait=True, timeout=10)
                assert done.state == "answered"
            assert c.built is not None
            telemetry = c.built.telemetry

            async def accounted() -> bool:
                return telemetry.dropped + telemetry.failed >= 20 * 2

            await until(accounted, deadline=60)
    assert telemetry.failed > 0 and telemetry.exported == 0
    assert telemetry.dropped + telemetry.failed == 20 * 2
    assert receiver.spans == []


async def test_a_launch_over_grpc_without_its_extra_is_refused_with_the_pip_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extra missing (its package made unimportable): the launch fails with
    ``telemetry_grpc_missing`` naming the pip command — the error the CLI shows, never an
    ImportError; nothing of the team starts."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc", None)
    runtime = FakeRuntime()
    config = _one_member(tmp_path, {"telemetry": {"otlp": {
        "endpoint": "http://127.0.0.1:4317", "protocol": "grpc"}}})
    async with core(tmp_path, runtime, environ={}) as c:
        with pytest.raises(TelemetryExporterMissing) as caught:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
    wire = caught.value.to_wire()
    assert (wire["code"], wire["retryable"], wire["exit_code"]) == (
        "telemetry_grpc_missing", False, 2)
    assert f"{sys.executable} -m pip install 'teamctl[grpc]'" in wire["message"]
    assert runtime.opened == [], "no member started"


@pytest.mark.parametrize("signal", ["trace_exporter", "metric_exporter"])
def test_an_exporter_whose_grpc_import_fails_is_the_typed_error(
        monkeypatch: pytest.MonkeyPatch, signal: str) -> None:
    """Past the launch (the extra broken since): building the exporter raises
    ``TelemetryExporterMissing``, which telemetry logs and goes on — not an ImportError."""
    from orchestrator.daemon.telemetry._export import metric_exporter, span_exporter
    from orchestrator.telemetry_config import TelemetrySection, export_settings

    settings = export_settings(TelemetrySection.model_validate(
        {"otlp": {"endpoint": "http://127.0.0.1:4317", "protocol": "grpc"}}), {})
    monkeypatch.setitem(sys.modules, f"opentelemetry.exporter.otlp.proto.grpc.{signal}", None)
    build = span_exporter if signal == "trace_exporter" else metric_exporter
    with pytest.raises(TelemetryExporterMissing, match=r"pip install 'teamctl\[grpc\]'"):
        build(settings)


async def _pointed(tmp_path: Path, otlp: dict[str, Any], environ: dict[str, str]
                   ) -> dict[str, LaunchSpec]:
    """The launch specs of a Claude (lead), a Codex (rev) and an OpenCode (des) member of a
    team exporting to ``otlp``, the daemon's environment ``environ``."""
    runtimes = {name: FakeRuntime() for name in ("claude", "codex", "opencode")}
    for name, runtime in runtimes.items():
        runtime.name = name  # type: ignore[misc]
    config = team_config(tmp_path, {"name": "lead"},
                         {"name": "rev", "runtime": "codex", "model": "gpt-5.4-mini"},
                         {"name": "des", "runtime": "opencode", "model": "openrouter/x/y"})
    config = config.model_validate({**config.model_dump(exclude_defaults=True),
                                    "telemetry": {"otlp": otlp}})
    async with core(tmp_path, runtimes=runtimes, environ=environ) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        return {p.spec.member: p.spec for r in runtimes.values() for p in r.opened}


async def test_the_members_clis_are_pointed_at_a_grpc_collector_over_grpc(
        tmp_path: Path) -> None:
    """A team exporting over gRPC points its members over gRPC too (issue 51): Claude Code's
    variables say ``grpc`` and the collector's ``host:port``, Codex's ``[otel]`` exporters are
    ``otlp-grpc`` tables at that endpoint (no ``/v1/...`` path: gRPC names its services);
    OpenCode gets nothing."""
    specs = await _pointed(tmp_path, {"endpoint": "http://127.0.0.1:4317",
                                      "protocol": "grpc"}, {})
    lead = specs["lead"].env
    assert lead["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc"
    assert lead["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4317"
    assert not any(k.startswith(("OTEL_EXPORTER_OTLP_TRACES", "OTEL_EXPORTER_OTLP_METRICS"))
                   for k in lead)
    assert lead["OTEL_RESOURCE_ATTRIBUTES"] == (
        "teamctl.team=web,teamctl.member=lead,teamctl.runtime=claude")
    otel = specs["rev"].config["otel"]
    grpc = {"otlp-grpc": {"endpoint": "http://127.0.0.1:4317"}}
    assert (otel["exporter"], otel["metrics_exporter"]) == (grpc, grpc)
    assert "teamctl.member=rev" in specs["rev"].env["OTEL_RESOURCE_ATTRIBUTES"]
    assert not any(k.startswith("OTEL") for k in specs["des"].env)


async def test_where_traces_and_metrics_part_each_cli_signal_follows_its_own(
        tmp_path: Path) -> None:
    """Traces over gRPC, metrics over OTLP/HTTP (the per-signal variables): the CLIs' metrics
    go where teamctl's go, their events (OTLP logs) with the traces — Claude Code through its
    per-signal variables, Codex through one exporter table each."""
    specs = await _pointed(tmp_path, {}, {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317"})
    lead = specs["lead"].env
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in lead and "OTEL_EXPORTER_OTLP_PROTOCOL" not in lead
    assert {k: v for k, v in lead.items() if k.endswith(("_PROTOCOL", "_ENDPOINT"))} == {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317",
        "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://127.0.0.1:4317",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics"}
    otel = specs["rev"].config["otel"]
    assert otel["exporter"] == {"otlp-grpc": {"endpoint": "http://127.0.0.1:4317"}}
    assert otel["metrics_exporter"] == {"otlp-http": {
        "endpoint": "http://127.0.0.1:4318/v1/metrics", "protocol": "binary"}}


def test_an_http_traces_url_of_its_own_path_sends_the_events_to_its_origin() -> None:
    """An OTLP/HTTP traces URL not ending in ``/v1/traces`` (its own variable's) shares no
    base with the others: Claude Code gets each signal's URL, the events its origin's
    ``/v1/logs``."""
    from orchestrator.daemon.telemetry._service import _collector
    from orchestrator.runtime_table import CLAUDE
    from orchestrator.telemetry_config import TelemetrySection, export_settings

    settings = export_settings(TelemetrySection(), {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/ingest/spans"})
    assert CLAUDE.own_telemetry is not None
    env, _ = CLAUDE.own_telemetry(_collector(settings), {"teamctl.team": "t"}, False)
    assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == "http://collector:4318/ingest/spans"
    assert env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] == "http://collector:4318/v1/logs"
    assert env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] == settings.metrics_url, "teamctl's own"


async def test_a_grpc_collector_that_takes_headers_is_never_handed_to_a_member(
        tmp_path: Path) -> None:
    """Over gRPC as over HTTP: headers are secrets, so the members are not pointed (and the
    log says why)."""
    runtime = FakeRuntime()
    config = _one_member(tmp_path, {"telemetry": {"otlp": {
        "endpoint": "http://127.0.0.1:4317", "protocol": "grpc", "headers_env": "OTLP_KEY"}}})
    with capture_logs() as logs:
        async with core(tmp_path, runtime, environ={"OTLP_KEY": "x-api-key=s3cr3t"}) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)
    [process] = runtime.opened
    assert not any(k.startswith(("OTEL", "CLAUDE_CODE_ENABLE")) for k in process.spec.env)
    assert "s3cr3t" not in str(process.spec.env) + str(process.spec.config)
    [line] = [e for e in logs if e["event"] == "telemetry_runtime_not_pointed"]
    assert "headers" in line["reason"]


def test_hostile_or_missing_settings_are_refused_at_launch(tmp_path: Path) -> None:
    from orchestrator.daemon.core import _telemetry_can_start

    config = team_config(tmp_path, {"name": "lead"})
    with_telemetry = config.model_validate({**config.model_dump(exclude_defaults=True),
                                            "telemetry": {}})
    with pytest.raises(TelemetryConfigInvalid, match="no endpoint"):
        _telemetry_can_start({}, with_telemetry)
    _telemetry_can_start({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
                         with_telemetry)
    _telemetry_can_start({}, config)  # no [telemetry]: nothing to check


async def test_the_members_clis_are_pointed_at_the_collector_with_their_names_and_no_secret(
        tmp_path: Path) -> None:
    """Claude Code gets its telemetry variables, Codex its ``[otel]`` tables, each with the
    resource attributes naming team and member; OpenCode (no OTel export) nothing; prompts
    only with content; a member's own setting wins; headers (secrets) never."""
    runtimes = {name: FakeRuntime() for name in ("claude", "codex", "opencode")}
    for name, runtime in runtimes.items():
        runtime.name = name  # type: ignore[misc]
    telemetry = {"telemetry": {"otlp": {"endpoint": "http://127.0.0.1:4318"}}}
    config = team_config(tmp_path, {"name": "lead"},
                         {"name": "rev", "runtime": "codex", "model": "gpt-5.4-mini"},
                         {"name": "des", "runtime": "opencode", "model": "openrouter/x/y"},
                         {"name": "own", "env": {"OTEL_METRICS_EXPORTER": "none"}})
    config = config.model_validate({**config.model_dump(exclude_defaults=True), **telemetry})
    async with core(tmp_path, runtimes=runtimes, environ={}) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        specs = {p.spec.member: p.spec for r in runtimes.values() for p in r.opened}
    lead = specs["lead"].env
    assert lead["CLAUDE_CODE_ENABLE_TELEMETRY"] == "1"
    assert lead["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4318"
    assert lead["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert lead["OTEL_RESOURCE_ATTRIBUTES"] == (
        "teamctl.team=web,teamctl.member=lead,teamctl.runtime=claude")
    assert "OTEL_LOG_USER_PROMPTS" not in lead and "OTEL_EXPORTER_OTLP_HEADERS" not in lead
    assert specs["own"].env["OTEL_METRICS_EXPORTER"] == "none", "the member's own env wins"
    otel = specs["rev"].config["otel"]
    assert otel["exporter"] == {"otlp-http": {"endpoint": "http://127.0.0.1:4318/v1/logs",
                                              "protocol": "binary"}}
    assert otel["log_user_prompt"] is False
    assert "teamctl.member=rev" in specs["rev"].env["OTEL_RESOURCE_ATTRIBUTES"]
    assert not any(k.startswith("OTEL") for k in specs["des"].env)
    assert "otel" not in specs["des"].config


async def test_a_collector_that_takes_headers_is_never_handed_to_a_member(
        tmp_path: Path) -> None:
    telemetry = {"telemetry": {"otlp": {"endpoint": "http://127.0.0.1:4318",
                                        "headers_env": "OTLP_KEY"}}}
    config = team_config(tmp_path, {"name": "lead"})
    config = config.model_validate({**config.model_dump(exclude_defaults=True), **telemetry})
    runtime = FakeRuntime()
    async with core(tmp_path, runtime, environ={"OTLP_KEY": "x-api-key=s3cr3t"}) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
    [process] = runtime.opened
    assert not any(k.startswith(("OTEL", "CLAUDE_CODE_ENABLE")) for k in process.spec.env)
    assert "s3cr3t" not in str(process.spec.env) + str(process.spec.config)
