"""Codex over one long-lived ``codex app-server`` per member (protocols/codex.md §8): the
default transport of a Codex member (``transport = "exec"`` keeps one process per turn).

The native binary of an npm install is run directly (``native_binary``), not its node wrapper.
JSON-RPC 2.0 lines on the server's stdio (no ``jsonrpc`` field needed): ``initialize`` then
``initialized`` (readiness), then the member's thread — ``thread/resume`` by the recorded id
(unknown: SessionLost, and a new one), else ``thread/start`` — with the workdir, model, sandbox
of the member's permission profile, approval ``never`` and its role as developer instructions.
A turn is ``turn/start`` with the text and the planned variants as ``localImage`` paths, in
order; it ends at ``turn/completed`` (completed → answered with the last agent message; failed →
the API's message, retryable for 408/429/5xx; interrupted → stuck). An ``error`` with
``willRetry: false`` and no ``turn/completed`` within the idle timeout (at most 30 s) fails the
turn. A silent turn gets ``turn/interrupt`` before the process is killed; every line the server
writes (deltas, status, usage) counts as activity.

The server's own requests are always answered, so no turn waits on a question nobody reads:
approval requests go to the operator with the ``ask`` profile (sandbox read-only, approval
``on-request``; confirmed by ``serverRequest/resolved``), and are declined and noted in the
message's history with the others; any other request gets a JSON-RPC error.
``thread/tokenUsage/updated`` gives the turn's usage (``last``); ``account/rateLimits/updated``
is logged when it changes.

The same CODEX_HOME and config.toml as ``exec`` (the member's MCP server included), so a thread
moves between the two transports. The fields relied on here are checked against the pinned
version's own schema (``runtimes.codex.schema``).
"""

from __future__ import annotations

import os
import platform
import time
from contextlib import AbstractAsyncContextManager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, assert_never

import anyio
import structlog

from orchestrator.contracts import (
    ApprovalAnswer,
    ApprovalRequest,
    BudgetReached,
    DocumentPart,
    ImagePart,
    LaunchSpec,
    ProtocolError,
    RateLimited,
    RuntimeExited,
    RuntimeStuck,
    SessionLost,
    TextPart,
    TokenUsage,
    Turn,
    TurnFailed,
    TurnResult,
    UsageReading,
    WindowReading,
)
from runtimes.codex._shared import (
    APPROVAL_POLICY,
    api_status,
    build_env,
    check_login,
    codex_member_home,
    report_item,
    sandbox_mode,
    sandbox_refusal,
)
from runtimes.codex.legend import legend
from runtimes.kit import (
    OperatorBridge,
    UsageStop,
    retryable_status,
    rpc_start_failures,
    spawn_member,
    starting,
)
from runtimes.kit.base import (
    OnSent,
    Spawner,
    on_host,
    owned_process,
    token_count,
)
from runtimes.kit.documents import CODEX_WHY, refused
from runtimes.kit.stdio import JsonRpcProcess

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import Process, TaskGroup

__all__ = ["CodexAppServer", "native_binary", "open_app_server"]

log = structlog.get_logger("teamctl.runtime.codex")

_REQUEST_TIMEOUT = 30.0
_NO_RETRY_GRACE = 30.0
# the server's approval requests, and the answer that declines each (the pinned schema)
_DECLINE: dict[str, dict[str, Any]] = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "execCommandApproval": {"decision": "denied"},
    "applyPatchApproval": {"decision": "denied"},
    "mcpServer/elicitation/request": {"action": "decline"},
}


def open_app_server(spec: LaunchSpec, spawner: Spawner
                    ) -> AbstractAsyncContextManager[CodexAppServer]:
    """Start ``codex app-server``, hand-shake, open the member's thread; stop it on exit."""
    return owned_process(lambda tg: _start(spec, spawner, tg))


