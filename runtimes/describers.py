"""Described images (``describe_with``): one image, one side call through a vision runtime's
real CLI, for a teammate whose own model cannot see.

The side call has no tools, keeps no session and has its own deadline (``turn_idle_timeout``
of the spec it is given, for the whole call). It runs in a private, empty working directory,
so no project file (CLAUDE.md, AGENTS.md, .mcp.json) is read into it.

- Claude: ``claude -p`` with stream-json in and out, ``--tools ""`` (no built-in tool),
  ``--strict-mcp-config`` (no MCP server), ``--no-session-persistence`` (no transcript); the
  image goes as the same base64 ``image`` block a member turn uses; the ``result`` is the text.
- Codex: ``codex exec --json --ephemeral`` (no rollout file) in a read-only sandbox, the image
  by ``--image``; the last ``agent_message`` is the text. Codex has no switch that removes its
  shell tool: the read-only sandbox and the empty directory are what bound it.
"""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.contracts import (
    Description,
    ImagePart,
    LaunchSpec,
    MemberStartFailed,
    TextPart,
    TokenUsage,
    Turn,
    TurnFailed,
    usd,
)
from runtimes.claude import runtime as claude
from runtimes.codex import _shared as codex
from runtimes.kit import retryable_status
from runtimes.kit.base import (
    Spawner,
    StderrRing,
    drain_stderr,
    kill_group,
    spawn_process,
    token_count,
)
from runtimes.kit.framing import decode_line, encode_line, iter_lines

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

__all__ = ["ClaudeDescriber", "CodexDescriber"]


@dataclass(frozen=True)
class _Ran:
    events: list[dict[str, Any]]
    code: int | None
    stderr: list[str]
    seconds: float


async def _run_once(spawner: Spawner, spec: LaunchSpec, argv: Sequence[str], *,
                    env: Mapping[str, str], stdin: bytes) -> _Ran:
    """Start ``argv``, write ``stdin`` and close it, collect its JSON lines until it exits —
    within ``spec.turn_idle_timeout`` for everything; the process group is killed at the
    deadline or on any error, and always reaped."""
    started = time.monotonic()
    try:
        process = await spawner(argv, cwd=spec.workdir, env=env)
    except OSError as exc:
        raise MemberStartFailed(spec.member, f"cannot start the describer {argv[0]}: "
                                f"{exc.strerror}") from exc
    ring = StderrRing()
    events: list[dict[str, Any]] = []
    try:
        with anyio.move_on_after(spec.turn_idle_timeout) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain_stderr, process, ring)
                assert process.stdin is not None and process.stdout is not None
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    await process.stdin.send(stdin)
                    await process.stdin.aclose()
                async for line in iter_lines(process.stdout):
                    event = decode_line(line)
                    if event is not None:
                        events.append(event)
                await process.wait()
        if scope.cancelled_caught:
            raise TurnFailed(spec.member, f"the describer ({spec.model}) did not answer within "
                             f"{spec.turn_idle_timeout:g}s", api_status=None, retryable=True)
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                kill_group(process)
            await process.wait()
    return _Ran(events, process.returncode, ring.tail(5), time.monotonic() - started)


def _failed(spec: LaunchSpec, ran: _Ran, what: str, *, status: int | None = None) -> TurnFailed:
    tail = "; ".join(ran.stderr)[-400:]
    return TurnFailed(spec.member, f"the describer ({spec.model}) {what}"
                      + (f" (exit {ran.code})" if ran.code else "")
                      + (f": {tail}" if tail else ""), api_status=status,
                      retryable=retryable_status(status, unknown=True))


class ClaudeDescriber:
    def __init__(self, *, spawner: Spawner = spawn_process) -> None:
        self._spawner = spawner

    async def describe(self, spec: LaunchSpec, image: ImagePart,
                       instruction: str) -> Description:
        argv = [spec.executable, *spec.args, "-p", "--input-format", "stream-json",
                "--output-format", "stream-json", "--verbose", "--no-session-persistence",
                "--tools", "", "--strict-mcp-config", "--permission-mode", "dontAsk"]
        if spec.model:
            argv += ["--model", spec.model]
        spec.host.place(claude.home_dirs(spec))
        env = claude.build_env(spec, claude.private_dirs(spec))
        line = encode_line(claude.user_line(Turn("describe", (TextPart(instruction), image))))
        ran = await _run_once(self._spawner, spec, argv, env=env, stdin=line)
        result = next((e for e in reversed(ran.events) if e.get("type") == "result"), None)
        if result is None:
            raise _failed(spec, ran, "ended without an answer")
        text = result.get("result")
        if result.get("is_error") or not isinstance(text, str) or not text.strip():
            status = result.get("api_error_status")
            raise _failed(spec, ran, f"failed: {str(text or result.get('errors'))[:300]}",
                          status=status if isinstance(status, int) else None)
        return Description(text.strip(), ran.seconds, claude.anthropic_tokens(result.get("usage")),
                           usd(result.get("total_cost_usd"), "total_cost_usd"))


class CodexDescriber:
    def __init__(self, *, spawner: Spawner = spawn_process) -> None:
        self._spawner = spawner

    async def describe(self, spec: LaunchSpec, image: ImagePart,
                       instruction: str) -> Description:
        path: Path | None = image.path
        if path is None:
            raise TurnFailed(spec.member, "the describer needs the image as a file",
                             api_status=None, retryable=False)
        argv = [spec.executable, *spec.args, "exec", "--json", "--ephemeral",
                "--skip-git-repo-check", "--sandbox", "read-only", "-C", str(spec.workdir)]
        if spec.model:
            argv += ["-m", spec.model]
        argv += [f"--image={path}", "-"]
        ran = await _run_once(self._spawner, spec, argv, env=codex.build_env(spec),
                              stdin=instruction.encode())
        texts = [str(e["item"]["text"]) for e in ran.events
                 if e.get("type") == "item.completed" and isinstance(e.get("item"), dict)
                 and e["item"].get("type") == "agent_message"
                 and isinstance(e["item"].get("text"), str)]
        done = next((e for e in ran.events if e.get("type") == "turn.completed"), None)
        if done is None or not texts or not texts[-1].strip():
            failed = next((e for e in ran.events if e.get("type") == "turn.failed"), None)
            message = str(((failed or {}).get("error") or {}).get("message") or
                          "ended without an answer")
            raise _failed(spec, ran, message[:300], status=codex.api_status(message))
        usage = done.get("usage")
        tokens = TokenUsage(**{k: token_count(usage, k) for k in TokenUsage.FIELDS}) \
            if isinstance(usage, dict) else None
        return Description(texts[-1].strip(), ran.seconds, tokens)
