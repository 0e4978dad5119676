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
import json
import os
import time
import uuid
from contextlib import AbstractAsyncContextManager, suppress
from typing import TYPE_CHECKING, Any, assert_never

import anyio
import structlog

from orchestrator.contracts import (
    BudgetReached,
    Capabilities,
    ImagePart,
    LaunchSpec,
    LineTooLong,
    McpServer,
    MemberStartFailed,
    PayloadTooLarge,
    ProtocolError,
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
    runtime_info,
    usd,
)
from runtimes.base import (
    MemberProcess,
    OnSent,
    Spawner,
    drain_stderr,
    member_environ,
    owned_process,
    private_file,
    spawn_process,
    stop_process,
    token_count,
)
from runtimes.claude_asks import control_answer, request_of
from runtimes.framing import decode_line, encode_line, iter_lines
from runtimes.logins import claude_config_dir

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from anyio.abc import Process, TaskGroup

__all__ = ["ClaudeProcess", "ClaudeRuntime", "anthropic_tokens", "build_env", "private_dirs",
           "user_line"]

log = structlog.get_logger("teamctl.runtime.claude")

# One stdin line per turn. The Messages API takes 32 MB per request and the CLI re-sends the
# session's history (images included) with every turn, so one turn stays well below that.
MAX_TURN_LINE_BYTES = 20 * 1024 * 1024

WRITE_TIMEOUT = 60.0  # one stdin line (at most 20 MiB) into a CLI that reads it
_MCP_POLL_INTERVAL = 0.1  # while the CLI reports teamctl's MCP server "pending" at start-up
_MCP_WAIT_MARGIN = 1.0

_RETRYABLE_API_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class ClaudeRuntime:
    """The ``claude`` runtime adapter."""

    info = runtime_info("claude")
    name: str = info.name
    default_executable: str = info.default_executable
    env_var: str = info.env_var
    capabilities = Capabilities(
        image_input=True,
        image_mimes=frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"}),
        image_purpose="claude-inline-image",
        inline_base64=True,
        max_payload_bytes=MAX_TURN_LINE_BYTES,
    )

    def __init__(self, *, spawner: Spawner = spawn_process) -> None:
        self._spawner = spawner

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
        dirs = private_dirs(spec.state_dir, spec.login)
        resume = await spec.host.exists(  # its transcripts are on its host
            str(dirs["config"] / "projects" / "*" / f"{session_id}.jsonl"))
        argv = build_argv(spec, session_id, resume=resume, files=_write_files(spec))
        env = build_env(spec, dirs)
        try:
            raw = await spec.host.spawn(argv, cwd=spec.workdir, env=env)
        except OSError as exc:
            raise MemberStartFailed(spec.member, f"cannot start {argv[0]}: {exc.strerror}") from exc
        process = ClaudeProcess(raw, spec, session_id)
        process.resumed = resume
        process.start_readers(tg)
        try:
            await process.handshake(spec.start_timeout)
        except BaseException:
            await process.close()
            raise
        log.info(
            "runtime_ready", team=spec.team, member=spec.member, pid=raw.pid,
            session_id=session_id, resumed=resume,
        )
        return process


def _write_files(spec: LaunchSpec) -> dict[str, Path]:
    """The role prompt and the member's settings as 0600 files in its private dir: never on
    the command line (visible to every local user in ``ps``; a long prompt fails E2BIG)."""
    files: dict[str, Path] = {}
    if spec.prompt:
        files["prompt"] = private_file(spec.state_dir / "system-prompt.md", spec.prompt)
    if spec.config:
        files["settings"] = private_file(spec.state_dir / "settings.json",
                                         json.dumps(dict(spec.config), indent=2))
    if spec.mcp is not None:  # the token is in it: 0600, never on argv
        files["mcp"] = private_file(spec.state_dir / "mcp.json", json.dumps({"mcpServers": {
            "teamctl": {"type": "stdio", "command": spec.mcp.command[0],
                        "args": list(spec.mcp.command[1:]), "env": dict(spec.mcp.env)}}},
            indent=2))
    return files


