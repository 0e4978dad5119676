"""OpenCode over ``opencode serve`` (protocols/opencode.md, opencode-ai 1.18.33).

One long-lived ``opencode serve --hostname 127.0.0.1 --port <free>`` per member, with a random
``OPENCODE_SERVER_PASSWORD`` (HTTP Basic on every request), private HOME and XDG dirs, and the
member's workdir as cwd, ``$PWD`` and ``?directory=`` (OpenCode reads ``$PWD``, not getcwd).

Readiness: the "listening" line (a health request sent earlier can hang forever, §11), then
``GET /global/health``, then the member's session — reused by id when OpenCode still has it,
else created with a title (an untitled session makes an extra title request that also carries
the image).

A turn: ``POST /session/{id}/message`` with a text part and one ``file`` part per image (a
``data:`` URL: a ``file://`` URL goes through a synthetic Read tool and fails with a 500 when
the file is gone). The delivery is *sent* once the event stream shows the stored user message;
the call returns at the end of the turn with the assistant message (only that one: listing the
session's messages would re-download every earlier image), whose text parts are the reply.
``session.error`` (or an ``error`` on the assistant message) fails the delivery with the API's
message; ``session.status`` retry events are shown as activity, not failure. ``prompt_async``
is not used: its 204 would prove nothing.

Liveness: the serve process *and* the ``/event`` stream (``server.heartbeat`` every 10 s): a lost
stream or missing heartbeats make the member not alive even if the pid exists, and the server is
restarted. The stream echoes full data URLs: nothing from it is logged.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from contextlib import AbstractAsyncContextManager, suppress
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import structlog

from orchestrator.contracts import (
    BudgetReached,
    Capabilities,
    LaunchSpec,
    MemberStartFailed,
    RateLimited,
    RuntimeExited,
    RuntimeStuck,
    TokenUsage,
    Turn,
    TurnFailed,
    TurnResult,
    UsageReading,
    inbound,
    usd,
)
from runtimes.kit import (
    Adapter,
    OperatorBridge,
    TurnWatch,
    UsageStop,
    report_tool,
    retryable_status,
    spawn_member,
    starting,
)
from runtimes.kit.base import (
    MemberProcess,
    OnSent,
    Spawner,
    drain_stderr,
    owned_process,
    spawn_process,
    stop_process,
    token_count,
    unwrap_group,
)
from runtimes.kit.framing import iter_lines
from runtimes.opencode.asks import ASK_EVENTS, OpenCodeAsks
from runtimes.opencode.launch import (
    build_config,
    build_env,
    check_login,
    free_port,
    member_auth_file,
)
from runtimes.opencode.message import denial_notes, error_message, message_body

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from anyio.abc import Process, TaskGroup

__all__ = ["OpenCodeRuntime", "OpenCodeServer", "build_config", "build_env", "check_login",
           "member_auth_file"]

log = structlog.get_logger("teamctl.runtime.opencode")

_LISTENING = b"opencode server listening on"
_HEALTH_TIMEOUT = 5.0
_REQUEST_TIMEOUT = 30.0
_MAX_PAYLOAD_BYTES = 32 * 1024 * 1024
_IDLE_GRACE = 2.0


class OpenCodeRuntime(Adapter, runtime="opencode"):
    """The ``opencode`` runtime adapter."""

    capabilities = Capabilities(
        image_input=True,
        image_mimes=frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"}),
        image_purpose="opencode-file-part",
        inline_base64=True,  # data URLs inside one JSON request
        max_payload_bytes=_MAX_PAYLOAD_BYTES,
        document_mimes=frozenset({"application/pdf"}),
    )

    def __init__(self, *, spawner: Spawner = spawn_process,
                 heartbeat_grace: float = 30.0, stop_grace: float = 0.5,
                 reconnect_delay: float = 0.5) -> None:
        super().__init__(spawner=spawner)
        self._heartbeat_grace = float(
            os.environ.get("TEAMCTL_OPENCODE_HEARTBEAT_GRACE") or heartbeat_grace)
        # how long a stopped server is given after its stdin closes before SIGTERM (`opencode
        # serve` does not read stdin: the tests, which stop hundreds of them, say 0)
        self._stop_grace = float(os.environ.get("TEAMCTL_OPENCODE_STOP_GRACE") or stop_grace)
        self._reconnect_delay = reconnect_delay  # between the event stream's reconnects

    def open(self, spec: LaunchSpec) -> AbstractAsyncContextManager[OpenCodeServer]:
        """Start ``opencode serve`` and wait for readiness; stop it on exit."""
        return owned_process(lambda tg: self._start(spec, tg))

    async def _start(self, spec: LaunchSpec, tg: TaskGroup) -> OpenCodeServer:
        port, password = free_port(), secrets.token_urlsafe(24)
        env = build_env(spec, password)
        if spec.host.profile.checks_local_login:  # elsewhere its own CLI says if it is logged in
            check_login(spec)
        serve_port = await spec.host.forward_port(port)  # over SSH: forwarded there
        # in a sandbox's own network namespace: through the relay's Unix socket
        way_in = inbound(spec.host)
        inbound_at = None if way_in is None else way_in.inbound_socket(port)
        argv = [spec.executable, *spec.args, "serve", "--hostname", "127.0.0.1",
                "--port", str(serve_port)]
        raw = await spawn_member(spec, argv, env)
        server = OpenCodeServer(raw, spec, port, password, self._heartbeat_grace,
                                stop_grace=self._stop_grace, inbound=inbound_at,
                                reconnect_delay=self._reconnect_delay)

        def http_failed(exc: Exception) -> str:
            return f"its server failed a start-up request ({type(exc).__name__}: {exc})"

        async with starting(spec, server, failures={httpx.HTTPError: http_failed}):
            await server.wait_listening(tg)
            await server.check_health()
            await server.open_session()
            server.asks_in(tg)
            tg.start_soon(server.watch_events)
            await server.stream_connected.wait()
        log.info("runtime_ready", team=spec.team, member=spec.member, pid=raw.pid,
                 session_id=server.session_id, resumed=server.resumed, port=port,
                 inbound=None if inbound_at is None else str(inbound_at))
        return server


class _Turn:
    def __init__(self, message_id: str = "") -> None:
        self.message_id = message_id
        self.steps: dict[str, tuple[TokenUsage, float | None]] = {}  # step-finish parts by id
        self.held: Exception | None = None  # a budget reached or a long rate limit: aborted
        self.stop: UsageStop | None = None  # the ledger's stop: the turn is aborted
        self.accepted = anyio.Event()  # OpenCode stored the user message: the transport took it
        self.done = anyio.Event()  # the message call returned (or failed)
        self.error: dict[str, Any] | None = None
        self.response: httpx.Response | None = None
        self.failure: Exception | None = None
        self.tool_parts: dict[str, dict[str, Any]] = {}  # the turn's tool calls, latest state
        self.idle = anyio.Event()  # OpenCode said the session is idle: every event of it is in


class OpenCodeServer(MemberProcess):
    """One running ``opencode serve`` and the member's session on it."""

    def __init__(self, process: Process, spec: LaunchSpec, port: int, password: str,
                 heartbeat_grace: float, *, stop_grace: float = 0.5,
                 inbound: Path | None = None, reconnect_delay: float = 0.5) -> None:
        super().__init__(process)
        self._spec = spec
        self._stop_grace = stop_grace
        self._reconnect_delay = reconnect_delay
        self._inbound = inbound  # the Unix socket that reaches the server (a sandbox's relay)
        self._http = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", auth=("opencode", password),
            transport=None if inbound is None else httpx.AsyncHTTPTransport(uds=str(inbound)),
            params={"directory": spec.host.remote_path(str(spec.workdir))},
            timeout=_REQUEST_TIMEOUT,
        )
        self._session_id = spec.session_id
        self.resumed = False
        self._turn: _Turn | None = None
        self._last_event = time.monotonic()
        self._stream_up = False
        self._closing = False  # close() began: its HTTP client is (being) closed
        self.stream_connected = anyio.Event()
        self._grace = heartbeat_grace
        self._tg: TaskGroup | None = None
        self._watch = TurnWatch(spec)
        self._bridge = OperatorBridge(spec, self._watch)
        self._asks: OpenCodeAsks | None = None

    # -- the RuntimeProcess protocol ----------------------------------------------------------

    @property
    def healthy(self) -> bool:
        fresh = time.monotonic() - self._last_event <= self._grace
        return self.usable and self._stream_up and fresh

    def asks_in(self, tg: TaskGroup) -> None:
        """Where permission requests are answered (they must never block the event reader)."""
        self._tg = tg
        self._asks = OpenCodeAsks(self._spec, self._http, self._bridge, tg)

    async def close(self) -> None:
        self._closing = True  # the event watcher stops now, not at the process's exit
        with anyio.CancelScope(shield=True):
            await self._http.aclose()
            await stop_process(self._process, eof_timeout=self._stop_grace)
            if self._inbound is not None:  # its relay died with the sandbox, unable to
                self._inbound.unlink(missing_ok=True)
            self._exited.set()

    # -- start-up -----------------------------------------------------------------------------

    async def wait_listening(self, tg: TaskGroup) -> None:
        """Read stdout until the listening line (then keep draining it in the background)."""
        assert self._process.stdout is not None
        tg.start_soon(drain_stderr, self._process, self._ring)
        tg.start_soon(self._reap)
        lines = iter_lines(self._process.stdout, limit_bytes=1 << 20).__aiter__()
        async for line in lines:
            if _LISTENING in line:
                tg.start_soon(self._drain, lines)
                return
        await self._process.wait()
        raise MemberStartFailed(self._spec.member, f"exited {self._process.returncode} before "
                                "it listened", self._ring.tail())

    async def _drain(self, lines: AsyncIterator[bytes]) -> None:
        with suppress(Exception):
            async for _line in lines:
                pass

    async def _reap(self) -> None:
        await self._process.wait()
        self._exited.set()
        # a waiting turn ends now, not at its watchdog's next look: its request to the dead
        # server usually fails first, but not always (a loaded machine: the turn waited on)
        self._watch.wake()

    async def check_health(self) -> None:
        """``GET /global/health``, each try bounded (a stuck request is retried): OpenCode
        itself answered (through a sandbox's relay, a connection the relay cannot pass on to
        the server is closed, and retried)."""
        while True:
            with anyio.move_on_after(_HEALTH_TIMEOUT):
                with suppress(httpx.HTTPError):
                    response = await self._http.get("/global/health")
                    if response.status_code == 200 and response.json().get("healthy"):
                        return
                await anyio.sleep(0.2)

    async def open_session(self) -> None:
        if self._session_id:
            response = await self._http.get(f"/session/{self._session_id}")
            if response.status_code == 200:
                self.resumed = True
                return
            log.warning("session_lost", team=self._spec.team, member=self._spec.member,
                        lost_session=self._session_id, status=response.status_code)
        response = await self._http.post(
            "/session", json={"title": f"teamctl {self._spec.team}/{self._spec.member}"})
        if response.status_code != 200:
            raise MemberStartFailed(self._spec.member, "could not create a session: "
                                    f"HTTP {response.status_code} {error_message(response)}")
        self._session_id = str(response.json()["id"])

    # -- events -------------------------------------------------------------------------------

    async def watch_events(self) -> None:
        """Follow ``/event``; reconnect while the server lives; give up (kill it, so it is
        restarted) when the stream stays down or heartbeats stop for the grace period."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat_watchdog)
            while not self._exited.is_set() and not self._closing:
                with suppress(httpx.HTTPError, anyio.EndOfStream):
                    await self._follow_stream()
                self._stream_up = False
                await anyio.sleep(self._reconnect_delay)
            tg.cancel_scope.cancel()

    async def _follow_stream(self) -> None:
        timeout = httpx.Timeout(_REQUEST_TIMEOUT, read=self._grace)
        async with self._http.stream("GET", "/event", timeout=timeout) as response:
            response.raise_for_status()
            self._stream_up = True
            self.stream_connected.set()
            self._last_event = time.monotonic()
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    self._last_event = time.monotonic()
                    self._on_event(line[5:].strip())

    async def _heartbeat_watchdog(self) -> None:
        """Kill the server once no event nor heartbeat came for the grace: it sleeps until
        the grace after the last event and looks again (an idle server's heartbeat every
        10 s moves that on) — a wake every ~20 s per member, not every 5 s."""
        while not self._exited.is_set():
            left = self._last_event + self._grace - time.monotonic()
            if left > 0:
                await anyio.sleep(left)
                continue
            if not self._doomed:
                log.warning("runtime_unhealthy", team=self._spec.team, member=self._spec.member,
                            reason="no event or heartbeat", grace=self._grace)
                self._kill()
            return

    def _on_event(self, data: str) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        props = event.get("properties") or {}
        turn = self._turn
        session = props.get("sessionID") or (props.get("part") or {}).get("sessionID") or \
            (props.get("info") or {}).get("sessionID")
        kind = event.get("type")
        if session == self._session_id and kind in ASK_EVENTS and self._asks is not None:
            self._asks.on_event(str(kind), props)
        if turn is None or session != self._session_id:
            return
        self._watch.touch()
        if kind == "message.part.updated":
            part = props.get("part") or {}
            if isinstance(part, dict) and part.get("type") == "tool":
                turn.tool_parts[str(part.get("callID") or part.get("id"))] = part
                self._tool(turn, part)
            elif isinstance(part, dict) and part.get("type") == "step-finish":
                self._on_step(turn, part)
        if kind == "session.idle" or (kind == "session.status" and (
                props.get("status") or {}).get("type") == "idle"):
            turn.idle.set()
        if kind == "session.status":
            self._on_status(props.get("status") or {}, turn)
        elif kind == "session.error":
            turn.error = props.get("error") or {"data": {"message": "session error"}}
        elif kind == "message.updated" and (props.get("info") or {}).get("role") == "user":
            turn.accepted.set()

    def _tool(self, turn: _Turn, part: dict[str, Any]) -> None:
        """A tool part (protocols/opencode.md): its ``state.status`` pending or running, then
        completed or error — for the record of the turn's tool calls."""
        found = part.get("state")
        state: dict[str, Any] = found if isinstance(found, dict) else {}
        status = state.get("status")
        report_tool(self._spec, turn.message_id, part.get("callID") or part.get("id"),
                    part.get("tool"), "completed" if status == "completed" else
                    "failed" if status == "error" else "running", state.get("input"))

    def _on_status(self, status: dict[str, Any], turn: _Turn) -> None:
        if status.get("type") != "retry":
            return
        self._activity = f"retrying (attempt {status.get('attempt')})"
        message = str(status.get("message"))[:300]
        log.info("runtime_retry_notice", team=self._spec.team, member=self._spec.member,
                 attempt=status.get("attempt"), message=message)
        # a retry hours away is a spent subscription window: hold the member, free the turn
        retry_at = status.get("next")
        if isinstance(retry_at, int | float) and retry_at / 1000 - time.time() > \
                _LONG_RETRY and turn.held is None:
            until = retry_at / 1000
            turn.held = RateLimited(self._spec.member, message, until=until)
            if self._spec.meter is not None:
                self._spec.meter.rate_limited(until, message)
            self._abort_soon()

    def _on_step(self, turn: _Turn, part: dict[str, Any]) -> None:
        """A step's tokens and cost (OpenCode prices them itself): the turn's own figures so
        far go to the ledger; a budget crossed aborts the turn."""
        tokens = part.get("tokens") or {}
        cache = tokens.get("cache") or {} if isinstance(tokens, dict) else {}
        if not isinstance(tokens, dict) or not isinstance(cache, dict):
            return
        cost = part.get("cost")
        turn.steps[str(part.get("id"))] = (TokenUsage(
            input_tokens=token_count(tokens, "input") + token_count(cache, "read")
            + token_count(cache, "write"),
            cached_input_tokens=token_count(cache, "read"),
            output_tokens=token_count(tokens, "output") + token_count(tokens, "reasoning"),
            reasoning_output_tokens=token_count(tokens, "reasoning")), usd(cost, "cost"))
        meter = self._spec.meter
        if meter is None or not turn.message_id:
            return
        used = sum((t for t, _ in turn.steps.values()), TokenUsage())
        costs = [c for _, c in turn.steps.values()]
        if meter.reading(turn.message_id, UsageReading(
                tokens=used, model=self._spec.model,
                cost_usd=None if None in costs else sum(c for c in costs if c is not None))) \
                and turn.stop is not None:
            turn.stop.request()

    def _over_budget(self, turn: _Turn) -> None:
        """Abort the turn for a budget (a turn that ended first stands)."""
        if turn.held is None:
            turn.held = BudgetReached(self._spec.member, "the budget was reached during the turn")
            self._abort_soon()

    def _abort_soon(self) -> None:
        if self._tg is not None:
            self._tg.start_soon(self._abort)

    def _kill(self) -> None:
        self.kill()

    async def probe(self, timeout: float) -> bool:
        """``GET /session/status`` (served from the member's project instance, no model call:
        ``{}`` when idle) answered 200 within ``timeout``; the event stream's heartbeats stay
        a second witness (``healthy``)."""
        if not self.usable:
            return False
        with anyio.move_on_after(timeout), suppress(httpx.HTTPError, ValueError):
            response = await self._http.get("/session/status", timeout=timeout)
            return response.status_code == 200 and isinstance(response.json(), dict)
        return False

    # -- turns --------------------------------------------------------------------------------

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        """``POST /session/{id}/message`` (it returns at the end of the turn with the assistant
        message only); ``sent`` once the event stream shows OpenCode stored the user message."""
        if not self.usable:
            raise RuntimeExited(self._spec.member, self._process.returncode, self.stderr_tail())
        body = message_body(self._spec, turn)
        state = self._turn = _Turn(turn.message_id)
        state.stop = UsageStop(self._spec, turn.message_id, state.done,
                               lambda: self._over_budget(state), "abort")
        self._watch.begin()
        try:
            with unwrap_group():
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._post_message, body, state)
                    await self._await(state.accepted)
                    await on_sent()
                    await self._await(state.done)
            # the turn's tool-part events may trail the call's answer; the session's idle event
            # comes after all of them (bounded: a server that sends none costs IDLE_GRACE). A
            # call that failed (the server died mid-turn) has none to wait for.
            if state.response is not None:
                with anyio.move_on_after(_IDLE_GRACE):
                    await state.idle.wait()
            try:
                result = self._result(state)  # a turn that ended before the abort stands
            except TurnFailed:
                if state.held is not None:
                    raise state.held from None
                raise
            if state.held is not None and not result.reply:
                # aborted for a hold: OpenCode 1.18.33 answers the call with an empty message,
                # no error (docs/costs.md, "Quota windows") — no answer, the message waits
                raise state.held
            return result
        finally:
            self._turn = None
            self._activity = None

    async def _post_message(self, body: dict[str, Any], state: _Turn) -> None:
        try:
            state.response = await self._http.post(
                f"/session/{self._session_id}/message", json=body, timeout=None)
        except httpx.HTTPError as exc:
            # our own server on loopback dropped the call: it is broken (or dying). Kill it
            # now, so no next turn is tried on it before the supervisor sees it exit.
            state.failure = exc
            log.warning("runtime_unhealthy", team=self._spec.team, member=self._spec.member,
                        reason=f"message call failed: {type(exc).__name__}")
            self._kill()
        finally:
            state.accepted.set()
            state.done.set()

    async def _await(self, event: anyio.Event) -> None:
        """Wait for ``event`` while the turn shows activity; stuck after turn_idle_timeout of
        silence (then abort it); RuntimeExited if the server dies."""
        def alive() -> None:
            if self._exited.is_set() or self._doomed:
                raise RuntimeExited(self._spec.member, self._process.returncode,
                                    self.stderr_tail())

        if not await self._watch.wait(event, alive=alive):
            await self._watch.stop_turn(None, self._abort, None)
            raise RuntimeStuck(self._spec.member, self._watch.idle)

    async def _abort(self) -> None:
        with suppress(httpx.HTTPError):
            await self._http.post(f"/session/{self._session_id}/abort")

    def _result(self, state: _Turn) -> TurnResult:
        response = state.response
        if response is None:
            raise RuntimeExited(self._spec.member, self._process.returncode,
                                [f"message call failed: {type(state.failure).__name__}"])
        if response.status_code != 200:
            raise TurnFailed(self._spec.member, f"OpenCode refused the message: HTTP "
                             f"{response.status_code} {error_message(response)}",
                             api_status=response.status_code,
                             retryable=retryable_status(response.status_code))
        message = response.json()
        error = state.error or (message.get("info") or {}).get("error")
        if error:
            data = error.get("data") or {}
            status = data.get("statusCode")
            raise TurnFailed(self._spec.member, str(data.get("message") or error.get("name")),
                             api_status=status if isinstance(status, int) else None,
                             retryable=bool(data.get("isRetryable")))
        texts = [p.get("text", "") for p in message.get("parts", [])
                 if p.get("type") == "text" and not p.get("synthetic")]
        tool_parts = {str(p.get("callID") or p.get("id")): p
                      for p in message.get("parts", []) if p.get("type") == "tool"}
        return TurnResult(reply="".join(texts), session_id=self._session_id,
                          notes=denial_notes(self._spec, [*state.tool_parts.values(), *(
                              p for k, p in tool_parts.items() if k not in state.tool_parts)]))

_LONG_RETRY = 60.0  # seconds: a retry further out than this holds the member instead
