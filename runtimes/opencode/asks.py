"""OpenCode's questions to the operator (protocols/opencode.md, teammates.md §3.5): the events
``permission.asked`` and ``question.asked`` of the member's session, each answered — by the
operator under the ``ask`` profile (``OperatorBridge``), else refused at once, since an
unanswered ask hangs the session forever — and the ``*.replied`` events that confirm it."""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

import httpx
import structlog

from orchestrator.contracts import ApprovalRequest

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from orchestrator.contracts import LaunchSpec
    from runtimes.kit import OperatorBridge

__all__ = ["ASK_EVENTS", "OpenCodeAsks"]

log = structlog.get_logger("teamctl.runtime.opencode")

ASK_EVENTS = frozenset({"permission.asked", "permission.replied", "question.asked",
                        "question.replied", "question.rejected"})


class OpenCodeAsks:
    """Answers the session's asks over the server's HTTP API (never blocking the event
    reader: each answer runs in ``tg``)."""

    def __init__(self, spec: LaunchSpec, http: httpx.AsyncClient, bridge: OperatorBridge,
                 tg: TaskGroup) -> None:
        self._spec, self._http, self._bridge, self._tg = spec, http, bridge, tg

    def on_event(self, kind: str, props: dict[str, Any]) -> None:
        """``permission.asked``: the ``ask`` profile's operator answers it; any other profile
        rejects it at once (an unanswered ask hangs the session forever, teammates.md §3.5).
        ``permission.replied`` confirms an answer was applied."""
        request_id = str(props.get("id") or props.get("requestID") or "")
        if kind in ("permission.replied", "question.replied", "question.rejected"):
            self._tg.start_soon(self._bridge.confirm, request_id)
            return
        if request_id:
            answer = self._question if kind == "question.asked" else \
                self._permission
            self._tg.start_soon(answer, request_id, props)

    async def _question(self, request_id: str, props: dict[str, Any]) -> None:
        """``question.asked`` (the model's ``question`` tool): the operator's text answers
        every question (``POST /question/{id}/reply``); a denial rejects it."""
        questions = tuple(str(q.get("question") or "") for q in props.get("questions") or []
                          if isinstance(q, dict))
        if not self._bridge.asks:
            with suppress(httpx.HTTPError):
                await self._http.post(f"/question/{request_id}/reject")
            return
        answer = await self._bridge.ask(ApprovalRequest(
            "question", "question", " | ".join(questions), questions, props))
        self._bridge.answered(request_id, answer)
        with suppress(httpx.HTTPError):
            if answer.decision == "answer":
                await self._http.post(f"/question/{request_id}/reply", json={
                    "answers": [[answer.text or ""] for _ in questions or ("",)]})
            else:
                await self._http.post(f"/question/{request_id}/reject")

    async def _permission(self, request_id: str, props: dict[str, Any]) -> None:
        if not self._bridge.asks:
            log.warning("permission_denied", team=self._spec.team, member=self._spec.member,
                        tool=props.get("permission"), message="asked outside the ask profile")
            body: dict[str, Any] = {"reply": "reject", "message": "teamctl: this member's "
                                    f"permissions ({self._spec.permissions}) do not allow it"}
        else:
            metadata = props.get("metadata") if isinstance(props.get("metadata"), dict) else {}
            assert isinstance(metadata, dict)
            patterns = [str(p) for p in props.get("patterns") or []]
            summary = str(metadata.get("command") or metadata.get("filepath") or
                          " ".join(patterns) or props.get("permission"))
            answer = await self._bridge.ask(ApprovalRequest(
                "permission", str(props.get("permission") or "?"), summary, asked=props))
            reply = "reject" if answer.decision == "deny" else (
                "always" if answer.always else "once")
            body = {"reply": reply, **({"message": answer.message} if answer.message else {})}
            self._bridge.answered(request_id, answer)
        with suppress(httpx.HTTPError):
            await self._http.post(f"/permission/{request_id}/reply", json=body)