def native_binary(executable: str) -> tuple[str, dict[str, str]]:
    """The native codex of an npm install, and the variables its node wrapper would set — so
    the member is one process, not a node wrapper (~43 MiB) around it; else ``executable``."""
    real = Path(executable).resolve()
    if real.name != "codex.js" or real.parent.name != "bin":
        return executable, {}
    package = real.parent.parent  # node_modules/@openai/codex
    arch = platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    candidates = [*sorted(package.parent.glob(f"codex-*/vendor/{arch}-*/bin/codex")),
                  *sorted(package.glob(f"vendor/{arch}-*/bin/codex"))]
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return str(candidate), {"CODEX_MANAGED_BY_NPM": "1",
                                    "CODEX_MANAGED_PACKAGE_ROOT": str(package)}
    return executable, {}


async def _start(spec: LaunchSpec, spawner: Spawner, tg: TaskGroup) -> CodexAppServer:
    if spec.host.profile.checks_local_login:  # on a host, its own CLI says whether it is logged in
        check_login(spec, codex_member_home(spec))
    local = spec.host.local_path(spec.executable)  # None: the host's own file
    executable, wrapper_env = (spec.executable, {}) if local is None else native_binary(local)
    argv = [executable, *spec.args, "app-server"]
    raw = await spawn_member(spec, argv, {**build_env(spec), **wrapper_env})
    server = CodexAppServer(raw, spec)
    server.start_readers(tg)

    async with starting(spec, server, what="app-server not ready",
                        failures=rpc_start_failures(TeamctlRpcError, raw, "app-server")):
        await server.handshake()
        await server.open_thread()
    log.info("runtime_ready", team=spec.team, member=spec.member, pid=raw.pid,
             transport="app-server", session_id=server.session_id, resumed=server.resumed)
    return server


class _Turn:
    def __init__(self, message_id: str = "") -> None:
        self.message_id = message_id
        self.stop: UsageStop | None = None  # the ledger's stop: the turn is interrupted
        self.id: str | None = None
        self.replies: list[str] = []
        self.done = anyio.Event()
        self.completed: dict[str, Any] | None = None
        self.fatal_error: str | None = None  # an error notification with willRetry: false
        self.fatal_at = 0.0
        self.notes: list[str] = []


