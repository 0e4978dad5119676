"""A message's trace as a waterfall (the live view's ``trace`` panel; docs/telemetry.md): one
row per span — delivery, attempt, approval, tool call, gate, check — indented under its
parent, with a bar from its start to its end on the trace's own time axis.

The bars are SVG rectangles placed by their ``x`` and ``width`` attributes: the page's
Content-Security-Policy allows no inline style, and an SVG attribute is not one. Every value a
member or message wrote is shown visibly (orchestrator/visible.py) and HTML-escaped here."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from orchestrator.visible import clipped, visible

if TYPE_CHECKING:
    from orchestrator.protocol.traces import SpanDoc, TraceDoc

__all__ = ["trace_panel"]

_WIDTH = 1000  # the bars' viewBox width: the trace's whole duration
_MIN_BAR = 2  # the narrowest bar drawn, in viewBox units (a span of no visible length)
_DEPTHS = 8  # indent classes depth-0 … depth-8 (app.css)


def _e(value: object) -> str:
    return escape(visible("" if value is None else str(value)), quote=True)


def trace_panel(doc: TraceDoc | None) -> str:
    """The trace panel: pick a message (its "trace" link) until one is shown."""
    if doc is None or not doc.spans:
        return "<h2>Trace</h2><p>pick a message's trace in the conversation</p>"
    start = min(s.start for s in doc.spans)
    end = max(s.end or s.start for s in doc.spans)
    scale = _WIDTH / max(end - start, 1e-3)
    depth: dict[str | None, int] = {None: -1}
    rows = []
    for span in doc.spans:
        level = depth[span.span_id] = depth.get(span.parent_id, -1) + 1
        rows.append(_row(span, level, start, scale))
    tokens = doc.tokens.input + doc.tokens.output
    return (f'<h2>Trace <code>{_e(doc.trace_id)}</code></h2>'
            f'<p class="trace-sum">{len(doc.spans)} spans · {end - start:.1f} s · '
            f'{tokens} tokens · ${doc.cost_usd:.4f}</p>'
            f'<ol class="waterfall" data-key="trace:{_e(doc.trace_id)}">{"".join(rows)}</ol>')


def _row(span: SpanDoc, level: int, start: float, scale: float) -> str:
    x = (span.start - start) * scale
    width = max(((span.end or span.start) - span.start) * scale, _MIN_BAR)
    took = "…" if span.duration_ms is None else f"{span.duration_ms / 1000:.1f} s"
    runs = "/".join(p for p in (span.runtime, span.model) if p)
    label = {"delivery": f"{span.sender} → {span.member}",
             "attempt": f"{span.name} {runs}",
             "approval": span.name, "tool": span.name, "gate": span.name,
             "check": span.name, "plan": span.name}[span.kind]
    text = f' “{clipped(span.text, 60)}”' if span.kind == "delivery" and span.text else ""
    outcome = span.outcome or ""
    return (f'<li class="span {_e(span.kind)} depth-{min(level, _DEPTHS)}" '
            f'data-key="s-{_e(span.span_id)}" data-outcome="{_e(outcome)}">'
            f'<span class="label">{_e(label)}{_e(text)} <span class="state">{_e(outcome)}'
            f'</span> {_e(took)}</span>'
            f'<svg class="bar" viewBox="0 0 {_WIDTH} 10" preserveAspectRatio="none" '
            f'aria-hidden="true"><rect class="{_e(span.kind)}" x="{x:.1f}" y="0" '
            f'width="{width:.1f}" height="10"></rect></svg></li>')
