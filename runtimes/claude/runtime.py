"""Claude Code over stream-json (protocols/claude.md).

One long-lived ``claude -p --input-format stream-json --output-format stream-json --verbose``
process per member. Readiness is the answer to an ``initialize`` control request (the CLI
prints nothing before its first input line). A turn is one ``user`` line on stdin and ends at
that turn's ``result`` event; a ``result`` with ``is_error: true`` is a failed turn carrying the
API's error, even though its subtype says ``success`` (§3.6).

Sessions: the first start passes ``--session-id <uuid>``; once the transcript exists in the
member's private config dir, later starts pass ``--resume <uuid>``. A resume the CLI does not
know answers with an error ``result`` and exit 1 (§3.7): the session is reported lost and a
fresh one is started, never retried in a loop.
"""

from __future__ import annotations

import base64
import uuid
from contextlib import AbstractAsyncContextManager, suppress
from typing import TYPE_CHECKING, Any, Literal, assert_never

import anyio
import structlog

from orchestrator.contracts import (
    BudgetReached,
    Capabilities,
    DocumentPart,
    ImagePart,
    LaunchSpec,
    MemberStartFailed,
    PayloadTooLarge,
    RateLimited,
    RuntimeExited,
    RuntimeNotLoggedIn,
    RuntimeStuck,
    SessionLost,
    TextPart,
    TokenUsage,
    Turn,
    TurnFailed,
    TurnResult,
    UsageReading,
    WindowReading,
    usd,
)
from runtimes.claude.asks import control_answer, request_of
from runtimes.claude.launch import (
    EDIT_TOOLS,
    READ_TOOLS,
    build_argv,
    build_env,
    home_dirs,
    private_dirs,
    session_counter,
    write_files,
)
from runtimes.kit import (
    Adapter,
    OperatorBridge,
    UsageStop,
    denied,
    report_tool,
    retryable_status,
    spawn_member,
    starting,
)
from runtimes.kit.base import OnSent, owned_process, token_count
from runtimes.kit.documents import safe_name, utf8_text
from runtimes.kit.framing import encode_line
from runtimes.kit.stdio import StdioJsonProcess

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import Process, TaskGroup

__all__ = ["EDIT_TOOLS", "READ_TOOLS", "ClaudeProcess", "ClaudeRuntime", "anthropic_tokens",
           "build_argv", "build_env", "home_dirs", "private_dirs", "user_line"]

log = structlog.get_logger("teamctl.runtime.claude")

# One stdin line per turn. The Messages API takes 32 MB per request and the CLI re-sends the
# session's history (images included) with every turn, so one turn stays well below that.
MAX_TURN_LINE_BYTES = 20 * 1024 * 1024

WRITE_TIMEOUT = 60.0  # one stdin line (at most 20 MiB) into a CLI that reads it
_MCP_POLL_INTERVAL = 0.1  # while the CLI reports teamctl's MCP server "pending" at start-up
_MCP_WAIT_MARGIN = 1.0


class ClaudeRuntime(Adapter, runtime="claude"):
    """The ``claude`` runtime adapter."""

    capabilities = Capabilities(
        image_input=True,
        image_mimes=frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"}),
        image_purpose="claude-inline-image",
        inline_base64=True,
        max_payload_bytes=MAX_TURN_LINE_BYTES,
        document_mimes=frozenset({"application/pdf", "text/plain"}),
    )

    def open(self, spec: LaunchSpec) -> AbstractAsyncContextManager[ClaudeProcess]:
        """Start the member and wait for readiness; stop it (stop ladder) on exit."""
        return owned_process(lambda tg: self._start(spec, tg))

    async def _start(self, spec: LaunchSpec, tg: TaskGroup) -> ClaudeProcess:
        session_id = spec.session_id or str(uuid.uuid4())
        try:
            return await self._spawn(spec, session_id, tg)
        except SessionLost:
            fresh = str(uuid.uuid4())
            log.warning(
                "session_lost", team=spec.team, member=spec.member, lost_session=session_id,
                session_id=fresh,
            )
            return await self._spawn(spec, fresh, tg)

    async def _spawn(self, spec: LaunchSpec, session_id: str, tg: TaskGroup) -> ClaudeProcess:
        dirs = private_dirs(spec)
        spec.host.place(home_dirs(spec))
        resume = await spec.host.exists(  # its transcripts are on its host
            str(dirs["config"] / "projects" / "*" / f"{session_id}.jsonl"))
        argv = build_argv(spec, session_id, resume=resume, files=write_files(spec))
        raw = await spawn_member(spec, argv, build_env(spec, dirs))
        process = ClaudeProcess(raw, spec, session_id)
        process.resumed = resume
        process.start_readers(tg)
        async with starting(spec, process, timeout=None):  # the handshake keeps its own
            await process.handshake(spec.start_timeout)
        log.info(
            "runtime_ready", team=spec.team, member=spec.member, pid=raw.pid,
            session_id=session_id, resumed=resume,
        )
        return process