def build_argv(spec: LaunchSpec, session_id: str, *, resume: bool,
               files: Mapping[str, Path]) -> list[str]:
    """The command line: member args first, then the stream-json protocol flags; the prompt
    and settings by file path only."""
    argv = [spec.executable, *spec.args, "-p", "--input-format", "stream-json",
            "--output-format", "stream-json", "--verbose"]
    argv += ["--resume", session_id] if resume else ["--session-id", session_id]
    if spec.model:
        argv += ["--model", spec.model]
    if spec.max_budget_usd is not None:  # the CLI's own backstop behind the ledger's gate,
        # against its session's total, which a resume carries on
        spent = spec.meter.counted(session_counter(session_id)) if spec.meter and resume else 0
        argv += ["--max-budget-usd", f"{max(spec.max_budget_usd + spent, 0.0001):.4f}"]
    if "prompt" in files:
        argv += ["--append-system-prompt-file", str(files["prompt"])]
    if "settings" in files:
        argv += ["--settings", str(files["settings"])]
    if "mcp" in files:
        # only teamctl's server (a .mcp.json in the workdir would load silently in -p mode),
        # and no built-in SendMessage beside it: teammates talk through the router alone
        argv += ["--mcp-config", str(files["mcp"]), "--strict-mcp-config",
                 "--disallowedTools", "SendMessage"]
    flags = list(PERMISSION_FLAGS[spec.permissions])
    if "mcp" in files and "--allowedTools" in flags:
        index = flags.index("--allowedTools") + 1
        flags[index] += "," + ",".join(f"mcp__teamctl__{t}" for t in McpServer.TOOLS)
    return argv + flags


# What each permission profile passes (protocols/teammates.md §1.6; docs/permissions.md).
# Headless Claude never prompts: ``dontAsk`` refuses whatever the allowlist does not name, and
# every refusal shows as a ``permission_denied`` event.
# "./**" rules confine file edits to the member's workdir (the e2e test writes outside it and
# is refused); Claude has no such rule for Bash, which runs any command in the edit profile.
READ_TOOLS = "Read,Glob,Grep,LS,NotebookRead,TodoWrite"
EDIT_TOOLS = f"{READ_TOOLS},Write(./**),Edit(./**),MultiEdit(./**),NotebookEdit(./**),Bash"
PERMISSION_FLAGS: dict[str, list[str]] = {
    "read": ["--permission-mode", "dontAsk", "--allowedTools", READ_TOOLS],
    "edit": ["--permission-mode", "dontAsk", "--allowedTools", EDIT_TOOLS],
    "full": ["--permission-mode", "bypassPermissions"],
    # reads run; everything else is a can_use_tool prompt for the operator (runtimes/claude_asks)
    "ask": ["--permission-mode", "default", "--permission-prompt-tool", "stdio",
            "--allowedTools", READ_TOOLS],
}


def build_env(spec: LaunchSpec, dirs: Mapping[str, Path]) -> dict[str, str]:
    """The minimal environment, the member's private dirs (its config dir only when its login
    is isolated: an operator login uses the operator's own), then the member's own env."""
    own = {"TMPDIR": str(dirs["tmp"]), "CLAUDE_CODE_TMPDIR": str(dirs["tmp"]),
           "XDG_RUNTIME_DIR": str(dirs["xdg"])}
    # the operator's own dir is given only as the operator gives it: CLAUDE_CONFIG_DIR=~/.claude
    # would move .claude.json (user-scope MCP servers) from ~ into that dir
    if spec.login == "isolated" or os.environ.get("CLAUDE_CONFIG_DIR"):
        own["CLAUDE_CONFIG_DIR"] = str(dirs["config"])
    if spec.permissions == "full" and os.geteuid() == 0:
        own["IS_SANDBOX"] = "1"  # bypass mode refuses root without it (docs/permissions.md)
    if spec.mcp is not None:
        own["ENABLE_TOOL_SEARCH"] = "false"  # teamctl's tools offered at once, not deferred
    return member_environ(own, spec.env)


