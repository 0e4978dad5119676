"""Any agent that speaks ACP (Agent Client Protocol: JSON-RPC 2.0 lines on stdio) as a member:
one long-lived process per member (docs/runtimes.md § ACP).

Start-up: ``initialize`` (protocolVersion 1; no fs, no terminal: teamctl serves neither) — an
agent answering another version is a start failure; then the member's session: ``session/load``
of the recorded id when the agent advertises ``loadSession`` (else ``session/resume`` when it
advertises that; unknown: SessionLost, and a new one), else ``session/new {cwd, mcpServers}``
with teamctl's MCP server. An agent answering "authentication required" (-32000) is
``RuntimeNotLoggedIn`` naming its login — never a retry loop. Its model: ``session/set_model``
when the agent advertises it among its models, else the preset's variable; its mode: the
"default" mode (every tool asks) for every profile but ``full`` ("yolo"), when offered.

A turn is ``session/prompt`` with text and image blocks (the planned variant's bytes, base64)
and documents as embedded resources (only to an agent with ``embeddedContext``; what survives
together, agent by agent: ``acp_prompt``), answered at the
turn's end with ``stopReason``: end_turn (and max_tokens, max_turn_requests,
noted) → the reply accumulated from ``agent_message_chunk``; refusal → a failed turn; cancelled
→ stuck (or over budget). Every line is activity; a silent turn gets ``session/cancel`` before
the process is killed. Usage: the chunks' ``_meta.usage`` (Qwen Code), the prompt's ``usage``
(else its ``_meta.quota``: Gemini CLI), and ``usage_update``'s session cost. The agent's
``session/request_permission`` is answered by the member's profile (``acp_launch.allowed``) or,
for ``ask``, by the operator; its other requests get a JSON-RPC error. Liveness:
``_teamctl/ping``, a method no agent has — the error it answers proves the agent reads and
answers.
"""

from __future__ import annotations

import re
from contextlib import AbstractAsyncContextManager, suppress
from typing import TYPE_CHECKING, Any

import structlog

from orchestrator.contracts import (
    ApprovalAnswer,
    ApprovalRequest,
    BudgetReached,
    Capabilities,
    LaunchSpec,
    ProtocolError,
    RuntimeExited,
    RuntimeNotLoggedIn,
    RuntimeStuck,
    SessionLost,
    TokenUsage,
    Turn,
    TurnFailed,
    TurnResult,
    UsageReading,
    acp_agent,
    acp_agent_reporting,
    token_count,
    usd,
)
from runtimes.acp.launch import (
    AcpOptions,
    allowed,
    build_env,
    check_login,
    choose_option,
    login_fix,
    mcp_servers,
    tool_paths,
    tools_listed,
)
from runtimes.acp.prompt import PromptRules, prompt_blocks
from runtimes.kit import (
    Adapter,
    OperatorBridge,
    UsageStop,
    denied,
    report_tool,
    retryable_status,
    rpc_start_failures,
    spawn_member,
    starting,
)
from runtimes.kit.base import OnSent, owned_process
from runtimes.kit.stdio import JsonRpcProcess, Waiter

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import Process, TaskGroup

__all__ = ["PROTOCOL_VERSION", "AcpAgentProcess", "AcpRuntime"]

log = structlog.get_logger("teamctl.runtime.acp")

PROTOCOL_VERSION = 1
AUTH_REQUIRED = -32000  # ACP's "authentication required"
_REQUEST_TIMEOUT = 30.0
_MAX_PAYLOAD_BYTES = 32 * 1024 * 1024
_MAX_REPLY_CHARS = 1024 * 1024  # a flood of message chunks keeps no more than this
# the session mode set per profile, when the agent offers it (Qwen Code and Gemini CLI both
# name them so): every tool asks — the profile answers — except for ``full``, which asks
# nothing (Qwen Code starts in "auto", whose classifier would block what ``full`` allows)
_MODES = {"full": "yolo", "other": "default"}