def user_line(turn: Turn, *, member: str = "") -> dict[str, Any]:
    """The stdin ``user`` line for a turn (SDK form, protocols/claude.md §3.1): the text, with
    each image (a base64 ``image`` block) or native document (a ``document`` block) right after
    the text that names it as ``[Image #N]`` / ``[Doc #N]`` (the unnamed ones after the text),
    never base64 as text."""
    content: list[dict[str, Any]] = []
    text, cut = "", 0
    for part in turn.parts:
        if isinstance(part, TextPart):
            _text_block(content, text[cut:])
            text, cut = part.text, 0
            continue
        if isinstance(part, ImagePart):
            block = {"type": "image", "source": {
                "type": "base64", "media_type": part.mime,
                "data": base64.b64encode(part.data).decode("ascii")}}
        elif isinstance(part, DocumentPart):
            block = document_block(part, member)
        else:
            assert_never(part)
        end = len(text)
        if part.anchor is not None and cut <= part.anchor <= end:
            end = part.anchor
        _text_block(content, text[cut:end])
        cut = end
        content.append(block)
    _text_block(content, text[cut:])
    if not content:
        content.append({"type": "text", "text": ""})
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
        "session_id": "",
    }


def document_block(part: DocumentPart, member: str) -> dict[str, Any]:
    """A Messages API ``document`` block: a PDF as base64, a text file as its text, titled with
    its safe base name (the shape Claude Code 2.1.332 passes to the API unchanged, title
    included: docs/runtimes.md "Documents")."""
    if part.mime == "text/plain":
        source = {"type": "text", "media_type": "text/plain", "data": utf8_text(member, part)}
    else:
        source = {"type": "base64", "media_type": part.mime,
                  "data": base64.b64encode(part.data).decode("ascii")}
    return {"type": "document", "source": source, "title": safe_name(part)}


def _text_block(content: list[dict[str, Any]], text: str) -> None:
    """Append ``text`` as a text block, unless it is only whitespace (the API refuses empty
    text blocks; a marker's surrounding spaces are not worth a block)."""
    if text.strip():
        content.append({"type": "text", "text": text})