def private_dirs(state_dir: Path, login: str) -> dict[str, Path]:
    dirs = {"config": state_dir / "config", "tmp": state_dir / "tmp", "xdg": state_dir / "xdg"}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if login == "operator":
        dirs["config"] = claude_config_dir()
    return dirs


def user_line(turn: Turn) -> dict[str, Any]:
    """The stdin ``user`` line for a turn (SDK form, protocols/claude.md §3.1): the text, with
    one base64 ``image`` content block right after the text that names it as ``[Image #N]``
    (images it does not name after the text), never base64 as text."""
    content: list[dict[str, Any]] = []
    text, cut = "", 0
    for part in turn.parts:
        if isinstance(part, TextPart):
            _text_block(content, text[cut:])
            text, cut = part.text, 0
        elif isinstance(part, ImagePart):
            end = len(text)
            if part.anchor is not None and cut <= part.anchor <= end:
                end = part.anchor
            _text_block(content, text[cut:end])
            cut = end
            content.append({"type": "image", "source": {
                "type": "base64", "media_type": part.mime,
                "data": base64.b64encode(part.data).decode("ascii")}})
        else:
            assert_never(part)
    _text_block(content, text[cut:])
    if not content:
        content.append({"type": "text", "text": ""})
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
        "session_id": "",
    }


def _text_block(content: list[dict[str, Any]], text: str) -> None:
    """Append ``text`` as a text block, unless it is only whitespace (the API refuses empty
    text blocks; a marker's surrounding spaces are not worth a block)."""
    if text.strip():
        content.append({"type": "text", "text": text})


class _TurnState:
    def __init__(self, message_id: str = "") -> None:
        self.message_id = message_id
        self.usage: dict[str, TokenUsage] = {}  # per API message id: the in-turn estimate
        self.budget_stop = False  # the ledger said stop: the turn is being interrupted
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