class AcpRuntime(Adapter, runtime="acp"):
    """The ``acp`` runtime adapter."""

    capabilities = Capabilities(
        image_input=True,  # per agent: its promptCapabilities.image, checked at each turn
        image_mimes=frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"}),
        image_purpose="acp-image-block",
        inline_base64=True,  # base64 image blocks inside the one session/prompt line
        max_payload_bytes=_MAX_PAYLOAD_BYTES,
        # per agent: its promptCapabilities.embeddedContext, checked at each turn
        document_mimes=frozenset({"application/pdf", "text/plain"}),
    )

    def open(self, spec: LaunchSpec) -> AbstractAsyncContextManager[AcpAgentProcess]:
        """Start the agent, hand-shake, open the member's session; stop it on exit."""
        return owned_process(lambda tg: self._start(spec, tg))

    async def _start(self, spec: LaunchSpec, tg: TaskGroup) -> AcpAgentProcess:
        if spec.host.profile.checks_local_login:
            check_login(spec)
        raw = await spawn_member(spec, [spec.executable, *spec.args], build_env(spec))
        agent = AcpAgentProcess(raw, spec)
        agent.start_readers(tg)

        async with starting(spec, agent, what="the agent did not answer initialize",
                            failures=rpc_start_failures(AcpError, raw, "the agent")):
            await agent.handshake()
            await agent.open_session()
        await tools_listed(spec)
        log.info("runtime_ready", team=spec.team, member=spec.member, pid=raw.pid,
                 agent=agent.agent_name, session_id=agent.session_id, resumed=agent.resumed,
                 image=agent.image_input)
        _note_unused_preset(spec, agent.agent_name)
        return agent


def _note_unused_preset(spec: LaunchSpec, agent_name: str) -> None:
    """A member started by its ``command`` alone that is an agent teamctl has a preset for
    gets the preset's turn rules (its agentInfo names it), but not what is written for it at
    launch: the log says which preset to name."""
    preset = acp_agent_reporting(agent_name)
    if AcpOptions.of(spec).acp_agent is None and preset is not None:
        log.warning("acp_preset_unused", team=spec.team, member=spec.member, agent=agent_name,
                    preset=preset.name, reason=f"started by its command alone: set acp_agent = "
                    f"\"{preset.name}\" for what teamctl writes for it at launch (its model's "
                    "modalities, its login check, its model variable)")


class _Turn:
    def __init__(self, message_id: str, waiter: Waiter) -> None:
        self.message_id = message_id
        self.waiter = waiter
        self.stop: UsageStop | None = None
        self.chunks: list[str] = []
        self.size = 0
        self.notes: list[str] = []
        self.usage: dict[str, TokenUsage] = {}  # per reporting message: the turn's own
        self.prompt_usage: TokenUsage | None = None
        self.cost: float | None = None  # usage_update's session cost (USD), a running total


