"""The board's check runs inside its owner's boundary (orchestrator/daemon/board/_gate.py;
docs/board.md, "The check before done"; issue 44, item 3), in process on the daemon's own
core: the gate runs the command line the owner's host gives (``Host.confine``) with the
environment it gives, never the raw command; a check the boundary does not run is
``check_refused`` in the task's events with its fix, the task kept in progress. The real
bubblewrap runs it in tests/integration/test_check_boundary.py."""

from __future__ import annotations

import os
import shlex
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.config import TeamConfig
from orchestrator.contracts import Confined, SandboxUnavailable
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from runtimes.hosts.local.host import LocalHost
from tests.support.fakes import Core, FakeRuntime, core

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence
    from pathlib import Path

    from orchestrator.protocol.board import TaskEventDoc

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio
PY = shlex.quote(sys.executable)  # one word of a check command, from any checkout
# stands for bubblewrap: says it ran the command "inside", then runs it
WRAPPER = ("/bin/sh", "-c", 'echo "inside: $*"; exec "$@"', "wrapper")


@dataclass(frozen=True)
class ConfiningHost(LocalHost):
    """This machine, with ``confine`` as a test wants it: ``wrap`` in front of the command and
    ``extra_env`` added (a sandbox's line and its proxy variables), None (a host elsewhere),
    or ``SandboxUnavailable``; each call's argv and env kept."""

    wrap: tuple[str, ...] | None = WRAPPER
    extra_env: Mapping[str, str] = field(default_factory=lambda: {"CONFINED": "yes"})
    unavailable: bool = False
    calls: list[tuple[tuple[str, ...], dict[str, str]]] = field(default_factory=list)

    async def confine(self, argv: Sequence[str], *, env: Mapping[str, str],
                      workdir: Path | None = None) -> Confined | None:
        self.calls.append((tuple(argv), dict(env)))
        if self.unavailable:
            raise SandboxUnavailable("a", "bubblewrap (bwrap) is not installed")
        if self.wrap is None:
            return None
        return Confined((*self.wrap, *argv), {**env, **self.extra_env})


@asynccontextmanager
async def _running(tmp_path: Path, host: LocalHost, check: str,
                   env: dict[str, str] | None = None) -> AsyncIterator[Core]:
    config = TeamConfig.model_validate({
        "team": {"name": "web", "workdir": str(tmp_path)}, "board": {"check": check},
        "members": [{"name": "a", "runtime": "claude", "start_timeout": 5.0,
                     "env": env or {}}]})
    async with core(tmp_path, FakeRuntime(), hosts=lambda team, member: host) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        yield c


async def _complete(c: Core) -> tuple[str, list[TaskEventDoc]]:
    """A task of ``a``'s completed: its status and its events once the gate has decided."""
    assert c.built is not None
    board = c.built.board
    task = await board.create("web", "x", created_by=OPERATOR,
                              assignee=Assignee("a", c.supervisor.member("web", "a").epoch))
    with anyio.fail_after(20):
        await board.complete(task.id, by=Actor("a"), summary="did it")
    shown = await board.get(task.id)
    return shown.task.status, [e for e in shown.events if e.kind == "gate"]


def _note(events: list[TaskEventDoc]) -> str:
    assert events, "the gate left an event"
    return events[-1].note or ""


async def test_the_check_runs_the_line_the_owners_host_confines_it_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate asks the owner's host for the check's command line and runs that one, in the
    owner's workdir, with the host's environment: the member's minimal one (its own ``env``,
    none of the daemon's credentials) plus what the boundary adds. A relative program is the
    workdir's."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-DAEMON-ONLY")
    (tmp_path / "check.sh").write_text('#!/bin/sh\ntest "$CONFINED $OWN" = "yes mine"\n')
    (tmp_path / "check.sh").chmod(0o755)
    host = ConfiningHost()
    async with _running(tmp_path, host, "./check.sh --all", env={"OWN": "mine"}) as c:
        status, events = await _complete(c)
    assert status == "done", _note(events)
    [(argv, env)] = host.calls
    assert argv == (os.path.join(tmp_path, "./check.sh"), "--all")
    assert env["OWN"] == "mine" and "ANTHROPIC_API_KEY" not in env
    assert "PATH" in env and "TEAMCTL_HOME" not in env


async def test_a_check_failing_inside_reports_the_output_the_confined_line_printed(
        tmp_path: Path) -> None:
    """What the owner is told is the output of the line the host gave (here the wrapper's
    "inside:" line and the check's own), its exit status, the task kept in progress."""
    fail = f"{PY} -c \"import os; print('boom', os.environ['CONFINED']); raise SystemExit(3)\""
    async with _running(tmp_path, ConfiningHost(), fail) as c:
        status, events = await _complete(c)
    assert status == "in_progress"
    note = _note(events)
    assert "failed (exit 3)" in note and "inside: " in note and "boom yes" in note


@pytest.mark.parametrize(("host", "reason", "fix"), [
    (ConfiningHost(wrap=None), "a runs on another host", "review_by"),
    (ConfiningHost(unavailable=True), "its sandbox cannot be made here",
     "apt-get install bubblewrap"),
    (ConfiningHost(wrap=("/bin/sh", "-c", 'echo "bwrap: execvp $1: No such file or '
                         'directory"; exit 1', "bwrap")),
     "'make' is not found inside its sandbox (bwrap: execvp make", "sandbox_ro"),
    (ConfiningHost(wrap=("/bin/sh", "-c", "echo \"bwrap: Can't find source path /w: No such "
                         "file or directory\"; exit 1", "bwrap")),
     "its sandbox could not be made (bwrap: Can't find source path", "teamctl doctor"),
], ids=["elsewhere", "no-bubblewrap", "not-inside", "no-source"])
async def test_a_check_the_boundary_does_not_run_is_refused_with_its_reason_and_fix(
        tmp_path: Path, host: ConfiningHost, reason: str, fix: str) -> None:
    """An owner whose host runs nothing here, a sandbox that cannot be made, bubblewrap's own
    refusal (the program not there, a source path missing): ``check_refused`` in the task's
    events with the reason and the fix, logged once, the task in progress — never the
    command run some other way."""
    with capture_logs() as logs:
        async with _running(tmp_path, host, "make test") as c:
            status, events = await _complete(c)
    assert status == "in_progress"
    note = _note(events)
    assert note.startswith("check_refused: the check 'make test' did not run as a: ")
    assert reason in note and fix in note
    refused = [e for e in logs if e["event"] == "task_check_refused"]
    assert [e["code"] for e in refused] == ["check_refused"]


async def test_an_unconfined_checks_own_bwrap_like_line_is_its_failure_not_a_refusal(
        tmp_path: Path) -> None:
    """Only a line the boundary added can be its refusal: an unsandboxed member's check that
    prints "bwrap: ..." and fails is a failed check, reported as such."""
    fake = f"{PY} -c \"print('bwrap: execvp make: No such file or directory'); exit(1)\""
    async with _running(tmp_path, LocalHost(), fake) as c:
        status, events = await _complete(c)
    assert status == "in_progress"
    assert "failed (exit 1)" in _note(events)
    assert not _note(events).startswith("check_refused")