class CodexAppServer(JsonRpcProcess):
    """One running ``codex app-server`` and the member's thread on it."""

    def __init__(self, process: Process, spec: LaunchSpec) -> None:
        super().__init__(process, spec, write_timeout=_REQUEST_TIMEOUT,
                         fields={"transport": "app-server"})
        self._rate_limits: Any = None
        self._bridge = OperatorBridge(spec, self.watch)
        self._session_id = spec.session_id
        self.resumed = False
        self._turn: _Turn | None = None

    # -- the RuntimeProcess protocol ----------------------------------------------------------

    async def probe(self, timeout: float) -> bool:
        """``thread/read`` of its thread (answered from the server's own state, no model
        call), within ``timeout``; an error answer (a thread not yet written) is an answer."""
        return await self.probe_by(
            lambda: self._request("thread/read", {"threadId": self._session_id}), timeout,
            (TeamctlRpcError,))

    def send_probe(self, answered: Callable[[], None]) -> Callable[[], None] | None:
        """The same ``thread/read``, written at once (a liveness round); any answer counts."""
        request_id = self.next_id()
        return self.request_now(request_id, {"id": request_id, "method": "thread/read",
                                             "params": {"threadId": self._session_id}},
                                answered)

    # -- start-up -----------------------------------------------------------------------------

    async def handshake(self) -> None:
        await self._request("initialize", {
            "clientInfo": {"name": "teamctl", "title": "teamctl", "version": "0.1.0"},
            "capabilities": {"experimentalApi": False}})
        await self._notify("initialized", None)

    async def open_thread(self) -> None:
        """Resume the recorded thread, else start one. The thread's settings are sent either
        way, so a changed permission profile or role applies to a resumed thread too."""
        settings: dict[str, Any] = {
            "cwd": str(self._spec.workdir), "model": self._spec.model,
            "sandbox": sandbox_mode(self._spec),
            "approvalPolicy": APPROVAL_POLICY.get(self._spec.permissions, "never"),
            "developerInstructions": self._spec.prompt}
        if self._session_id:
            try:
                await self._request("thread/resume", {
                    "threadId": self._session_id, "excludeTurns": True, **settings})
                self.resumed = True
                return
            except TeamctlRpcError as exc:
                lost = SessionLost(self._spec.member, self._session_id, exc.message)
                log.warning("session_lost", team=self._spec.team, member=self._spec.member,
                            lost_session=self._session_id, reason=lost.message)
        result = await self._request("thread/start", settings)
        thread_id = (result.get("thread") or {}).get("id")
        if not isinstance(thread_id, str) or not thread_id:
            raise ProtocolError(f"thread/start answered without a thread id: "
                                f"{str(result)[:200]}")
        self._session_id = thread_id

    # -- turns --------------------------------------------------------------------------------

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        if not self.usable:
            raise self.exited()
        turn = await on_host(self._spec, turn)
        state = self._turn = _Turn(turn.message_id)
        state.stop = UsageStop(self._spec, turn.message_id, state.done,
                               lambda: self._stop_soon(state), "interrupt")
        self._activity = "starting the turn"
        self.watch.begin()
        try:
            result = await self._request("turn/start", {
                "threadId": self._session_id, "input": self._input(turn)})
            state.id = str((result.get("turn") or {}).get("id"))
            await on_sent()
            await self._await_end(state)
        except TeamctlRpcError as exc:
            raise TurnFailed(self._spec.member, exc.message, api_status=None,
                             retryable=False) from exc
        finally:
            self._turn = None
            self._activity = None  # what it did is over with the turn
        return self._outcome(state)

    def _input(self, turn: Turn) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        mapping = legend(turn)
        for part in turn.parts:
            if isinstance(part, TextPart):
                items.append({"type": "text", "text": part.text, "text_elements": []})
                if mapping is not None:  # right after the message's own text
                    items.append({"type": "text", "text": mapping, "text_elements": []})
                    mapping = None
            elif isinstance(part, ImagePart):
                items.append({"type": "localImage", "path": str(part.path)})
            elif isinstance(part, DocumentPart):  # never planned: document_mimes is empty
                raise refused(self._spec.member, part, CODEX_WHY)
            else:
                assert_never(part)
        return items

    async def _await_end(self, state: _Turn) -> None:
        grace = min(_NO_RETRY_GRACE, self.watch.idle)

        def alive() -> None:
            if self._exited.is_set() or self._doomed:
                raise self.exited()
            if state.fatal_error and time.monotonic() - state.fatal_at > grace:
                log.warning("turn_failed_without_completion", team=self._spec.team,
                            member=self._spec.member, grace=grace)
                raise _failed(self._spec.member, state.fatal_error)

        if not await self.watch.wait(state.done, alive=alive):  # silent: interrupt, then kill
            await self.watch.stop_turn(state.done, lambda: self._interrupt(state), self.kill)
            raise RuntimeStuck(self._spec.member, self.watch.idle)

    async def _interrupt(self, state: _Turn) -> None:
        with suppress(TeamctlRpcError):
            await self._request("turn/interrupt", {"threadId": self._session_id,
                                                   "turnId": state.id})

    def _stop_soon(self, state: _Turn) -> None:
        """Interrupt the turn for a budget; kill the process if it does not end in time."""
        if self._tg is not None:
            self._tg.start_soon(self.watch.stop_turn, state.done,
                                lambda: self._interrupt(state), self.kill, None)

    def _outcome(self, state: _Turn) -> TurnResult:
        turn = (state.completed or {}).get("turn") or {}
        status = turn.get("status")
        if state.stop and state.stop.requested and status != "completed":  # one over first stands
            raise BudgetReached(self._spec.member, "the budget was reached during the turn")
        if status == "failed":
            error = turn.get("error") or {}
            info = error.get("codexErrorInfo")
            message = error.get("message") or state.fatal_error
            if isinstance(info, str) and info in _LIMIT_ERRORS:
                raise RateLimited(self._spec.member, str(message or info),
                                  until=limit_reset(self._rate_limits),
                                  window=window_of(self._rate_limits).window)
            raise _failed(self._spec.member, message, info)
        if status == "interrupted":
            raise RuntimeStuck(self._spec.member, self._spec.turn_idle_timeout)
        return TurnResult(reply=state.replies[-1] if state.replies else "",
                          session_id=self._session_id, notes=tuple(state.notes))

    # -- the wire -----------------------------------------------------------------------------

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id()
        with self.pending(request_id) as waiter:
            await self.write({"id": request_id, "method": method, "params": params})
            if not await self.answer(waiter, _REQUEST_TIMEOUT):
                raise TimeoutError
        if "error" in waiter.answer:
            error = waiter.answer["error"] or {}
            raise TeamctlRpcError(str(error.get("message") or error))
        result = waiter.answer.get("result")
        return result if isinstance(result, dict) else {}

    async def _notify(self, method: str, params: dict[str, Any] | None) -> None:
        await self.write({"method": method} | ({"params": params} if params else {}))

    async def answer_request(self, request_id: Any, method: str,
                              params: dict[str, Any]) -> None:
        """Answer one of the server's own requests (never left waiting)."""
        answer = _DECLINE.get(method)
        if answer is not None and self._bridge.asks:
            await self._ask_operator(request_id, method, params)
            return
        if answer is not None:
            target = str(params.get("command") or params.get("reason") or
                         params.get("serverName") or "")[:200]
            log.warning("approval_declined", team=self._spec.team, member=self._spec.member,
                        request=method, target=target, permissions=self._spec.permissions)
            if self._turn is not None:
                self._turn.notes.append(
                    f"permission denied: {method.split('/')[-2] if '/' in method else method} "
                    f"{target}: declined (permissions = \"{self._spec.permissions}\" has no "
                    "approvals; use a wider profile)")
            message: dict[str, Any] = {"id": request_id, "result": answer}
        else:
            log.warning("runtime_request_refused", team=self._spec.team,
                        member=self._spec.member, request=method)
            message = {"id": request_id, "error": {
                "code": -32601, "message": f"teamctl does not handle {method}"}}
        with suppress(RuntimeExited):
            await self.write(message)

    async def _ask_operator(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        """The ``ask`` profile: the operator decides, as long as it takes; the server's
        ``serverRequest/resolved`` confirms the answer was applied."""
        kind = method.split("/")[-2] if "/" in method else method
        summary = str(params.get("command") or params.get("reason") or params.get("grantRoot")
                      or params.get("serverName") or kind)
        answer = await self._bridge.ask(ApprovalRequest("permission", kind, summary,
                                                        asked=params))
        self._bridge.answered(str(request_id), answer)
        await self.write({"id": request_id, "result": _decision(method, answer)})

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        state = self._turn
        if method == "serverRequest/resolved" and self._tg is not None:
            self._tg.start_soon(self._bridge.confirm, str(params.get("requestId")))
        if method == "account/rateLimits/updated":
            self._log_rate_limits(params.get("rateLimits"))
        if state is None:
            return
        if method == "item/completed":
            self._on_item(params.get("item") or {}, state)
            self._tool(params.get("item"), state, completed=True)
        elif method == "item/started":
            item = params.get("item") or {}
            self._activity = _doing(item) or self._activity
            self._tool(item, state, completed=False)
        elif method == "item/agentMessage/delta":
            self._activity = "writing its reply"
        elif method == "thread/tokenUsage/updated":
            self._on_usage(state, params.get("tokenUsage") or {})
        elif method == "turn/completed":
            state.completed = params
            state.done.set()
        elif method == "error" and params.get("willRetry") is False:
            state.fatal_error = str((params.get("error") or {}).get("message") or "error")
            state.fatal_at = time.monotonic()
        elif method == "error":
            message = str((params.get("error") or {}).get("message", ""))[:300]
            self._activity = f"retrying: {message[:80]}"
            log.info("runtime_retry_notice", team=self._spec.team, member=self._spec.member,
                     message=message)

    def _on_item(self, item: dict[str, Any], state: _Turn) -> None:
        kind = item.get("type")
        if kind == "agentMessage" and isinstance(item.get("text"), str):
            state.replies.append(item["text"])
        elif kind == "commandExecution" and item.get("exitCode") not in (0, None):
            note = sandbox_refusal(self._spec, item.get("command"), item.get("aggregatedOutput"))
            state.notes += [note] if note else []

    def _tool(self, item: Any, state: _Turn, *, completed: bool) -> None:
        report_item(self._spec, state.message_id, item, completed=completed,
                    names=_TOOL_ITEMS, mcp="mcpToolCall", arguments=_TOOL_ARGUMENTS)

    def _on_usage(self, state: _Turn, usage: dict[str, Any]) -> None:
        """The thread's running total (``total``) goes to the ledger, which charges its
        increase; ``total − last`` is the thread's total before this model call (the baseline
        of a thread the ledger has not seen). A budget crossed stops the turn."""
        total, last = _token_usage(usage.get("total")), _token_usage(usage.get("last"))
        log.info("turn_usage", team=self._spec.team, member=self._spec.member,
                 last=None if last is None else last.as_dict(),
                 thread_tokens=(usage.get("total") or {}).get("totalTokens"))
        meter = self._spec.meter
        if total is None or meter is None or not state.message_id:
            return
        over = meter.reading(state.message_id, UsageReading(
            tokens=total, model=self._spec.model, counter=f"codex-thread:{self._session_id}",
            baseline=None if last is None else total - last))
        if over and state.stop is not None:
            state.stop.request()

    def _log_rate_limits(self, limits: Any) -> None:
        """``account/rateLimits/updated`` (docs/costs.md, "Quota windows"): a limit reached
        holds the member's account until the spent window's reset; otherwise its most-used
        window's percentage goes to the quota (the reserve reads it)."""
        if not isinstance(limits, dict) or limits == self._rate_limits:
            return
        self._rate_limits = limits
        reached = limits.get("rateLimitReachedType")
        meter = self._spec.meter
        reading = window_of(limits)
        if reached and meter is not None:
            meter.rate_limited(limit_reset(limits), str(reached).replace("_", " "),
                               window=reading.window)
        elif meter is not None and reading.used is not None:
            meter.window(reading)
        windows = {name: (limits.get(name) or {}).get("usedPercent")
                   for name in ("primary", "secondary") if isinstance(limits.get(name), dict)}
        log.info("rate_limits", team=self._spec.team, member=self._spec.member,
                 limit=limits.get("limitId"), used_percent=windows,
                 reached=limits.get("rateLimitReachedType"))


def _decision(method: str, answer: ApprovalAnswer) -> dict[str, Any]:
    """The operator's answer in the shape the request's method takes (the pinned schema)."""
    approve = answer.decision == "approve"
    if method == "mcpServer/elicitation/request":
        return {"action": "accept" if approve else "decline"}
    if method in ("execCommandApproval", "applyPatchApproval"):
        return {"decision": ("approved_for_session" if answer.always else "approved")
                if approve else "denied"}
    return {"decision": ("acceptForSession" if answer.always else "accept")
            if approve else "decline"}


# the items that are tool calls (the pinned schema's ThreadItem), each's name when it has none
_TOOL_ITEMS = {"commandExecution": "shell", "fileChange": "apply_patch",
               "mcpToolCall": "mcp", "dynamicToolCall": "tool", "webSearch": "web_search"}
_TOOL_ARGUMENTS = ("command", "cwd", "changes", "arguments", "query")


def _doing(item: dict[str, Any]) -> str | None:
    """What an item that started says the member is doing, for ``status``."""
    kind = item.get("type")
    if kind == "commandExecution":
        return f"running {str(item.get('command') or 'a command')[:80]}"
    if kind == "fileChange":
        return "editing files"
    if kind == "mcpToolCall":
        return f"calling {item.get('server')}.{item.get('tool')}"
    if kind == "reasoning":
        return "thinking"
    return None


# codexErrorInfo values that mean the account's limit, not a failing request (the schema)
_LIMIT_ERRORS = frozenset({"usageLimitExceeded"})


def window_of(limits: Any) -> WindowReading:
    """A rate-limit snapshot as a report of its most-used window (``primary``: five hours,
    ``secondary``: a week, each with ``usedPercent``, ``windowDurationMins``, ``resetsAt``);
    nothing used reported (an API key: both null) is a report of nothing."""
    windows = [w for w in (limits.get("primary"), limits.get("secondary"))
               if isinstance(w, dict) and isinstance(w.get("usedPercent"), int | float)] \
        if isinstance(limits, dict) else []
    if not windows:
        return WindowReading("allowed")
    most = max(windows, key=lambda w: float(w["usedPercent"]))
    minutes, resets = most.get("windowDurationMins"), most.get("resetsAt")
    return WindowReading("allowed", _window_name(minutes), float(most["usedPercent"]) / 100,
                         float(resets) if isinstance(resets, int | float) else None)


def _window_name(minutes: Any) -> str | None:
    """Codex's window length in Claude's words: 300 minutes ``five_hour``, 10080
    ``seven_day``; another ``N_minute``."""
    if not isinstance(minutes, int) or minutes <= 0:
        return None
    return {300: "five_hour", 10080: "seven_day"}.get(minutes, f"{minutes}_minute")


def limit_reset(limits: Any) -> float | None:
    """When a rate-limit snapshot says the limit resets: the latest ``resetsAt`` of a window
    that is used up, else the primary window's (epoch seconds; None if it names none)."""
    if not isinstance(limits, dict):
        return None
    windows = [w for w in (limits.get("primary"), limits.get("secondary")) if isinstance(w, dict)]
    full = [w.get("resetsAt") for w in windows if (w.get("usedPercent") or 0) >= 100]
    resets = [r for r in full or [w.get("resetsAt") for w in windows[:1]]
              if isinstance(r, int | float)]
    return float(max(resets)) if resets else None


def _token_usage(last: Any) -> TokenUsage | None:
    if not isinstance(last, dict):
        return None
    return TokenUsage(input_tokens=token_count(last, "inputTokens"),
                      cached_input_tokens=token_count(last, "cachedInputTokens"),
                      output_tokens=token_count(last, "outputTokens"),
                      reasoning_output_tokens=token_count(last, "reasoningOutputTokens"))


def _failed(member: str, message: Any, info: Any = None) -> TurnFailed:
    """A failed turn, typed: the API's message and HTTP status (from ``codexErrorInfo`` or the
    message), retryable for the statuses a later attempt can pass."""
    text = str(message or "the turn failed")
    status = None
    if isinstance(info, dict):
        for detail in info.values():
            if isinstance(detail, dict) and isinstance(detail.get("httpStatusCode"), int):
                status = detail["httpStatusCode"]
    if status is None:
        status = api_status(text)
    return TurnFailed(member, text, api_status=status, retryable=retryable_status(status))


class TeamctlRpcError(Exception):
    """The app-server answered a request with a JSON-RPC error (its message)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