class _TurnState:
    def __init__(self, message_id: str = "") -> None:
        self.message_id = message_id
        self.usage: dict[str, TokenUsage] = {}  # per API message id: the in-turn estimate
        self.stop: UsageStop | None = None  # the ledger's stop: the turn is interrupted
        self.rate_limit: dict[str, Any] | None = None  # a rejected rate_limit_event
        self.done = anyio.Event()
        self.texts: list[str] = []
        self.denied: list[dict[str, Any]] = []  # system/permission_denied events
        self.result: dict[str, Any] | None = None
        self.error: Exception | None = None

    def finish(self, result: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        if not self.done.is_set():
            self.result, self.error = result, error
            self.done.set()


class ClaudeProcess(StdioJsonProcess):
    """One running ``claude`` process; turns are serialized by the caller."""

    def __init__(self, process: Process, spec: LaunchSpec, session_id: str) -> None:
        super().__init__(process, spec, write_timeout=WRITE_TIMEOUT)
        self._session_id: str | None = session_id
        self.resumed = False  # started with --resume: the session's earlier turns are in it
        self._turn: _TurnState | None = None
        self._early_result: dict[str, Any] | None = None
        self._bridge = OperatorBridge(spec, self.watch)
        # total_cost_usd is the running total of the *session*: a --resume carries it on
        self._counter = session_counter(session_id)

    async def handshake(self, timeout: float) -> None:
        """Send ``initialize`` and wait for its answer (readiness), the process's exit, or
        ``timeout`` seconds."""
        request_id = self._request_id("init")
        with self.pending(request_id) as waiter:
            try:
                await self.write(_control(request_id, "initialize"))
                answered = await self.answer(waiter, timeout)
            except RuntimeExited:  # it exited (e.g. an unknown --resume): say why
                with anyio.move_on_after(5):
                    await self._exited.wait()
                self._raise_start_failure(timed_out=False)
        if not answered:
            self._raise_start_failure(timed_out=True)
        self._check_login(waiter.answer)
        if self._spec.mcp is not None:
            with anyio.move_on_after(max(timeout - _MCP_WAIT_MARGIN, 1.0)):
                await self._wait_mcp_connected()

    async def _wait_mcp_connected(self) -> None:
        """Readiness includes teamctl's MCP server: ``mcp_status`` until the CLI reports it
        connected (it starts it ~0.3–1.5 s after spawn, protocols/teammates.md §1.1); a server
        the CLI reports failed fails the start. Bounded by the start timeout."""
        while True:
            request_id = self._request_id("mcp")
            with self.pending(request_id) as waiter:
                await self.write(_control(request_id, "mcp_status"))
                await waiter.done.wait()
            servers = waiter.answer.get("mcpServers")
            ours = next((s for s in servers or [] if isinstance(s, dict)
                         and s.get("name") == "teamctl"), None)
            if ours is None or ours.get("status") == "connected":
                return  # connected, or not reported by this CLI
            if ours.get("status") == "failed":
                raise MemberStartFailed(self._spec.member, "teamctl's MCP server did not start "
                                        "(the CLI reports it failed)", self.stderr_tail())
            await anyio.sleep(_MCP_POLL_INTERVAL)

    def _check_login(self, answer: dict[str, Any]) -> None:
        """The preflight: ``initialize`` reports the credential the CLI found (``account``); a
        member with none fails to start now, not with a failed first message."""
        account = answer.get("account") or {}
        if not isinstance(account, dict) or account.get("subscriptionType") or \
                account.get("tokenSource") not in (None, "none") or account.get("apiKeySource"):
            return
        where = ("log in with 'claude /login' (or 'claude setup-token')"
                 if self._spec.login == "operator" else
                 "this member's login is isolated: set ANTHROPIC_API_KEY or "
                 "CLAUDE_CODE_OAUTH_TOKEN (from 'claude setup-token') in its env")
        raise RuntimeNotLoggedIn(self._spec.member, "claude", where)

    def _raise_start_failure(self, *, timed_out: bool) -> None:
        early = self._early_result or {}
        errors = " ".join(str(e) for e in early.get("errors") or [])
        if "No conversation found" in errors:
            raise SessionLost(self._spec.member, self._session_id, errors)
        if timed_out:
            reason = f"no answer to initialize within {self._spec.start_timeout:g}s"
        else:
            last = self._ring.tail(3)
            reason = f"exited {self._process.returncode} before it was ready" + (
                f": {' | '.join(last)}" if last else ""
            )
        raise MemberStartFailed(self._spec.member, reason, self.stderr_tail())

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        if self._exited.is_set():
            raise self.exited()
        line = encode_line(user_line(turn, member=self._spec.member))
        if len(line) > MAX_TURN_LINE_BYTES:
            raise PayloadTooLarge(len(line), MAX_TURN_LINE_BYTES)  # before a broken pipe
        state = self._turn = _TurnState(turn.message_id)
        state.stop = UsageStop(self._spec, turn.message_id, state.done,
                               lambda: self._stop_soon(state), "interrupt")
        self.watch.begin()
        try:
            await self.write_line(line)
            await on_sent()
            if not await self.watch.wait(state.done):  # silent: interrupt, then kill
                await self.watch.stop_turn(state.done, self._interrupt, self.kill)
                raise RuntimeStuck(self._spec.member, self.watch.idle)
        finally:
            self._turn = None
            self._retried()
        if state.error is not None:
            raise state.error
        assert state.result is not None
        return self._turn_result(state)

    async def _interrupt(self) -> None:
        """Ask the CLI to interrupt the turn (protocols/claude.md §3.4)."""
        self._activity = "interrupting"
        try:
            await self.write(_control(self._request_id("interrupt"), "interrupt"))
        finally:
            self._activity = None

    def _turn_result(self, state: _TurnState) -> TurnResult:
        result = state.result or {}
        text = result.get("result")
        reply = text if isinstance(text, str) and text else "\n".join(state.texts)
        if result.get("subtype") == "error_max_budget_usd":
            raise BudgetReached(self._spec.member, "the CLI's --max-budget-usd backstop was "
                                "reached")
        if state.stop and state.stop.requested and result.get("is_error"):  # one over first stands
            raise BudgetReached(self._spec.member, "the budget was reached during the turn")
        limit = _rate_limit_info(result) or state.rate_limit
        if result.get("is_error") and limit is not None:
            raise RateLimited(self._spec.member, reply or "the account's usage limit was reached",
                              until=_epoch(limit.get("resetsAt")),
                              window=_str(limit.get("rateLimitType")))
        if result.get("is_error"):
            status = result.get("api_error_status")
            message = reply or " ".join(str(e) for e in result.get("errors") or []) or (
                f"the turn ended with {result.get('subtype')}"
            )
            raise TurnFailed(
                self._spec.member, message,
                api_status=status if isinstance(status, int) else None,
                retryable=retryable_status(status if isinstance(status, int) else None),
            )
        return TurnResult(reply=reply, session_id=self._session_id,
                          notes=self._denials(state, result))

    def _denials(self, state: _TurnState, result: dict[str, Any]) -> tuple[str, ...]:
        """Every refusal of the turn (``system/permission_denied``, with the target from the
        result's ``permission_denials``), as history notes and ``permission_denied`` events."""
        inputs = {d.get("tool_use_id"): d.get("tool_input") or {}
                  for d in result.get("permission_denials") or [] if isinstance(d, dict)}
        notes = []
        for event in state.denied:
            given = inputs.get(event.get("tool_use_id")) or {}
            target = str(given.get("file_path") or given.get("command") or given.get("path")
                         or "") if isinstance(given, dict) else ""
            notes.append(denied(self._spec, str(event.get("tool_name") or "a tool"), target,
                                str(event.get("message") or "")))
        return tuple(notes)

    async def probe(self, timeout: float) -> bool:
        """A control request the CLI answers itself, no model call (``mcp_status``: the real
        CLI answers ``{"mcpServers": [...]}`` in 0.1-0.3 s), answered within ``timeout``. A
        stopped process is given the whole deadline: one continued in time (SIGCONT, a
        debugger) answers and stays."""
        if not self.usable:
            return False
        request_id = self._request_id("probe")
        with self.pending(request_id) as waiter:
            try:
                with anyio.move_on_after(timeout):
                    await self.write(_control(request_id, "mcp_status"))
                    await waiter.done.wait()
            except (RuntimeExited, RuntimeStuck):
                return False
        return waiter.done.is_set()

    def send_probe(self, answered: Callable[[], None]) -> Callable[[], None] | None:
        """The same control request, written at once (a liveness round)."""
        request_id = self._request_id("probe")
        return self.request_now(request_id, _control(request_id, "mcp_status"), answered)

    def _request_id(self, kind: str) -> str:
        return f"teamctl_{kind}_{self.next_id()}"

    async def on_message(self, event: dict[str, Any]) -> None:
        await self._dispatch(event)
        await self._bridge.confirm()  # the line after an answer: the tool ran, or the turn went on

    async def _dispatch(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "control_response":
            response = event.get("response") or {}
            body = response.get("response")
            self.resolve(str(response.get("request_id")), body if isinstance(body, dict) else {})
        elif kind == "control_request":
            request = event.get("request") or {}
            if self._bridge.asks and self._tg is not None and \
                    isinstance(request, dict) and request.get("subtype") == "can_use_tool":
                self._tg.start_soon(self._ask_operator, event.get("request_id"), request)
            else:
                await self._deny_control_request(event)
        elif kind == "assistant" and self._turn is not None:
            self._retried()
            self._turn.texts.extend(_assistant_texts(event))
            self._estimate(self._turn, event)
            self._tools(self._turn, event)
        elif kind == "user" and self._turn is not None:
            self._tools(self._turn, event)
        elif kind == "rate_limit_event":
            self._on_rate_limit(event.get("rate_limit_info"))
        elif kind == "system" and event.get("subtype") == "permission_denied" and \
                self._turn is not None:
            self._turn.denied.append(event)
        elif kind == "system" and event.get("subtype") == "api_retry":
            self._on_retry(event)
        elif kind == "result":
            if self._turn is not None:
                self._charge(self._turn, event)
                self._turn.finish(result=event)
            else:
                self._early_result = event

    def _tools(self, state: _TurnState, event: dict[str, Any]) -> None:
        """An assistant's ``tool_use`` blocks start tool calls; a user line's ``tool_result``
        blocks end them (``is_error``: failed) — protocols/claude.md §2."""
        for block in _blocks(event):
            if block.get("type") == "tool_use":
                report_tool(self._spec, state.message_id, block.get("id"), block.get("name"),
                            "running", block.get("input"))
            elif block.get("type") == "tool_result":
                report_tool(self._spec, state.message_id, block.get("tool_use_id"), None,
                            "failed" if block.get("is_error") else "completed")

    # -- usage and limits (docs/costs.md) ------------------------------------------------------

    def _estimate(self, state: _TurnState, event: dict[str, Any]) -> None:
        """An assistant message's usage (its ``message_start`` figures: output is not final)
        is the turn's estimate until its ``result``: a budget crossed mid-turn stops it."""
        message = event.get("message") or {}
        if not isinstance(message, dict) or message.get("model") == "<synthetic>":
            return
        tokens = anthropic_tokens(message.get("usage"))
        if tokens is None:
            return
        state.usage[str(message.get("id"))] = tokens
        total = sum(state.usage.values(), TokenUsage())
        self._report(state, UsageReading(tokens=total, model=_str(message.get("model")),
                                         estimate=True))

    def _charge(self, state: _TurnState, result: dict[str, Any]) -> None:
        """The turn's ``result``: ``usage`` covers this turn; ``total_cost_usd`` is the
        session's running total, carried across ``--resume`` (docs/costs.md) — the ledger
        charges its increase (errors and interrupted turns too)."""
        self._report(state, UsageReading(
            tokens=anthropic_tokens(result.get("usage")) or TokenUsage(), counter=self._counter,
            baseline=TokenUsage(), turn_tokens=True,
            cost_usd=usd(result.get("total_cost_usd"), "total_cost_usd"),
            model=self._spec.model))

    def _report(self, state: _TurnState, reading: UsageReading) -> None:
        """A reading for the ledger; one during the turn that crosses a budget stops it (the
        turn's own end figure cannot: that turn is over, and the gate holds the next)."""
        meter = self._spec.meter
        if meter is None or not state.message_id:
            return
        if meter.reading(state.message_id, reading) and reading.estimate and state.stop:
            state.stop.request()

    def _stop_soon(self, state: _TurnState) -> None:
        """Interrupt the turn for a budget; kill the process if it does not end in time."""
        if self._tg is not None:
            self._tg.start_soon(self.watch.stop_turn, state.done, self._interrupt, self.kill,
                                None)

    def _on_rate_limit(self, info: Any) -> None:
        """``rate_limit_event`` (subscription logins; docs/costs.md, "Quota windows"):
        ``rejected`` holds the member's account until ``resetsAt``; ``allowed`` and
        ``allowed_warning`` report the window's use (its most-used one)."""
        if not isinstance(info, dict):
            return
        status = info.get("status")
        log.info("rate_limits", team=self._spec.team, member=self._spec.member,
                 status=status, limit=info.get("rateLimitType"), resets_at=info.get("resetsAt"),
                 utilization=info.get("utilization"))
        meter = self._spec.meter
        if status == "rejected":
            if self._turn is not None:
                self._turn.rate_limit = info
            if meter is not None:
                window = info.get("rateLimitType")
                meter.rate_limited(_epoch(info.get("resetsAt")),
                                   f"{window or 'usage'} limit reached", window=_str(window))
        elif status in ("allowed", "allowed_warning") and meter is not None:
            meter.window(window_reading(info))

    def _retried(self) -> None:
        """A retry is over (the answer came, or the turn ended): no longer the activity."""
        if self._activity is not None and self._activity.startswith("retrying"):
            self._activity = None

    def _on_retry(self, event: dict[str, Any]) -> None:
        """``system/api_retry``: the CLI retries a transient 429, an overload or a 5xx itself,
        with its own backoff — nothing is held (docs/costs.md, "Quota windows")."""
        self._activity = (f"retrying ({event.get('error_status')} {event.get('error')}, "
                          f"attempt {event.get('attempt')})")
        log.info("runtime_retry_notice", team=self._spec.team, member=self._spec.member,
                 status=event.get("error_status"), error=str(event.get("error"))[:100],
                 attempt=event.get("attempt"), delay_ms=event.get("retry_delay_ms"))

    async def _deny_control_request(self, event: dict[str, Any]) -> None:
        """Permission prompts (``--permission-prompt-tool stdio``) would block the turn
        forever: answer each with a denial that says where permissions are configured."""
        request_id = event.get("request_id")
        reply = {"type": "control_response", "response": {
            "subtype": "success", "request_id": request_id,
            "response": {"behavior": "deny",
                         "message": "teamctl answers no permission prompts; set the member's "
                                    "permission flags in its args"}}}
        log.warning("runtime_permission_prompt_denied", member=self._spec.member)
        with suppress(RuntimeExited):
            await self.write(reply)

    async def _ask_operator(self, request_id: Any, request: dict[str, Any]) -> None:
        """A prompt of the ``ask`` profile: the operator decides (as long as it takes)."""
        asked = request_of(request)
        self._activity = f"waiting for the operator: {asked.tool}"
        try:
            answer = await self._bridge.ask(asked)
        finally:
            self._activity = None
        with suppress(RuntimeExited):
            await self.write(control_answer(request_id, request, answer))
            self._bridge.answered(str(request_id), answer)

    def on_exit(self) -> None:
        if self._turn is not None:
            self._turn.finish(error=self.exited())
        super().on_exit()


def anthropic_tokens(usage: Any) -> TokenUsage | None:
    """Anthropic usage → TokenUsage: input counts cache reads and writes too."""
    if not isinstance(usage, dict):
        return None

    details = usage.get("output_tokens_details")
    cached = token_count(usage, "cache_read_input_tokens")
    return TokenUsage(
        input_tokens=token_count(usage, "input_tokens") + cached
        + token_count(usage, "cache_creation_input_tokens"),
        cached_input_tokens=cached, output_tokens=token_count(usage, "output_tokens"),
        reasoning_output_tokens=token_count(details, "thinking_tokens")
        if isinstance(details, dict) else 0)


def _rate_limit_info(result: dict[str, Any]) -> dict[str, Any] | None:
    """A result refused by the account's usage limit carries the limit it hit."""
    if result.get("api_error") != "usage_limit_reached":
        return None
    params = result.get("api_error_params")
    info = params.get("rate_limit_info") if isinstance(params, dict) else None
    return info if isinstance(info, dict) else {}


def window_reading(info: dict[str, Any]) -> WindowReading:
    """An ``allowed``/``allowed_warning`` rate-limit info as a report of its most-used window:
    of ``unifiedWindows`` (each with its ``utilization`` and ``resetsAt``), else the top
    level's (``utilization`` only comes with a warning)."""
    status: Literal["allowed", "warning"] = \
        "warning" if info.get("status") == "allowed_warning" else "allowed"
    windows = info.get("unifiedWindows")
    found = [(name, w) for name, w in windows.items() if isinstance(w, dict) and
             isinstance(w.get("utilization"), int | float)] if isinstance(windows, dict) else []
    if found:
        name, most = max(found, key=lambda item: float(item[1]["utilization"]))
        return WindowReading(status, name, float(most["utilization"]),
                             _epoch(most.get("resetsAt")))
    used = info.get("utilization")
    return WindowReading(status, _str(info.get("rateLimitType")),
                         float(used) if isinstance(used, int | float) else None,
                         _epoch(info.get("resetsAt")))


def _epoch(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _control(request_id: str, subtype: str) -> dict[str, Any]:
    return {"type": "control_request", "request_id": request_id,
            "request": {"subtype": subtype}}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _assistant_texts(event: dict[str, Any]) -> list[str]:
    message = event.get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in _blocks(event) if b.get("type") == "text"
            and isinstance(b.get("text"), str)]


def _blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of an assistant or user line (none when its content is text)."""
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
