"""A trace from the journal's rows (pure): who asked whom, each delivery, each attempt at its
turn, what each used, the approvals it waited on (docs/telemetry.md, "The trace").

- a **delivery** (a message to one member) is a span from the message's journaling — from
  planning its attachments, for one that carries some — to its last attempt's end; its
  children are the **planning** of its attachments (``plan attachments``: from when it began
  to the journaling) and its **attempts** (claimed → ended), numbered 1, 2, … — a
  re-delivery is a second attempt span, never a second trace;
- a teammate's message is a child of the **sender's attempt** it was sent from (the journal
  keeps which: ``messages.origin_attempt``), a routed reply a child of the replier's last
  attempt, so a chain across runtimes is one tree;
- an **approval** the turn waited on is a child of the attempt that asked it, and so is each
  **tool call** the runtime reported in it (one still open when its attempt ended is
  ``unfinished``, ended with it), and the **gate** of the task it completed; that task's
  **integration check** (the merge queue's, later) is a child of the same attempt;
- tokens and cost are the ledger's rows of that delivery settled during the attempt.

Ids are derived from the journal's (``orchestrator.ids``): read twice, the same ids.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from orchestrator.ids import span_id, trace_id
from orchestrator.protocol.common import OPERATOR, TEAMCTL
from orchestrator.protocol.traces import SpanDoc, SpanKind, SpanTokens, TraceDoc

if TYPE_CHECKING:
    from orchestrator.daemon.telemetry._journal import Row, TraceRows

__all__ = ["attempt_span_id", "build_trace", "delivery_span_id", "tool_span_id"]

_TEXT_CHARS = 80
_KIND_ORDER = {"delivery": 0, "plan": 1, "attempt": 2, "approval": 3, "tool": 4, "gate": 5,
               "check": 6}
_CHECK_NAMES = {"gate": "gate", "integration": "integration check"}


def delivery_span_id(message_id: str, member: str) -> str:
    return span_id("delivery", message_id, member)


def attempt_span_id(message_id: str, member: str, ordinal: int) -> str:
    return span_id("attempt", message_id, member, ordinal)


def tool_span_id(message_id: str, member: str, call_id: str) -> str:
    return span_id("tool", message_id, member, call_id)


def build_trace(rows: TraceRows, *, rooted: bool = True) -> TraceDoc:
    """The trace of one conversation's rows: its spans in start order, parents first.
    ``rooted``: a span whose parent is not among them becomes a root (a whole chain's rows);
    else it keeps its parent's id (one message's rows, exported beside its parents')."""
    attempts: defaultdict[tuple[str, str], list[Row]] = defaultdict(list)
    for a in rows.attempts:
        attempts[(a["message_id"], a["member"])].append(a)
    usage: defaultdict[tuple[str, str], list[Row]] = defaultdict(list)
    for u in rows.usage:
        usage[(u["message_id"], u["member"])].append(u)
    messages = {m["id"]: m for m in rows.messages}
    spans: list[SpanDoc] = []
    for d in rows.deliveries:
        message = messages[d["message_id"]]
        tried = attempts[(d["message_id"], d["member"])]
        spans.append(_delivery(message, d, tried, _parent(message, attempts)))
        spans += _planning(message, d)
        spans += _attempts(message, tried, usage[(d["message_id"], d["member"])])
    spans += _approvals(rows.approvals, messages, attempts)
    spans += _tools(rows.tools, messages, attempts)
    spans += _checks(rows.checks, messages, attempts)
    known = {s.span_id for s in spans}
    spans = [s if s.parent_id in known or s.parent_id is None or not rooted
             else s.model_copy(update={"parent_id": None}) for s in spans]
    spans.sort(key=lambda s: (s.start, _KIND_ORDER[s.kind]))
    return TraceDoc(trace_id=trace_id(rows.chain_id), chain_id=rows.chain_id, spans=spans,
                    cost_usd=round(sum(s.cost_usd or 0.0 for s in spans), 6),
                    tokens=_sum_tokens([s.tokens for s in spans if s.tokens is not None]))


def _parent(message: Row, attempts: dict[tuple[str, str], list[Row]]) -> str | None:
    """The span a delivery of ``message`` is a child of: the sender's attempt it was sent
    from, the replier's last attempt for a routed reply; None: it starts the trace."""
    sender = message["sender"]
    if sender is None:
        return None
    if message["origin_delivery"] is not None:
        ordinal = message["origin_attempt"]
        if ordinal is None:
            return delivery_span_id(message["origin_delivery"], sender)
        return attempt_span_id(message["origin_delivery"], sender, ordinal)
    if message["kind"] == "reply" and message["reply_to"] is not None:
        tried = attempts.get((message["reply_to"], sender), [])
        if tried:
            return attempt_span_id(message["reply_to"], sender, tried[-1]["ordinal"])
        return delivery_span_id(message["reply_to"], sender)
    return None


def _sender(message: Row) -> str:
    if message["sender"] is not None:
        return str(message["sender"])
    return TEAMCTL if message["task_id"] is not None else OPERATOR


def _delivery(message: Row, d: Row, tried: list[Row], parent: str | None) -> SpanDoc:
    last = tried[-1] if tried else {}
    terminal = d["state"] in ("answered", "failed", "blocked")
    end = (last.get("ended_at") or d["updated_at"]) if terminal else None
    text = (message["text"] or "").split("\n", 1)[0][:_TEXT_CHARS]
    return SpanDoc(
        span_id=delivery_span_id(d["message_id"], d["member"]), parent_id=parent,
        kind="delivery", name=f"deliver to {d['member']}", team=message["team"],
        member=d["member"], sender=_sender(message), message_id=d["message_id"],
        runtime=last.get("runtime"), model=last.get("model"), start=_began(message),
        end=end, duration_ms=_ms(_began(message), end), outcome=d["state"],
        error_code=d["error_code"], task_id=message["task_id"], text=text)


def _began(message: Row) -> float:
    """When sending the message began: planning its attachments, else its journaling."""
    return float(message.get("planned_at") or message["created_at"])


def _planning(message: Row, d: Row) -> list[SpanDoc]:
    """Planning the message's attachments for ``d``'s member (none: no span)."""
    began = message.get("planned_at")
    if began is None:
        return []
    return [SpanDoc(
        span_id=span_id("plan", d["message_id"], d["member"]),
        parent_id=delivery_span_id(d["message_id"], d["member"]), kind="plan",
        name="plan attachments", team=message["team"], member=d["member"],
        sender=_sender(message), message_id=d["message_id"], start=began,
        end=message["created_at"], duration_ms=_ms(began, message["created_at"]),
        outcome="planned", task_id=message["task_id"])]


def _attempts(message: Row, tried: list[Row], used: list[Row]) -> list[SpanDoc]:
    spans = []
    for i, a in enumerate(tried):
        until = tried[i + 1]["claimed_at"] if i + 1 < len(tried) else None
        mine = [u for u in used if u["at"] >= a["claimed_at"] and (until is None
                                                                   or u["at"] < until)]
        model = next((u["model"] for u in reversed(mine) if u["model"]), a["model"])
        spans.append(SpanDoc(
            span_id=attempt_span_id(a["message_id"], a["member"], a["ordinal"]),
            parent_id=delivery_span_id(a["message_id"], a["member"]), kind="attempt",
            name=f"turn {a['member']} #{a['ordinal']}", team=a["team"], member=a["member"],
            sender=_sender(message), message_id=a["message_id"], attempt=a["ordinal"],
            epoch=a["epoch"], runtime=a["runtime"], model=model, start=a["claimed_at"],
            end=a["ended_at"], duration_ms=_ms(a["claimed_at"], a["ended_at"]),
            outcome=a["outcome"] or ("sent" if a["sent_at"] is not None else "prepared"),
            error_code=a["error_code"], sent_at=a["sent_at"],
            tokens=_sum_tokens([_tokens(u) for u in mine]) if mine else None,
            cost_usd=_cost(mine), task_id=message["task_id"]))
    return spans


def _approvals(approvals: list[Row], messages: dict[str, Row],
               attempts: dict[tuple[str, str], list[Row]]) -> list[SpanDoc]:
    spans = []
    for p in approvals:
        message = messages.get(p["message_id"])
        tried = [a for a in attempts.get((p["message_id"], p["member"]), [])
                 if a["claimed_at"] <= p["asked_at"]]
        if message is None or not tried:
            continue
        a = tried[-1]
        spans.append(SpanDoc(
            span_id=span_id("approval", p["id"]),
            parent_id=attempt_span_id(a["message_id"], a["member"], a["ordinal"]),
            kind="approval", name=f"approval {p['tool']}", team=message["team"],
            member=p["member"], sender=_sender(message), message_id=p["message_id"],
            attempt=a["ordinal"], epoch=a["epoch"], runtime=a["runtime"], model=a["model"],
            start=p["asked_at"], end=p["settled_at"],
            duration_ms=_ms(p["asked_at"], p["settled_at"]), outcome=p["state"],
            task_id=message["task_id"]))
    return spans


def _attempt_of(row: Row, messages: dict[str, Row], attempts: dict[tuple[str, str], list[Row]]
                ) -> tuple[Row, Row] | None:
    """The message and the attempt a tool call's or a check's row names (its ``message_id``,
    ``member``, ``ordinal``); None: not among the rows read."""
    message = messages.get(row["message_id"])
    a = next((a for a in attempts.get((row["message_id"], row["member"]), [])
              if a["ordinal"] == row["ordinal"]), None)
    return None if message is None or a is None else (message, a)


def _child(message: Row, a: Row, *, span: str, kind: SpanKind, name: str, start: float,
           end: float | None, outcome: str, task_id: int | None) -> SpanDoc:
    """A span under attempt ``a`` (a tool call, a check): who and on what, from it."""
    return SpanDoc(
        span_id=span, parent_id=attempt_span_id(a["message_id"], a["member"], a["ordinal"]),
        kind=kind, name=name, team=message["team"], member=a["member"],
        sender=_sender(message), message_id=a["message_id"], attempt=a["ordinal"],
        epoch=a["epoch"], runtime=a["runtime"], model=a["model"], start=start, end=end,
        duration_ms=_ms(start, end), outcome=outcome, task_id=task_id)


def _tools(tools: list[Row], messages: dict[str, Row],
           attempts: dict[tuple[str, str], list[Row]]) -> list[SpanDoc]:
    spans = []
    for t in tools:
        found = _attempt_of(t, messages, attempts)
        if found is None:
            continue
        message, a = found
        end, outcome = t["ended_at"], t["status"]
        if end is None and a["ended_at"] is not None:  # still open when its turn ended
            end, outcome = max(a["ended_at"], t["started_at"]), "unfinished"
        spans.append(_child(message, a, span=tool_span_id(t["message_id"], t["member"],
                                                          t["call_id"]),
                            kind="tool", name=f"tool {t['name']}", start=t["started_at"],
                            end=end, outcome=outcome, task_id=message["task_id"]))
    return spans


def _checks(checks: list[Row], messages: dict[str, Row],
            attempts: dict[tuple[str, str], list[Row]]) -> list[SpanDoc]:
    spans = []
    for k in checks:
        found = _attempt_of(k, messages, attempts)
        if found is not None:
            spans.append(_child(
                *found, span=span_id("check", k["id"]),
                kind="gate" if k["kind"] == "gate" else "check",
                name=f"{_CHECK_NAMES.get(k['kind'], k['kind'])} T{k['task_id']}",
                start=k["started_at"], end=k["ended_at"], outcome=k["outcome"],
                task_id=k["task_id"]))
    return spans


def _tokens(u: Row) -> SpanTokens:
    return SpanTokens(input=u["input_tokens"], cached_input=u["cached_input_tokens"],
                      output=u["output_tokens"], reasoning_output=u["reasoning_output_tokens"])


def _sum_tokens(parts: list[SpanTokens]) -> SpanTokens:
    return SpanTokens(input=sum(t.input for t in parts),
                      cached_input=sum(t.cached_input for t in parts),
                      output=sum(t.output for t in parts),
                      reasoning_output=sum(t.reasoning_output for t in parts))


def _cost(used: list[Row]) -> float | None:
    known: list[Any] = [u["cost_usd"] for u in used if u["cost_usd"] is not None]
    return round(sum(known), 6) if known else None


def _ms(start: float, end: float | None) -> float | None:
    return None if end is None else round((end - start) * 1000.0, 3)
