"""The trace of a piece of work, from the journal alone (daemon/telemetry/): a lead → reviewer
→ designer chain over three runtimes is one trace whose spans name who asked whom, on which
runtime, each attempt's outcome and what it cost; a re-delivered turn is a second attempt span
of the same trace; the ids are the same every time the journal is read."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.contracts import TurnResult
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from orchestrator.daemon.telemetry import CheckRan, TraceApi, TraceJournal, attempt_span_id
from orchestrator.errors import NotFound, RuntimeExited
from orchestrator.ids import span_id, trace_id
from orchestrator.protocol.traces import TraceDoc, TraceParams
from tests.support.chains import Chain, chain_team, quiet
from tests.support.fakes import FakeRuntime, core, team_config

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.contracts import Turn
    from orchestrator.protocol.traces import SpanDoc
    from tests.support.fakes import Core, FakeProcess

pytestmark = pytest.mark.anyio

async def _trace(c: Core, message_id: str) -> TraceDoc:
    handler = TraceApi(TraceJournal(c.store)).handlers()["trace"]
    doc = await handler(TraceParams(id=message_id))
    assert isinstance(doc, TraceDoc)
    return doc


def _by(doc: TraceDoc, kind: str, member: str, sender: str | None = None) -> list[SpanDoc]:
    return [s for s in doc.spans if s.kind == kind and s.member == member
            and (sender is None or s.sender == sender)]


async def test_a_chain_over_three_runtimes_is_one_trace_with_the_senders_turns_as_parents(
        tmp_path: Path) -> None:
    chain = Chain()
    config = chain_team(tmp_path)
    async with core(tmp_path, runtimes=chain.runtimes()) as c:
        chain.c = c
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        sent = await c.teams.send(None, "lead", "plan the login page", wait=True, timeout=10)
        await quiet(c)
        doc = await _trace(c, sent.id)
        [asked_reviewer] = _by(doc, "delivery", "reviewer", "lead")
        again = await _trace(c, asked_reviewer.message_id)

    assert doc == again, "any message of the trace gives the same trace, the same ids"
    assert doc.trace_id == trace_id(sent.id) and doc.chain_id == sent.id
    [root] = [s for s in doc.spans if s.parent_id is None]
    assert (root.kind, root.sender, root.member, root.message_id) == (
        "delivery", "operator", "lead", sent.id)
    [lead_turn] = [s for s in _by(doc, "attempt", "lead")
                   if s.message_id == sent.id]
    assert lead_turn.parent_id == root.span_id
    assert asked_reviewer.parent_id == lead_turn.span_id, "the reviewer was asked from " \
        "the lead's turn"
    [reviewer_turn] = [s for s in _by(doc, "attempt", "reviewer")
                       if s.message_id == asked_reviewer.message_id]
    [asked_designer] = _by(doc, "delivery", "designer", "reviewer")
    assert asked_designer.parent_id == reviewer_turn.span_id
    [designer_turn] = _by(doc, "attempt", "designer")
    assert designer_turn.parent_id == asked_designer.span_id
    assert [(t.runtime, t.model, t.outcome, t.attempt, t.epoch) for t in
            (lead_turn, reviewer_turn, designer_turn)] == [
        ("claude", "claude-sonnet-4-5", "answered", 1, 1),
        ("codex", "gpt-5.4-mini", "answered", 1, 1),
        ("opencode", "openrouter/moonshotai/kimi-k2.6", "answered", 1, 1)]
    assert designer_turn.tokens is not None and designer_turn.tokens.input == 300
    assert designer_turn.cost_usd == pytest.approx(0.03)
    for span in doc.spans:
        if span.kind == "attempt":
            assert span.end is not None and span.sent_at is not None
            assert span.start <= span.sent_at <= span.end
    # the replies routed back are children of the replier's turn, in the same trace
    replies = [s for s in doc.spans if s.kind == "delivery" and s.text
               and s.text.startswith("reply from")]
    assert {(s.sender, s.member) for s in replies} == {("reviewer", "lead"),
                                                        ("designer", "reviewer")}
    spent = [s.cost_usd or 0.0 for s in doc.spans if s.kind == "attempt"]
    assert doc.cost_usd == pytest.approx(sum(spent))
    assert doc.cost_usd >= 0.01 + 0.02 + 0.03 - 1e-9
    ids = [s.span_id for s in doc.spans]
    assert len(ids) == len(set(ids))
    assert all(s.parent_id in set(ids) for s in doc.spans if s.parent_id is not None)


async def test_planning_a_messages_attachments_is_a_span_under_its_delivery(
        tmp_path: Path) -> None:
    """A message with an attachment: its delivery begins when planning began, and the planning
    (``plan attachments``) is its child, ending when the message was journaled; a message
    without attachments has no planning span."""
    notes = tmp_path / "notes.txt"
    notes.write_text("the login form 500s on submit\n")
    config = team_config(tmp_path, {"name": "lead"})
    async with core(tmp_path, FakeRuntime(["seen", "plain"])) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        with_image = await c.teams.send(None, "lead", "look", wait=True, timeout=10,
                                        attachments=[str(notes)])
        plain = await c.teams.send(None, "lead", "no image", wait=True, timeout=10)
        doc = await _trace(c, with_image.id)
        bare = await _trace(c, plain.id)
    [delivery] = _by(doc, "delivery", "lead")
    [plan] = _by(doc, "plan", "lead")
    [turn] = _by(doc, "attempt", "lead")
    assert plan.parent_id == delivery.span_id and plan.name == "plan attachments"
    assert delivery.start == plan.start <= plan.end <= turn.start  # type: ignore[operator]
    assert plan.duration_ms is not None and plan.duration_ms >= 0
    assert [s.kind for s in bare.spans] == ["delivery", "attempt"]


async def test_a_redelivered_turn_is_a_second_attempt_span_of_the_same_trace(
        tmp_path: Path) -> None:
    runtime = FakeRuntime([RuntimeExited("lead", 1, []), "answer"])
    config = team_config(tmp_path, {"name": "lead"})
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        sent = await c.teams.send(None, "lead", "hello", wait=True, timeout=20)
        assert sent.state == "answered"
        doc = await _trace(c, sent.id)
    [delivery] = _by(doc, "delivery", "lead")
    attempts = _by(doc, "attempt", "lead")
    assert [(a.attempt, a.outcome, a.error_code) for a in attempts] == [
        (1, "requeued", "runtime_exited"), (2, "answered", None)]
    assert {a.parent_id for a in attempts} == {delivery.span_id}
    assert attempts[1].span_id == attempt_span_id(sent.id, "lead", 2)
    assert attempts[1].span_id != attempts[0].span_id
    assert delivery.outcome == "answered" and delivery.end == attempts[1].end
    # each attempt's turn carried its own span's context (a runtime that takes one per
    # request continues teamctl's trace there: Codex's exec, docs/telemetry.md)
    assert [t.traceparent for t in runtime.turns] == [
        f"00-{doc.trace_id}-{a.span_id}-01" for a in attempts]


async def test_an_unknown_message_is_not_found(tmp_path: Path) -> None:
    async with core(tmp_path) as c:
        with pytest.raises(NotFound):
            await _trace(c, "01JDQ3X2K3R9W0FQ6Z5N4M8P7D")


def test_ids_are_w3c_shaped_and_derived() -> None:
    assert len(trace_id("x")) == 32 and int(trace_id("x"), 16) != 0
    assert len(span_id("delivery", "m", "a")) == 16
    assert trace_id("x") == trace_id("x") != trace_id("y")
    assert span_id("attempt", "m", "a", 1) != span_id("attempt", "m", "a", 2)


async def test_an_approval_the_turn_waited_on_is_a_child_span_of_that_attempt(
        tmp_path: Path) -> None:
    from orchestrator.contracts import ApprovalRequest
    from tests.support.fakes import asking_step

    outcomes: list[object] = []
    runtime = FakeRuntime([asking_step(ApprovalRequest("permission", "Bash", "rm -rf build"),
                                       outcomes)])
    config = team_config(tmp_path, {"name": "lead", "permissions": "ask"})
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        async with anyio.create_task_group() as tg:
            sent: list[str] = []

            async def send() -> None:
                sent.append((await c.teams.send(None, "lead", "clean up", wait=True,
                                                timeout=30)).id)
            tg.start_soon(send)
            with anyio.fail_after(10):
                pending = (await c.approvals.query(wait=5.0)).approvals
            await c.approvals.decide(pending[0].id, "approve")
        doc = await _trace(c, sent[0])
    [attempt] = _by(doc, "attempt", "lead")
    [approval] = _by(doc, "approval", "lead")
    assert approval.parent_id == attempt.span_id
    assert (approval.name, approval.outcome) == ("approval Bash", "approved")
    assert attempt.start <= approval.start <= (approval.end or 0) <= (attempt.end or 0)


async def test_the_operators_gate_of_a_task_is_a_child_of_the_owners_last_turn_at_it(
        tmp_path: Path) -> None:
    """``teamctl task complete`` by the operator runs the gate in no turn: its span goes under
    the last attempt at a message about the task (here the hand-over of a self-claimed task),
    in that trace; before, it was in none."""
    runtime = FakeRuntime(["on it"])
    config = team_config(tmp_path, {"name": "lead", "claims": True})
    async with core(tmp_path, runtime) as c:
        assert c.built is not None
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        task = await c.built.board.create("web", "the login page", created_by=OPERATOR)
        await quiet(c)
        [handed] = [t.message_id for t in runtime.turns]  # the task handed to the idle lead
        await c.built.board.complete(task.id, by=OPERATOR, summary="done by hand")
        api = TraceApi(TraceJournal(c.store), recorded=c.built.telemetry.write_recorded)
        doc = await api.handlers()["trace"](TraceParams(id=handed))
    [turn] = _by(doc, "attempt", "lead")
    [gate] = _by(doc, "gate", "lead")
    assert (gate.parent_id, gate.name, gate.outcome, gate.task_id) == (
        turn.span_id, f"gate T{task.id}", "passed", task.id)
    assert gate.start >= turn.end  # type: ignore[operator]


async def test_a_tasks_gate_and_integration_check_are_children_of_the_turn_that_completed_it(
        tmp_path: Path) -> None:
    """The board's gate runs inside the owner's turn (its ``task_complete``): a child span of
    that attempt with its outcome and duration; the merge queue's integration check runs
    later, and is a child of the same attempt (the task's last gate's)."""
    turns: list[str] = []
    holder: list[Core] = []
    tasks: list[int] = []

    async def completing(process: FakeProcess, turn: Turn) -> TurnResult:
        turns.append(turn.message_id)
        board = holder[0].built.board if holder[0].built else None
        assert board is not None
        await board.complete(tasks[0], by=Actor("lead"), summary="did it")
        return TurnResult(reply="done")

    config = team_config(tmp_path, {"name": "lead"})
    async with core(tmp_path, FakeRuntime([completing])) as c:
        holder.append(c)
        assert c.built is not None
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        task = await c.built.board.create("web", "the login page", created_by=OPERATOR,
                                          assignee=Assignee("lead", c.supervisor.member(
                                              "web", "lead").epoch))
        tasks.append(task.id)
        await c.teams.send(None, "lead", "finish the login page", wait=True, timeout=10)
        await quiet(c)
        message_id = turns[0]
        c.built.telemetry.checked(CheckRan("web", task.id, "integration", 1000.0, 1002.5,
                                           "failed"))
        c.built.telemetry.checked(CheckRan("web", 999, "integration", 1.0, 2.0, "passed"))
        api = TraceApi(TraceJournal(c.store), recorded=c.built.telemetry.write_recorded)
        doc = await api.handlers()["trace"](TraceParams(id=message_id))
    [turn] = _by(doc, "attempt", "lead")
    [gate] = _by(doc, "gate", "lead")
    [check] = _by(doc, "check", "lead")
    assert gate.parent_id == check.parent_id == turn.span_id
    assert (gate.name, gate.outcome, gate.task_id) == (f"gate T{task.id}", "passed", task.id)
    assert turn.start <= gate.start <= gate.end <= turn.end  # type: ignore[operator]
    assert (check.name, check.outcome, check.duration_ms) == (
        f"integration check T{task.id}", "failed", 2500.0)
    assert len(doc.spans) == 4, "a check of a task no turn completed is in no trace"