class ClaudeProcess(MemberProcess):
    """One running ``claude`` process; turns are serialized by the caller."""

    def __init__(self, process: Process, spec: LaunchSpec, session_id: str) -> None:
        super().__init__(process)
        self._spec = spec
        self._session_id = session_id
        self.resumed = False  # started with --resume: the session's earlier turns are in it
        self._write_lock = anyio.Lock()
        self._control: dict[str, anyio.Event] = {}
        self._answers: dict[str, dict[str, Any]] = {}  # control answers someone waits to read
        self._turn: _TurnState | None = None
        self._early_result: dict[str, Any] | None = None
        self._last_output = time.monotonic()
        self._request_seq = 0
        self._activity: str | None = None
        self._tg: TaskGroup | None = None
        self._asking = 0  # prompts waiting on the operator: the idle watchdog waits too
        self._unconfirmed: list[str] = []  # answered prompts: the next line confirms them
        # total_cost_usd is the running total of the *session*: a --resume carries it on
        self._counter = session_counter(session_id)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def healthy(self) -> bool:
        return self.usable

    @property
    def activity(self) -> str | None:
        return self._activity

    def start_readers(self, tg: TaskGroup) -> None:
        self._tg = tg
        tg.start_soon(self._read_stdout)
        tg.start_soon(drain_stderr, self._process, self._ring)

    async def close(self) -> None:
        await stop_process(self._process)
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await self._exited.wait()

    async def handshake(self, timeout: float) -> None:
        """Send ``initialize`` and wait for its answer (readiness), the process's exit, or
        ``timeout`` seconds."""
        request_id = self._next_request_id("init")
        waiter = anyio.Event()
        self._control[request_id] = waiter
        try:
            await self._write({"type": "control_request", "request_id": request_id,
                               "request": {"subtype": "initialize"}})
        except RuntimeExited:  # it exited at once (e.g. an unknown --resume): say why
            with anyio.move_on_after(5):
                await self._exited.wait()
            self._raise_start_failure(timed_out=False)
        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as tg:
                async def _exit_watch() -> None:
                    await self._exited.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(_exit_watch)
                await waiter.wait()
                tg.cancel_scope.cancel()
        if waiter.is_set():
            self._check_login(self._answers.pop(request_id, {}))
            if self._spec.mcp is not None:
                with anyio.move_on_after(max(timeout - _MCP_WAIT_MARGIN, 1.0)):
                    await self._wait_mcp_connected()
            return
        self._raise_start_failure(timed_out=scope.cancelled_caught)

    async def _wait_mcp_connected(self) -> None:
        """Readiness includes teamctl's MCP server: ``mcp_status`` until the CLI reports it
        connected (it starts it ~0.3–1.5 s after spawn, protocols/teammates.md §1.1); a server
        the CLI reports failed fails the start. Bounded by the start timeout."""
        while True:
            request_id = self._next_request_id("mcp")
            waiter = self._control[request_id] = anyio.Event()
            await self._write({"type": "control_request", "request_id": request_id,
                               "request": {"subtype": "mcp_status"}})
            await waiter.wait()
            answer = self._answers.pop(request_id, {})
            servers = answer.get("mcpServers")
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
            raise RuntimeExited(self._spec.member, self._process.returncode, self.stderr_tail())
        line = encode_line(user_line(turn))
        if len(line) > MAX_TURN_LINE_BYTES:
            raise PayloadTooLarge(len(line), MAX_TURN_LINE_BYTES)  # before a broken pipe
        state = self._turn = _TurnState(turn.message_id)
        if self._spec.meter is not None:  # a team budget crossed by another member stops it
            self._spec.meter.on_stop(turn.message_id, lambda: self._budget_stop(state))
        try:
            await self._write_raw(line)
            await on_sent()
            await self._await_turn_end(state)
        finally:
            self._turn = None
        if state.error is not None:
            raise state.error
        assert state.result is not None
        return self._turn_result(state)

    async def _await_turn_end(self, state: _TurnState) -> None:
        idle_timeout = self._spec.turn_idle_timeout
        while not state.done.is_set():
            if self._asking:  # the operator may take as long as they like
                self._last_output = time.monotonic()
            remaining = self._last_output + idle_timeout - time.monotonic()
            if remaining <= 0:
                await self._unstick(state, idle_timeout)
                raise RuntimeStuck(self._spec.member, idle_timeout)
            with anyio.move_on_after(min(remaining, 1.0) if self._asking else remaining):
                await state.done.wait()

    async def _unstick(self, state: _TurnState, idle_timeout: float) -> None:
        """A turn silent for ``turn_idle_timeout``: interrupt it (protocols/claude.md §3.4); if
        the CLI does not end the turn within ``interrupt_grace``, kill the process (the supervisor
        restarts it). Either way the turn goes back to the queue."""
        log.warning("turn_stuck", team=self._spec.team, member=self._spec.member,
                    idle_timeout=idle_timeout, action="interrupt")
        if not await self._interrupt(state, "stuck: interrupting"):
            log.warning("turn_stuck", team=self._spec.team, member=self._spec.member,
                        idle_timeout=idle_timeout, action="kill")
            self._kill()

    async def _interrupt(self, state: _TurnState, activity: str) -> bool:
        """Ask the CLI to interrupt the turn; whether it ended within ``interrupt_grace``."""
        self._activity = activity
        try:
            with anyio.move_on_after(self._spec.interrupt_grace):
                await self._write({"type": "control_request",
                                   "request_id": self._next_request_id("interrupt"),
                                   "request": {"subtype": "interrupt"}})
                await state.done.wait()
        except RuntimeExited:
            pass
        finally:
            self._activity = None
        return state.done.is_set()

    def _turn_result(self, state: _TurnState) -> TurnResult:
        result = state.result or {}
        text = result.get("result")
        reply = text if isinstance(text, str) and text else "\n".join(state.texts)
        if result.get("subtype") == "error_max_budget_usd":
            raise BudgetReached(self._spec.member, "the CLI's --max-budget-usd backstop was "
                                "reached")
        if state.budget_stop and result.get("is_error"):  # a turn that ended first stands
            raise BudgetReached(self._spec.member, "the budget was reached during the turn")
        limit = _rate_limit_info(result) or state.rate_limit
        if result.get("is_error") and limit is not None:
            until = limit.get("resetsAt")
            raise RateLimited(self._spec.member, reply or "the account's usage limit was reached",
                              until=float(until) if isinstance(until, int | float) else None)
        if result.get("is_error"):
            status = result.get("api_error_status")
            message = reply or " ".join(str(e) for e in result.get("errors") or []) or (
                f"the turn ended with {result.get('subtype')}"
            )
            raise TurnFailed(
                self._spec.member, message,
                api_status=status if isinstance(status, int) else None,
                retryable=status in _RETRYABLE_API_STATUS,
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
            tool = str(event.get("tool_name") or "a tool")
            given = inputs.get(event.get("tool_use_id")) or {}
            target = str(given.get("file_path") or given.get("command") or given.get("path")
                         or "") if isinstance(given, dict) else ""
            message = str(event.get("message") or "")[:300]
            log.warning("permission_denied", team=self._spec.team, member=self._spec.member,
                        tool=tool, target=target[:300], message=message)
            notes.append(f"permission denied: {tool}" + (f" {target[:200]}" if target else "")
                         + (f": {message}" if message else ""))
        return tuple(notes)

    async def _write(self, obj: dict[str, Any]) -> None:
        await self._write_raw(encode_line(obj))

    async def _write_raw(self, line: bytes) -> None:
        """Write one line, within WRITE_TIMEOUT: a CLI that stops reading its stdin (the pipe
        stays full) is stuck — killed, so the turn goes back to the queue."""
        stdin = self._process.stdin
        assert stdin is not None
        try:
            with anyio.fail_after(WRITE_TIMEOUT):
                async with self._write_lock:
                    await stdin.send(line)
        except TimeoutError:
            log.warning("runtime_write_stuck", team=self._spec.team, member=self._spec.member,
                        bytes=len(line), write_timeout=WRITE_TIMEOUT)
            self._kill()
            raise RuntimeStuck(self._spec.member, WRITE_TIMEOUT) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise RuntimeExited(
                self._spec.member, self._process.returncode, self.stderr_tail()
            ) from exc

    def _kill(self) -> None:
        self.kill()

    async def probe(self, timeout: float) -> bool:
        """A control request the CLI answers itself, no model call (``mcp_status``: the real
        CLI answers ``{"mcpServers": [...]}`` in 0.1-0.3 s), answered within ``timeout``. A
        stopped process is given the whole deadline: one continued in time (SIGCONT, a
        debugger) answers and stays."""
        if not self.usable:
            return False
        request_id = self._next_request_id("probe")
        waiter = self._control[request_id] = anyio.Event()
        try:
            with anyio.move_on_after(timeout):
                await self._write({"type": "control_request", "request_id": request_id,
                                   "request": {"subtype": "mcp_status"}})
                await waiter.wait()
        except (RuntimeExited, RuntimeStuck):
            return False
        finally:
            self._control.pop(request_id, None)
            self._answers.pop(request_id, None)
        return waiter.is_set()

    def _next_request_id(self, kind: str) -> str:
        self._request_seq += 1
        return f"teamctl_{kind}_{self._request_seq}"

    async def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        try:
            async for line in iter_lines(self._process.stdout):
                self._last_output = time.monotonic()
                await self._handle_line(line)
                if self._unconfirmed and self._spec.approver is not None:
                    confirmed, self._unconfirmed = self._unconfirmed, []
                    for approval_id in confirmed:  # the tool ran, or the turn went on
                        await self._spec.approver.confirmed(approval_id)
        except LineTooLong as exc:
            log.error("runtime_protocol_error", team=self._spec.team, member=self._spec.member,
                      code=exc.code, error=exc.message)
            self._kill()
        finally:
            with anyio.CancelScope(shield=True):
                await self._process.wait()
            self._on_exit()

    async def _handle_line(self, line: bytes) -> None:
        try:
            event = decode_line(line)
        except ProtocolError as exc:
            log.warning("runtime_corrupt_line", member=self._spec.member, error=exc.message)
            return
        if event is None:
            if line.strip():
                log.info("runtime_noise", member=self._spec.member, bytes=len(line))
            return
        await self._dispatch(event)

    async def _dispatch(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "control_response":
            self._on_control_response(event)
        elif kind == "control_request":
            request = event.get("request") or {}
            if self._spec.approver is not None and self._tg is not None and \
                    isinstance(request, dict) and request.get("subtype") == "can_use_tool":
                self._tg.start_soon(self._ask_operator, event.get("request_id"), request)
            else:
                await self._deny_control_request(event)
        elif kind == "assistant" and self._turn is not None:
            self._turn.texts.extend(_assistant_texts(event))
            self._estimate(self._turn, event)
        elif kind == "rate_limit_event":
            self._on_rate_limit(event.get("rate_limit_info"))
        elif kind == "system" and event.get("subtype") == "permission_denied" and \
                self._turn is not None:
            self._turn.denied.append(event)
        elif kind == "result":
            if self._turn is not None:
                self._charge(self._turn, event)
                self._turn.finish(result=event)
            else:
                self._early_result = event

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
        if meter.reading(state.message_id, reading) and reading.estimate:
            self._budget_stop(state)

    def _budget_stop(self, state: _TurnState) -> None:
        """Interrupt the turn for a budget (once; a turn already over stands)."""
        if state.budget_stop or state.done.is_set() or self._tg is None:
            return
        state.budget_stop = True
        log.warning("turn_over_budget", team=self._spec.team, member=self._spec.member,
                    message_id=state.message_id, action="interrupt")
        self._tg.start_soon(self._stop_over_budget, state)

    async def _stop_over_budget(self, state: _TurnState) -> None:
        if not await self._interrupt(state, "budget reached: interrupting"):
            self._kill()

    def _on_rate_limit(self, info: Any) -> None:
        """``rate_limit_event`` (subscription logins): ``rejected`` holds the member until
        ``resetsAt``; anything else is logged (protocols: docs/costs.md)."""
        if not isinstance(info, dict):
            return
        status = info.get("status")
        log.info("rate_limits", team=self._spec.team, member=self._spec.member,
                 status=status, limit=info.get("rateLimitType"), resets_at=info.get("resetsAt"))
        if status != "rejected":
            return
        if self._turn is not None:
            self._turn.rate_limit = info
        until = info.get("resetsAt")
        if self._spec.meter is not None:
            self._spec.meter.rate_limited(
                float(until) if isinstance(until, int | float) else None,
                f"{info.get('rateLimitType') or 'usage'} limit reached")

    def _on_control_response(self, event: dict[str, Any]) -> None:
        response = event.get("response") or {}
        request_id = str(response.get("request_id"))
        waiter = self._control.pop(request_id, None)
        if waiter is not None:
            body = response.get("response")
            self._answers[request_id] = body if isinstance(body, dict) else {}
            waiter.set()

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
            await self._write(reply)

    async def _ask_operator(self, request_id: Any, request: dict[str, Any]) -> None:
        """A prompt of the ``ask`` profile: the operator decides (as long as it takes)."""
        approver = self._spec.approver
        assert approver is not None
        self._asking += 1
        try:
            asked = request_of(request)
            self._activity = f"waiting for the operator: {asked.tool}"
            answer = await approver.ask(asked)
        finally:
            self._asking -= 1
            self._last_output = time.monotonic()
            self._activity = None
        with suppress(RuntimeExited):
            await self._write(control_answer(request_id, request, answer))
            self._unconfirmed.append(answer.request_id)

    def _on_exit(self) -> None:
        code = self._process.returncode
        error: Exception = RuntimeExited(self._spec.member, code, self.stderr_tail())
        if self._turn is not None:
            self._turn.finish(error=error)
        self._exited.set()


def session_counter(session_id: str) -> str:
    """The ledger's name for a session's running total_cost_usd."""
    return f"claude-session:{session_id}"


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


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _assistant_texts(event: dict[str, Any]) -> list[str]:
    message = event.get("message") or {}
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
            and isinstance(b.get("text"), str)]
