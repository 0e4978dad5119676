"""The check before done (docs/board.md): ``Board.gate`` as the daemon runs it.

A completed task's ``check`` (else the team's ``[board] check``) runs in the owner's workdir
(its worktree, when it has one) **inside the owner's boundary**: the command line its host's
``confine`` gives — for a sandboxed owner, bubblewrap with the member's own mounts and network
rule (never teamctl's MCP socket); for an unsandboxed one, the command as the member would run
it. The check runs what the member wrote (its ``Makefile``, its tests), so it must never run
with more than the member's rights: run by the daemon as it stands, it was the operator's
(issue 44, attack 2). Argv by shell-like splitting, never a shell; the minimal environment a
member gets, plus the member's own ``env``; its own process group (bubblewrap's, whose pid
namespace dies with it), killed after ``check_timeout``; the last 60 KiB of its output kept,
control characters replaced, redacted. Exit 0 passes; a failure or a timeout keeps the task in
progress, and the output is both the gate's event in the task's lifetime and a message to the
owner. A check the boundary does not run — an owner on another host or in a pod, no sandbox
here, its command not found inside — is ``CheckRefused``: the task stays in progress with the
reason and the fix in its events. A check that passes (or none) sends the task to ``review``
when the team has ``review_by``: a reviewer member gets a message with the task and where its
diff is; ``review_by = "operator"`` leaves it in review for ``teamctl task review``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.config import check_argv
from orchestrator.contracts import SandboxUnavailable
from orchestrator.daemon.board._notices import Notice
from orchestrator.daemon.board._service import GateResult
from orchestrator.errors import CheckRefused
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import Confined
    from orchestrator.daemon.board._notices import Told
    from orchestrator.daemon.members import MemberState, Supervisor
    from orchestrator.daemon.teams import Teams
    from orchestrator.protocol.board import TaskDoc

    Tell = Callable[[int, Notice], Awaitable["Told | None"]]  # Board.tell
    Environ = Callable[[Mapping[str, str]], dict[str, str]]

__all__ = ["CheckRun", "Gates", "minimal_environ", "refused_inside", "run_check"]

log = structlog.get_logger("teamctl.board")

OUTPUT_BYTES = 60 * 1024  # the output kept: its end (a task's note is at most 64 KiB)
_READ_AFTER_EXIT = 1.0  # a child that keeps the output open after the check exited
_REAP = 5.0  # waiting for the killed check's process
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # a tab and a newline stay
_BOUNDARY = re.compile(r"(bwrap|sandbox_relay): \S")  # the boundary's own error line
# what a check inherits from the daemon (with LC_*): as a member gets, no credentials
_BASE = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM",
                   "TZ", "NO_COLOR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
                   "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"})


def minimal_environ(own: Mapping[str, str]) -> dict[str, str]:
    """The daemon's minimal variables, then the member's ``env`` (``own``)."""
    env = {k: v for k, v in os.environ.items() if k in _BASE or k.startswith("LC_")}
    env.update(own)
    return env


@dataclass(frozen=True)
class CheckRun:
    """How a check ended: its exit status (None: killed at its timeout) and output's end."""

    exit_code: int | None
    output: str
    timed_out: bool


async def run_check(argv: list[str], *, cwd: Path, env: Mapping[str, str],
                    timeout: float) -> CheckRun:
    """Run ``argv`` in its own process group, bounded by ``timeout`` (then the group is
    killed); the end of its output (stdout and stderr), readable and redacted."""
    kept: deque[bytes] = deque()
    size = 0
    process = await anyio.open_process(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       start_new_session=True)

    finished = anyio.Event()

    async def read() -> None:
        nonlocal size
        assert process.stdout is not None
        async for chunk in process.stdout:
            kept.append(chunk)
            size += len(chunk)
            while size - len(kept[0]) >= OUTPUT_BYTES:
                size -= len(kept.popleft())
        finished.set()

    try:
        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await process.wait()
                with anyio.move_on_after(_READ_AFTER_EXIT):  # a child may hold it open
                    await finished.wait()
                tg.cancel_scope.cancel()
    finally:
        _kill_group(process.pid)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_REAP):
            await process.wait()
        await process.aclose()
    text = b"".join(kept)[-OUTPUT_BYTES:].decode("utf-8", "replace")
    timed_out = scope.cancelled_caught
    return CheckRun(None if timed_out else process.returncode,
                    redact(_CONTROL.sub("?", text)), timed_out)