class AcpAgentProcess(JsonRpcProcess):
    """One running ACP agent and the member's session on it."""

    def __init__(self, process: Process, spec: LaunchSpec) -> None:
        super().__init__(process, spec, write_timeout=_REQUEST_TIMEOUT,
                         fields={"runtime": "acp"})
        self._bridge = OperatorBridge(spec, self.watch)
        self._session_id = spec.session_id
        self.resumed = False
        self.agent_name = ""
        self.capabilities: dict[str, Any] = {}
        self._turn: _Turn | None = None

    @property
    def image_input(self) -> bool:
        return self._prompt_capability("image")

    @property
    def embedded_context(self) -> bool:
        """The agent takes embedded resources in a prompt (its documents)."""
        return self._prompt_capability("embeddedContext")

    def _prompt_capability(self, name: str) -> bool:
        prompt = self.capabilities.get("promptCapabilities") or {}
        return isinstance(prompt, dict) and prompt.get(name) is True

    # -- the RuntimeProcess protocol ----------------------------------------------------------

    async def probe(self, timeout: float) -> bool:
        """A request of a method no agent has: its error answer proves it reads and answers."""
        return await self.probe_by(lambda: self._request("_teamctl/ping", {}), timeout,
                                   (AcpError,))

    def send_probe(self, answered: Callable[[], None]) -> Callable[[], None] | None:
        """The same request, written at once (a liveness round); its error answer counts."""
        request_id = self.next_id()
        return self.request_now(request_id, {"jsonrpc": "2.0", "method": "_teamctl/ping",
                                             "params": {}, "id": request_id}, answered)

    # -- start-up -----------------------------------------------------------------------------

    async def handshake(self) -> None:
        result = await self._request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                   "terminal": False},
            "clientInfo": {"name": "teamctl", "title": "teamctl", "version": "0.1.0"}})
        version = result.get("protocolVersion")
        if version != PROTOCOL_VERSION:
            raise ProtocolError(f"the agent speaks ACP protocol version {version!r}; teamctl "
                                f"speaks {PROTOCOL_VERSION} (use a release of the agent that "
                                "speaks it)")
        caps = result.get("agentCapabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        info = result.get("agentInfo")
        self.agent_name = str((info or {}).get("name") or "") if isinstance(info, dict) else ""

    async def open_session(self) -> None:
        """Load (or resume) the recorded session where the agent can, else a new one; then
        the member's model and mode."""
        where = {"cwd": str(self._spec.workdir), "mcpServers": mcp_servers(self._spec)}
        result: dict[str, Any] | None = None
        method = self._resume_method()
        if self._session_id and method is not None:
            try:
                result = await self._session_call(method, {"sessionId": self._session_id,
                                                           **where})
                self.resumed = True
            except AcpError as exc:
                lost = SessionLost(self._spec.member, self._session_id, exc.message)
                log.warning("session_lost", team=self._spec.team, member=self._spec.member,
                            lost_session=self._session_id, reason=lost.message)
        elif self._session_id:
            log.warning("session_not_resumable", team=self._spec.team, member=self._spec.member,
                        lost_session=self._session_id,
                        reason="the agent advertises neither session/load nor session/resume: "
                               "a new session, without the earlier turns")
        if result is None:
            result = await self._session_call("session/new", where)
            session_id = result.get("sessionId")
            if not isinstance(session_id, str) or not session_id:
                raise ProtocolError(f"session/new answered without a sessionId: "
                                    f"{str(result)[:200]}")
            self._session_id = session_id
        await self._choose(result)

    def _resume_method(self) -> str | None:
        if self.capabilities.get("loadSession") is True:
            return "session/load"
        sessions = self.capabilities.get("sessionCapabilities")
        if isinstance(sessions, dict) and sessions.get("resume") is not None:
            return "session/resume"
        return None

    async def _session_call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._request(method, params)
        except AcpError as exc:
            if exc.code == AUTH_REQUIRED:
                raise RuntimeNotLoggedIn(self._spec.member, self.agent_name or "the agent",
                                         f"it answered {exc.message!r}: "
                                         f"{login_fix(self._spec)}") from None
            raise

    async def _choose(self, session: dict[str, Any]) -> None:
        """The member's model among those the agent advertises (by id or name: Qwen Code's
        ids are ``$runtime|openai|<model>(openai)``), and the mode of its profile."""
        models = session.get("models") if isinstance(session.get("models"), dict) else {}
        wanted = self._spec.model
        entries = [m for m in (models or {}).get("availableModels") or [] if isinstance(m, dict)]
        chosen = next((m.get("modelId") for m in entries
                       if wanted in (m.get("modelId"), m.get("name"))), None) if wanted else None
        if chosen and (models or {}).get("currentModelId") != chosen:
            await self._request("session/set_model", {"sessionId": self._session_id,
                                                      "modelId": chosen})
        elif wanted and entries and not chosen:
            log.info("model_not_advertised", team=self._spec.team, member=self._spec.member,
                     model=wanted, advertised=[m.get("modelId") for m in entries][:20])
        modes = session.get("modes") if isinstance(session.get("modes"), dict) else {}
        offered = [m.get("id") for m in (modes or {}).get("availableModes") or []
                   if isinstance(m, dict)]
        mode = _MODES["full" if self._spec.permissions == "full" else "other"]
        if mode in offered and (modes or {}).get("currentModeId") != mode:
            try:
                await self._request("session/set_mode", {"sessionId": self._session_id,
                                                         "modeId": mode})
            except AcpError as exc:  # Gemini CLI: no yolo in a folder it does not trust
                log.warning("acp_mode_refused", team=self._spec.team, member=self._spec.member,
                            mode=mode, reason=exc.message,
                            note="the agent asks for each tool; the profile answers")

    # -- turns --------------------------------------------------------------------------------

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        if not self.usable:
            raise self.exited()
        prompt = self._prompt(turn)
        request_id = self.next_id()
        with self.pending(request_id) as waiter:
            state = self._turn = _Turn(turn.message_id, waiter)
            state.stop = UsageStop(self._spec, turn.message_id, waiter.done,
                                   lambda: self._stop_soon(state), "cancel")
            self._activity = "starting the turn"
            self.watch.begin()
            try:
                await self.write({"jsonrpc": "2.0", "id": request_id, "method": "session/prompt",
                                  "params": {"sessionId": self._session_id, "prompt": prompt}})
                await on_sent()
                await self._await_end(state)
            finally:
                self._turn = None
                self._activity = None
        return self._outcome(state)

    def _prompt(self, turn: Turn) -> list[dict[str, Any]]:
        """The turn's blocks, by what the agent takes and what its preset knows of it (the
        preset of a member started by its ``command`` alone: the one its agentInfo names)."""
        preset = (acp_agent(AcpOptions.of(self._spec).acp_agent)
                  or acp_agent_reporting(self.agent_name))
        return prompt_blocks(turn.parts, PromptRules(
            self._spec.member, self.agent_name or "ACP", self.image_input, self.embedded_context,
            images_beside_resources=preset is None or preset.images_beside_resources))

    async def _await_end(self, state: _Turn) -> None:
        def alive() -> None:
            if self._exited.is_set() or self._doomed:
                raise self.exited()

        if not await self.watch.wait(state.waiter.done, alive=alive):
            await self.watch.stop_turn(state.waiter.done, self._cancel, self.kill)
            raise RuntimeStuck(self._spec.member, self.watch.idle)

    async def _cancel(self) -> None:
        await self.write({"jsonrpc": "2.0", "method": "session/cancel",
                          "params": {"sessionId": self._session_id}})

    def _stop_soon(self, state: _Turn) -> None:
        """Cancel the turn for a budget; kill the process if it does not end in time."""
        if self._tg is not None:
            self._tg.start_soon(self.watch.stop_turn, state.waiter.done, self._cancel,
                                self.kill, None)

    def _outcome(self, state: _Turn) -> TurnResult:
        answer = state.waiter.answer
        self._charge(state, answer.get("result"))
        if "error" in answer:
            raise self._failed(answer.get("error"))
        result = answer.get("result") if isinstance(answer.get("result"), dict) else {}
        reason = (result or {}).get("stopReason")
        if reason == "cancelled":
            if state.stop is not None and state.stop.requested:
                raise BudgetReached(self._spec.member, "the budget was reached during the turn")
            raise RuntimeStuck(self._spec.member, self._spec.turn_idle_timeout)
        if reason == "refusal":
            raise TurnFailed(self._spec.member, "the agent refused the prompt (stopReason "
                             "refusal)", api_status=None, retryable=False)
        if reason in ("max_tokens", "max_turn_requests"):
            state.notes.append(f"the agent stopped early: {reason}")
        elif reason != "end_turn":
            log.warning("acp_unknown_stop_reason", team=self._spec.team,
                        member=self._spec.member, stop_reason=str(reason)[:80])
        return TurnResult(reply="".join(state.chunks), session_id=self._session_id,
                          notes=tuple(state.notes))

    def _failed(self, error: Any) -> TurnFailed:
        error = error if isinstance(error, dict) else {}
        message = (_error_text(error) if error.get("message") else
                   "the agent failed the turn")[:2000]
        if error.get("code") == AUTH_REQUIRED:
            return TurnFailed(self._spec.member, f"the agent needs a login ({message}): "
                              f"{login_fix(self._spec)}", api_status=None, retryable=False)
        status = _status(message)
        return TurnFailed(self._spec.member, message, api_status=status,
                          retryable=retryable_status(status))

    # -- the wire -----------------------------------------------------------------------------

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await self.call({"jsonrpc": "2.0", "method": method, "params": params},
                                 _REQUEST_TIMEOUT)
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise AcpError(_error_text(error)[:500], error.get("code"))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/update" and params.get("sessionId") == self._session_id:
            update = params.get("update")
            if isinstance(update, dict) and self._turn is not None:
                self._on_update(self._turn, update)

    async def answer_request(self, request_id: Any, method: str,
                              params: dict[str, Any]) -> None:
        """Answer one of the agent's own requests (never left waiting)."""
        answer: ApprovalAnswer | None = None
        if method == "session/request_permission":
            outcome, answer = await self._permission(params)
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id,
                                       "result": {"outcome": outcome}}
        else:
            log.warning("runtime_request_refused", team=self._spec.team,
                        member=self._spec.member, request=method[:100])
            message = {"jsonrpc": "2.0", "id": request_id, "error": {
                "code": -32601, "message": f"teamctl does not serve {method[:100]}"}}
        with suppress(RuntimeExited, RuntimeStuck):
            await self.write(message)
            if answer is not None:  # ACP confirms nothing: the agent has read the answer
                self._bridge.answered(str(request_id), answer)
                await self._bridge.confirm(str(request_id))

    async def _permission(self, params: dict[str, Any]
                          ) -> tuple[dict[str, Any], ApprovalAnswer | None]:
        """The profile's answer, or the operator's for ``ask``, as an ACP outcome (and the
        operator's answer, to confirm once sent)."""
        call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
        kind = str((call or {}).get("kind") or "other")[:40]
        title = str((call or {}).get("title") or kind)
        paths = tool_paths(call or {})
        verdict = allowed(self._spec, kind, paths)
        answer: ApprovalAnswer | None = None
        if verdict is None and self._bridge.asks:
            summary = paths[0] if paths and kind != "execute" else title  # what rules match
            answer = await self._bridge.ask(ApprovalRequest("permission", kind, summary,
                                                            asked=params))
        approve = bool(verdict) or (answer is not None and answer.decision == "approve")
        if not approve:
            why = answer.message if answer is not None and answer.message else \
                f"permissions = \"{self._spec.permissions}\""
            note = denied(self._spec, kind, paths[0] if paths else title, why or "")
            if self._turn is not None:
                self._turn.notes.append(note)
        option = choose_option(params.get("options"), approve,
                               answer is not None and answer.always)
        outcome = {"outcome": "cancelled"} if option is None else \
            {"outcome": "selected", "optionId": option}
        return outcome, answer

    def _on_update(self, state: _Turn, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            if isinstance(text, str) and state.size < _MAX_REPLY_CHARS:
                state.chunks.append(text[:_MAX_REPLY_CHARS - state.size])
                state.size += len(state.chunks[-1])
            self._activity = "writing its reply"
            meta = update.get("_meta")
            if isinstance(meta, dict) and isinstance(meta.get("usage"), dict):
                state.usage[str(len(state.usage))] = _tokens(meta["usage"])
                self._report(state, estimate=True)
        elif kind == "agent_thought_chunk":
            self._activity = "thinking"
        elif kind == "tool_call":
            self._activity = f"{update.get('kind') or 'tool'}: {str(update.get('title'))[:80]}"
        if kind in ("tool_call", "tool_call_update"):
            self._tool(state, update)
        elif kind == "usage_update":
            cost = update.get("cost")
            if isinstance(cost, dict) and cost.get("currency") == "USD":
                state.cost = usd(cost.get("amount"), "usage_update.cost")

    def _tool(self, state: _Turn, update: dict[str, Any]) -> None:
        """``tool_call`` starts a tool call (named by its ``kind``: read, edit, execute…; its
        title and raw input are its arguments); a ``tool_call_update`` whose ``status`` is
        completed or failed ends it (protocols/acp.md)."""
        status = update.get("status")
        arguments = {k: update[k] for k in ("title", "rawInput") if k in update}
        report_tool(self._spec, state.message_id, update.get("toolCallId"),
                    update.get("kind") or "tool",
                    "completed" if status == "completed" else
                    "failed" if status == "failed" else "running", arguments or None)

    def _charge(self, state: _Turn, result: Any) -> None:
        if isinstance(result, dict) and isinstance(result.get("usage"), dict):
            state.prompt_usage = _tokens(result["usage"])
        elif isinstance(result, dict):
            state.prompt_usage = _quota_tokens(result.get("_meta"))
        self._report(state, estimate=False)

    def _report(self, state: _Turn, *, estimate: bool) -> None:
        """The turn's tokens so far (the prompt's own ``usage`` when it gave one, else the sum
        of the chunks' ``_meta.usage``); with ``usage_update``'s session cost, a running total
        the ledger charges the increase of."""
        meter = self._spec.meter
        tokens = state.prompt_usage or sum(state.usage.values(), TokenUsage())
        if meter is None or not state.message_id or (estimate and not state.usage):
            return
        if not estimate and state.prompt_usage is None and not state.usage \
                and state.cost is None:
            return
        reading = UsageReading(tokens=tokens, model=self._spec.model, estimate=estimate)
        if state.cost is not None and not estimate:
            reading = UsageReading(tokens=tokens, model=self._spec.model, cost_usd=state.cost,
                                   counter=f"acp-session:{self._session_id}",
                                   baseline=TokenUsage(), turn_tokens=True)
        if meter.reading(state.message_id, reading) and state.stop is not None:
            state.stop.request()


def _tokens(usage: dict[str, Any]) -> TokenUsage:
    """ACP's ``Usage`` (and Qwen Code's ``_meta.usage``): input tokens include cached reads."""
    return TokenUsage(input_tokens=token_count(usage, "inputTokens"),
                      cached_input_tokens=token_count(usage, "cachedReadTokens"),
                      output_tokens=token_count(usage, "outputTokens"),
                      reasoning_output_tokens=token_count(usage, "thoughtTokens"))


def _error_text(error: dict[str, Any]) -> str:
    """A JSON-RPC error's message, with its ``data.details`` where the agent gave the real
    reason there (Gemini CLI answers "Internal error" and says why in the details)."""
    message = str(error.get("message") or error)
    data = error.get("data")
    details = data.get("details") if isinstance(data, dict) else None
    return f"{message}: {details}" if isinstance(details, str) and details else message


def _quota_tokens(meta: Any) -> TokenUsage | None:
    """Gemini CLI's tokens of a prompt: ``_meta.quota.token_count {input_tokens,
    output_tokens}``, summed over the prompt's model calls (its only usage report)."""
    quota = meta.get("quota") if isinstance(meta, dict) else None
    counts = quota.get("token_count") if isinstance(quota, dict) else None
    if not isinstance(counts, dict):
        return None
    return TokenUsage(input_tokens=token_count(counts, "input_tokens"),
                      output_tokens=token_count(counts, "output_tokens"))


_STATUS = re.compile(r"\b([45]\d\d)\b")


def _status(message: str) -> int | None:
    """The HTTP status an agent's error message names (its provider's answer), if any."""
    found = _STATUS.search(message)
    return int(found.group(1)) if found else None


class AcpError(Exception):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, message: str, code: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
