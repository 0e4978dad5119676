"""Codex over ``codex exec --json`` (protocols/codex.md, codex 0.171.0).

A Codex member is a Codex *thread*. There is no long-lived process: each turn runs

    codex [member args] exec --json --skip-git-repo-check -C WORKDIR [-m MODEL]
          [resume] [--image=PATH]... [THREAD_ID] -

with the prompt written on stdin and stdin then closed (an open stdin blocks codex forever).
The first turn's ``thread.started`` gives the thread id; later turns ``resume`` it by id (never
``--last``, which silently starts a new thread when none matches). ``--image=PATH`` is used,
never the bare variadic flag, which swallows the prompt and ``-``.

A turn ends at ``turn.completed`` (answered; the last ``agent_message`` is the reply) or
``turn.failed`` (failed with the API's message). Top-level ``error`` events are retry notices,
not terminal. A process that exits without a terminal event is ``runtime_exited``. ``usage`` is
cumulative per thread; each turn's difference is logged.

The member's ``CODEX_HOME`` and config.toml are the app-server's too (``_shared``).

Readiness: the executable answers ``--version`` within ``start_timeout``. Liveness: the turn's
process while one runs. Stop: the stop ladder on the running turn.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, assert_never

import anyio
import structlog

from orchestrator.contracts import (
    DocumentPart,
    ImagePart,
    LaunchSpec,
    LineTooLong,
    MemberStartFailed,
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
    map_exceptions,
)
from runtimes.codex._shared import (
    api_status,
    build_env,
    check_login,
    codex_member_home,
    report_item,
    sandbox_refusal,
)
from runtimes.codex.legend import legend
from runtimes.kit import retryable_status
from runtimes.kit.base import (
    OnSent,
    Spawner,
    StderrRing,
    drain_stderr,
    kill_group,
    on_host,
    stop_process,
    token_count,
    unwrap_group,
)
from runtimes.kit.documents import CODEX_WHY, refused
from runtimes.kit.framing import decode_line, iter_lines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from anyio.abc import Process

__all__ = ["CodexMember", "build_exec_argv", "open_exec"]

log = structlog.get_logger("teamctl.runtime.codex")

_UNKNOWN_THREAD = "no rollout found for thread id"
_EXIT_GRACE = 30.0


@asynccontextmanager
async def open_exec(spec: LaunchSpec, spawner: Spawner) -> AsyncIterator[CodexMember]:
    """Check the executable (``--version``) and the login; yield the member; stop its
    turn on exit."""
    version = await _version(spec)
    if spec.host.profile.checks_local_login:  # on a host, its own CLI says whether it is logged in
        check_login(spec, codex_member_home(spec))
    member = CodexMember(spec, spec.host.spawn, version)
    log.info("runtime_ready", team=spec.team, member=spec.member, version=version,
             session_id=spec.session_id, resumed=spec.session_id is not None)
    try:
        yield member
    finally:
        await member.close()

async def _version(spec: LaunchSpec) -> str:
    found = await spec.host.version(spec.executable, env=build_env(spec), cwd=spec.workdir,
                                    timeout=spec.start_timeout)
    if not found.get("found"):
        raise MemberStartFailed(spec.member, f"{spec.executable} is not installed on "
                                f"host {spec.host.name}; install it there, or set "
                                "command to its absolute path there")
    if found.get("error"):
        raise MemberStartFailed(spec.member, found["error"], found.get("stderr"))
    return str(found.get("version") or "")


def build_exec_argv(spec: LaunchSpec, *, thread_id: str | None,
                    images: list[Path]) -> list[str]:
    """The command line of one turn (the prompt goes on stdin: the trailing ``-``)."""
    argv = [spec.executable, *spec.args, "exec", "--json", "--skip-git-repo-check",
            "-C", str(spec.workdir)]
    if spec.model:
        argv += ["-m", spec.model]
    if spec.permissions == "full":
        argv.append("--dangerously-bypass-approvals-and-sandbox")
    if thread_id:
        argv.append("resume")
    argv += [f"--image={path}" for path in images]
    if thread_id:
        argv.append(thread_id)
    argv.append("-")
    return argv


class _Turn:
    def __init__(self) -> None:
        self.replies: list[str] = []
        self.notes: list[str] = []
        self.terminal: dict[str, Any] | None = None
        self.thread_id: str | None = None
        self.message_id = ""


def _nothing() -> None:
    """Nothing to forget: the probe was answered when it was sent."""


class CodexMember:
    """One Codex thread; one ``codex exec`` process per turn."""

    def __init__(self, spec: LaunchSpec, spawner: Spawner, version: str) -> None:
        self._spec = spec
        self._spawner = spawner
        self.version = version
        self._thread_id = spec.session_id
        self.resumed = spec.session_id is not None  # every exec resumes the recorded thread
        self._process: Process | None = None
        self._ring = StderrRing()
        self._closed = anyio.Event()
        self._exit_code: int | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def session_id(self) -> str | None:
        return self._thread_id

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    @property
    def healthy(self) -> bool:
        return self.usable

    @property
    def activity(self) -> str | None:
        return None

    @property
    def usable(self) -> bool:
        return not self._closed.is_set()

    def stderr_tail(self) -> list[str]:
        return self._ring.tail()

    async def wait(self) -> int | None:
        """A Codex member has no process between turns: it runs until it is stopped."""
        await self._closed.wait()
        return self._exit_code

    async def probe(self, timeout: float) -> bool:
        """No process lives between turns, so nothing can freeze: an idle exec member is
        alive while it is open (its executable was found at start; each turn is its own
        process, watched by the turn's idle timeout). On an SSH host the supervisor also
        asks the way to the host (``Host.answers``: its master)."""
        return self.usable

    def send_probe(self, answered: Callable[[], None]) -> Callable[[], None] | None:
        """The same, at once: answered while open (nothing to write)."""
        if not self.usable:
            return None
        answered()
        return _nothing

    def kill(self) -> None:
        if self._process is not None:
            kill_group(self._process)

    async def close(self) -> None:
        self._closed.set()
        if self._process is not None:
            self._exit_code = await stop_process(self._process)

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        text, images = self._split(await on_host(self._spec, turn))
        sent = False

        async def once() -> None:  # a retry on a fresh thread is the same delivery
            nonlocal sent
            if not sent:
                sent = True
                await on_sent()

        try:
            return await self._run(self._prompt(text), images, once, turn)
        except SessionLost:
            lost, self._thread_id, self.resumed = self._thread_id, None, False
            log.warning("session_lost", team=self._spec.team, member=self._spec.member,
                        lost_session=lost, reason="codex has no rollout for this thread")
            if turn.continues:  # a continuation means nothing to a new thread: sent whole
                raise
            return await self._run(self._prompt(text), images, once, turn)

    def _prompt(self, text: str) -> str:
        """``codex exec`` has no system-prompt flag: the role opens each new thread."""
        if self._thread_id or not self._spec.prompt:
            return text
        return f"{self._spec.prompt}\n\n{text}"

    def _split(self, turn: Turn) -> tuple[str, list[Path]]:
        texts: list[str] = []
        images: list[Path] = []
        for part in turn.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ImagePart):
                if part.path is None or "," in str(part.path):
                    raise TurnFailed(self._spec.member, "an image file path codex cannot take "
                                     "(missing, or with a comma)", api_status=None,
                                     retryable=False)
                images.append(part.path)
            elif isinstance(part, DocumentPart):  # never planned: document_mimes is empty
                raise refused(self._spec.member, part, CODEX_WHY)
            else:
                assert_never(part)
        mapping = legend(turn)
        if mapping is not None:  # right after the message's own text
            texts.insert(min(1, len(texts)), mapping)
        return "\n\n".join(texts), images

    async def _run(self, prompt: str, images: list[Path], on_sent: OnSent,
                   turn: Turn) -> TurnResult:
        argv = build_exec_argv(self._spec, thread_id=self._thread_id, images=images)
        env = build_env(self._spec)
        if turn.traceparent and "otel" in self._spec.config:
            # its own telemetry's spans continue teamctl's attempt span (one process a turn:
            # codex reads TRACEPARENT at its start; docs/telemetry.md)
            env["TRACEPARENT"] = turn.traceparent
        try:
            process = await self._spawner(argv, cwd=self._spec.workdir, env=env)
        except OSError as exc:
            raise RuntimeExited(self._spec.member, None, [f"cannot start codex: {exc}"]) from exc
        self._process, self._ring = process, StderrRing()
        state = _Turn()
        state.message_id = turn.message_id
        try:
            with unwrap_group():
                await self._converse(process, prompt, on_sent, state)
        finally:
            if process.returncode is None:
                await stop_process(process, eof_timeout=1.0)
            self._exit_code = process.returncode
            self._process = None
        return self._outcome(state, process.returncode)

    async def _converse(self, process: Process, prompt: str, on_sent: OnSent,
                        state: _Turn) -> None:
        """Write the prompt, then read the turn's events to its end (stderr drained aside)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain_stderr, process, self._ring)
            await self._send_prompt(process, prompt)
            await on_sent()
            await self._read_events(process, state)
            tg.cancel_scope.cancel()

    async def _send_prompt(self, process: Process, prompt: str) -> None:
        assert process.stdin is not None
        try:
            await process.stdin.send(prompt.encode())
            await process.stdin.aclose()  # codex reads the prompt until EOF
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            await process.wait()
            raise RuntimeExited(self._spec.member, process.returncode,
                                self._ring.tail()) from exc

    async def _read_events(self, process: Process, state: _Turn) -> None:
        assert process.stdout is not None
        idle = self._spec.turn_idle_timeout
        lines = iter_lines(process.stdout).__aiter__()
        while True:
            with anyio.move_on_after(idle) as scope:
                try:
                    line = await lines.__anext__()
                except StopAsyncIteration:
                    break
                except LineTooLong as exc:
                    kill_group(process)
                    raise RuntimeExited(self._spec.member, None,
                                        [f"protocol error: {exc.message}"]) from exc
            if scope.cancelled_caught:
                log.warning("turn_stuck", team=self._spec.team, member=self._spec.member,
                            idle_timeout=idle)
                kill_group(process)
                raise RuntimeStuck(self._spec.member, idle)
            self._handle(line, state)

        def no_exit(_exc: BaseException) -> RuntimeExited:
            kill_group(process)
            return RuntimeExited(self._spec.member, None, [
                f"codex closed its output but did not exit within {_EXIT_GRACE:g}s"])

        with map_exceptions({TimeoutError: no_exit}), anyio.fail_after(_EXIT_GRACE):
            await process.wait()

    def _handle(self, line: bytes, state: _Turn) -> None:
        try:
            event = decode_line(line)
        except ProtocolError as exc:
            log.warning("runtime_corrupt_line", member=self._spec.member, error=exc.message)
            return
        if event is None:
            return
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self._thread_id = state.thread_id = event["thread_id"]
        elif kind == "item.completed":
            self._on_item(event.get("item") or {}, state)
            self._tool(event.get("item"), state, completed=True)
        elif kind in ("item.started", "item.updated"):
            self._tool(event.get("item"), state, completed=False)
        elif kind in ("turn.completed", "turn.failed"):
            state.terminal = event
        elif kind == "error":
            log.info("runtime_retry_notice", team=self._spec.team, member=self._spec.member,
                     message=str(event.get("message", ""))[:300])

    def _on_item(self, item: dict[str, Any], state: _Turn) -> None:
        if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
            state.replies.append(item["text"])
        elif item.get("type") == "command_execution" and item.get("exit_code") not in (0, None):
            note = sandbox_refusal(self._spec, item.get("command"), item.get("aggregated_output"))
            state.notes += [note] if note else []
        elif item.get("type") == "error":
            log.info("runtime_warning", team=self._spec.team, member=self._spec.member,
                     message=str(item.get("message", ""))[:300])

    def _tool(self, item: Any, state: _Turn, *, completed: bool) -> None:
        report_item(self._spec, state.message_id, item, completed=completed,
                    names=_TOOL_ITEMS, mcp="mcp_tool_call", arguments=_TOOL_ARGUMENTS)

    def _outcome(self, state: _Turn, exit_code: int | None) -> TurnResult:
        terminal = state.terminal
        if terminal is None:
            tail = self._ring.tail()
            if exit_code == 1 and any(_UNKNOWN_THREAD in line for line in tail):
                raise SessionLost(self._spec.member, self._thread_id,
                                  "codex has no rollout for this thread")
            raise RuntimeExited(self._spec.member, exit_code, tail)
        self._charge(state, terminal.get("usage"))
        if terminal["type"] == "turn.failed":
            message = str((terminal.get("error") or {}).get("message") or "the turn failed")
            if _USAGE_LIMIT in message:
                raise RateLimited(self._spec.member, message, until=None)
            status = api_status(message)
            retryable = retryable_status(status) or "stream disconnected" in message
            raise TurnFailed(self._spec.member, message, api_status=status,
                             retryable=retryable)
        return TurnResult(reply=state.replies[-1] if state.replies else "",
                          session_id=self._thread_id, notes=tuple(state.notes))

    def _charge(self, state: _Turn, usage: Any) -> None:
        """``turn.completed.usage`` is the thread's running total (protocols/codex.md §9.4):
        the ledger charges its increase since it last settled this thread."""
        if not isinstance(usage, dict) or self._spec.meter is None or not state.message_id:
            return
        total = TokenUsage(**{k: token_count(usage, k) for k in TokenUsage.FIELDS})
        log.info("turn_usage", team=self._spec.team, member=self._spec.member,
                 thread_tokens=total.total)
        self._spec.meter.reading(state.message_id, UsageReading(
            tokens=total, model=self._spec.model, counter=f"codex-thread:{self._thread_id}"))


# exec's items that are tool calls (codex-rs/exec's ThreadItemDetails), each one's span name
_TOOL_ITEMS = {"command_execution": "shell", "file_change": "apply_patch",
               "mcp_tool_call": "mcp", "web_search": "web_search"}
_TOOL_ARGUMENTS = ("command", "changes", "arguments", "query")
_USAGE_LIMIT = "hit your usage limit"  # the CLI's words for a subscription's spent window