def refused_inside(run: CheckRun, member: str, command: str, program: str) -> None:
    """``CheckRefused`` when the run is the boundary's own refusal, not the check's: its whole
    output one line of bubblewrap's (``bwrap: execvp make: No such file or directory``, a
    source path missing) or of the network relay's (``sandbox_relay: cannot start ...``)."""
    lines = run.output.strip().splitlines()
    if run.exit_code in (0, None) or len(lines) != 1 or not _BOUNDARY.match(lines[0]):
        return
    if "execvp" in lines[0] or "cannot start" in lines[0]:
        raise CheckRefused(member, command, f"{program!r} is not found inside its sandbox "
                           f"({lines[0]})", "use a program the sandbox shows (a system "
                           "directory, its toolchain, its PATH) or add its directory with "
                           "sandbox_ro; 'teamctl doctor TEAMFILE' lists what it sees")
    raise CheckRefused(member, command, f"its sandbox could not be made ({lines[0]})",
                       "check that its workdir and sandbox paths exist ('teamctl doctor "
                       "TEAMFILE')")


def _kill_group(pid: int) -> None:
    """Kill the check's group: what it left running goes with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class Gates:
    """``gate`` (Board.gate) and ``gated`` (Board.on_gated: the owner or reviewer told)."""

    def __init__(self, teams: Teams, supervisor: Supervisor, tell: Tell, *,
                 environ: Environ = minimal_environ) -> None:
        """``tell``: an event about a task told to its owner (or the reviewer) and journaled
        against the task (``Board.tell``)."""
        self._teams = teams
        self._supervisor = supervisor
        self._tell_board = tell
        self._environ = environ

    async def gate(self, task: TaskDoc) -> GateResult:
        """Where the completed ``task`` goes: its check first, then the team's review."""
        config = self._teams.running(task.team)
        command = task.check or (None if config is None else config.board.check)
        passed = None
        if command is not None and task.owner is not None:
            passed = await self._check(task, command, config)
            if passed.status != "done":
                return passed
        reviewer = None if config is None else config.board.review_by
        if reviewer is not None:
            return GateResult("review", f"waiting on {reviewer}'s review" +
                              (f"; {passed.note}" if passed and passed.note else ""))
        return passed or GateResult("done", task.summary)

    async def _check(self, task: TaskDoc, command: str, config: TeamConfig | None
                     ) -> GateResult:
        assert task.owner is not None
        state = self._supervisor.member(task.team, task.owner)
        timeout = 600.0 if config is None else config.board.check_timeout
        started = time.monotonic()
        try:
            workdir, argv, confined = await self._confine(state, command)
            run = await run_check(list(confined.argv), cwd=workdir, env=confined.env,
                                  timeout=timeout)
            if confined.argv != tuple(argv):  # what bubblewrap (not the check) said
                refused_inside(run, task.owner, command, argv[0])
        except CheckRefused as exc:
            log.warning("task_check_refused", team=task.team, task=task.id, owner=task.owner,
                        code=exc.code, reason=exc.reason)
            return GateResult("in_progress", f"{exc.code}: {exc.message}")
        except (OSError, ValueError) as exc:
            return GateResult("in_progress", f"the check {command!r} could not start: {exc}")
        log.info("task_check", team=task.team, task=task.id, owner=task.owner,
                 exit=run.exit_code, timed_out=run.timed_out, output_chars=len(run.output),
                 confined=confined.argv != tuple(argv),
                 seconds=round(time.monotonic() - started, 4))
        if run.exit_code == 0:
            return GateResult("done", f"check {command!r} passed")
        how = f"did not finish within {timeout:g} s (killed)" if run.timed_out else \
            f"failed (exit {run.exit_code})"
        return GateResult("in_progress", f"the check {command!r} {how} in {workdir}; "
                          f"its output:\n{run.output}")

    async def _confine(self, state: MemberState, command: str
                       ) -> tuple[Path, list[str], Confined]:
        """The owner's workdir, the check's argv (a relative program: the workdir's, as the
        member names it) and the command line that runs it as the member: inside its sandbox,
        or as it is for an unsandboxed member; ``CheckRefused`` where its host runs nothing
        here or its sandbox cannot be made."""
        member = state.config.name
        workdir = state.host.local_path(state.workdir)
        argv = check_argv(command)
        if workdir is not None and os.sep in argv[0] and not os.path.isabs(argv[0]):
            argv[0] = os.path.join(workdir, argv[0])
        try:
            confined = None if workdir is None else await state.host.confine(
                argv, env=self._environ(state.config.env))
        except SandboxUnavailable as exc:
            raise CheckRefused(member, command, f"its sandbox cannot be made here "
                               f"({exc.reason})", "install bubblewrap (apt-get install "
                               "bubblewrap) where user namespaces are allowed; a sandboxed "
                               "member's check never runs outside its sandbox") from None
        if confined is None or workdir is None:
            raise CheckRefused(member, command, f"{member} runs on another host (checks run "
                               "on this machine only, as the member)", "leave this member's "
                               "tasks without a check and review them (review_by)")
        return Path(workdir), argv, confined

    async def gated(self, task: TaskDoc, result: GateResult) -> None:
        """Tell whoever must act: the owner when its task is back in progress (a failed
        check, a rejection) or was approved, the reviewer when it is in review."""
        owner = task.owner
        if task.status == "review":
            await self._ask_review(task)
        elif owner is not None and (result.status == "in_progress" or result.by is not None):
            verb = "is done" if result.status == "done" else "is not done yet"
            kind = "gate" if result.by is None else "review"
            await self._tell(task, None, kind,
                             f"teamctl: task T{task.id} ({task.title}) {verb}: {result.note}"
                             + ("" if result.status == "done" else
                                f"\n\nFix it, then call task_complete(id={task.id}, "
                                "summary=...) again."))

    async def _ask_review(self, task: TaskDoc) -> None:
        config = self._teams.running(task.team)
        reviewer = None if config is None else config.board.review_by
        if reviewer in (None, "operator"):
            log.info("task_review_wanted", team=task.team, task=task.id, reviewer="operator")
            return
        assert reviewer is not None
        where = ""
        if task.owner is not None:
            state = self._supervisor.member(task.team, task.owner)
            where = (f"\nIts changes: {task.owner}'s workdir {state.workdir} (teamctl diff "
                     f"--team {task.team} {task.owner} shows a worktree's diff).")
        await self._tell(task, reviewer, "review_asked",
                         f"teamctl: please review task T{task.id} by {task.owner}: "
                         f"{task.title}\n\nSummary: {task.summary or '(none)'}"
                         + (f"\nEvidence: {task.evidence}" if task.evidence else "") + where
                         + f"\n\nApprove with task_review(id={task.id}, approve=true, "
                         f"note=...) or reject with task_review(id={task.id}, approve=false, "
                         "note=why).")

    async def _tell(self, task: TaskDoc, to: str | None, kind: str, text: str) -> None:
        """Told once per transition (its source id: the task's state and when it moved)."""
        source = f"{kind}:T{task.id}:{task.state}:{task.updated_at!r}"
        try:
            await self._tell_board(task.id, Notice(source, kind, text, to=to))
        except Exception:  # the task moved; a message that could not be queued is logged
            log.exception("task_message_failed", team=task.team, member=to or task.owner)
