"""The supervisor, in process: readiness, restarts by policy against a manual clock, fatal,
restart clearing it, stop order. What the subprocess tests prove in seconds, in milliseconds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.errors import MemberStartFailed, NotFound
from tests.support.fakes import FakeRuntime, ManualClock, core, team_config
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio


async def _launch(c: Core, tmp_path: Path, *members: dict[str, object]) -> None:
    config = team_config(tmp_path, *(members or ({"name": "lead"},)))
    await c.teams.launch(config, "team.toml", wait=True, timeout=10)


async def _until(c: Core, member: str, predicate: object) -> None:
    """Wait (on the member's change events, with a deadline) until ``predicate(state)``."""
    with anyio.fail_after(10):
        while True:
            state = c.supervisor.member("web", member)
            changed = state.changed()
            if predicate(state):  # type: ignore[operator]
                return
            await changed.wait()


async def test_a_member_is_ready_after_its_runtime_opened(tmp_path: Path) -> None:
    async with core(tmp_path) as c:
        await _launch(c, tmp_path)
        [state] = c.supervisor.members("web")
        assert (state.launch, state.live, state.readiness) == ("running", "alive", "ready")
        assert state.session_id == "fake-session-" + str(c.runtime.opened[0].number)


async def test_a_crash_loop_backs_off_by_the_policy_then_goes_fatal(tmp_path: Path) -> None:
    """Each exit restarts after the policy's delay (×2, ±10 %); more than max_restarts in the
    window is fatal — and then nothing starts again."""
    clock = ManualClock()
    runtime = FakeRuntime()
    async with core(tmp_path, runtime, clock=clock) as c:
        await _launch(c, tmp_path, {"name": "lead", "backoff": [1.0, 60.0], "max_restarts": 3})
        for expected in range(1, 5):
            runtime.opened[-1].exit(1)
            if expected <= 3:
                await _until(c, "lead", lambda s, n=expected: s.restarts == n
                             and s.launch == "running")
        await _until(c, "lead", lambda s: s.launch == "fatal")
        assert len(runtime.opened) == 4, "one start and exactly three restarts"
        for delay, nominal in zip(clock.sleeps, (1.0, 2.0, 4.0), strict=True):
            assert nominal * 0.9 <= delay <= nominal * 1.1
        state = c.supervisor.member("web", "lead")
        assert "more than 3 restarts" in (state.error or "")
        await all_blocked()
        assert len(runtime.opened) == 4, "fatal: no fifth start"


async def test_restarts_spread_over_more_than_the_window_never_go_fatal(tmp_path: Path) -> None:
    clock = ManualClock()
    runtime = FakeRuntime()
    async with core(tmp_path, runtime, clock=clock) as c:
        await _launch(c, tmp_path, {"name": "lead", "max_restarts": 1,
                                    "restart_window": 300.0})
        for n in range(1, 4):
            clock.advance(700)  # up for more than the window (and the 600 s reset)
            runtime.opened[-1].exit(1)
            await _until(c, "lead", lambda s, n=n: s.restarts == n and s.launch == "running")
        assert all(0.9 <= d <= 1.1 for d in clock.sleeps), "the backoff was reset each time"


async def test_a_clean_exit_stops_an_on_failure_member(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path)
        runtime.opened[-1].exit(0)
        await _until(c, "lead", lambda s: s.launch == "stopped")
        assert len(runtime.opened) == 1


async def test_a_start_failure_is_fatal_with_its_reason(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    runtime.start_error = MemberStartFailed("lead", "no answer to initialize within 5s")
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "max_restarts": 0})
        state = c.supervisor.member("web", "lead")
        assert state.launch == "fatal" and state.readiness == "not_ready"
        assert "no answer to initialize" in (state.error or "")


async def test_restart_clears_fatal_and_starts_again(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    runtime.start_error = MemberStartFailed("lead", "broken")
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "max_restarts": 0})
        runtime.start_error = None
        status = await c.teams.restart(None, "lead")
        [member] = status.members
        assert (member.launch, member.readiness, member.restarts) == ("running", "ready", 1)


async def test_stop_stops_members_in_reverse_start_order(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "a"}, {"name": "b"}, {"name": "c"})
        order: list[str] = []
        for process in runtime.opened:
            original = process.exit

            def exit_and_note(code: int | None, process=process, original=original) -> None:
                if process.exit_code is None:
                    order.append(process.spec.member)
                original(code)

            process.exit = exit_and_note  # type: ignore[method-assign]
        assert await c.teams.stop("web") == ["web"]
        assert order == ["c", "b", "a"]
        with pytest.raises(NotFound):
            c.supervisor.member("web", "a")


async def test_the_session_reported_by_the_runtime_is_recorded(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    async with core(tmp_path, runtime) as c:
        await _launch(c, tmp_path, {"name": "lead", "backoff": [0.01, 0.1]})  # restart at once
        first = c.runtime.opened[0].session_id
        assert await c.store.session_id("web", "lead") == first
        runtime.opened[-1].exit(1)
        await _until(c, "lead", lambda s: s.restarts == 1 and s.launch == "running")
        assert runtime.opened[-1].spec.session_id == first, "restarted on the same session"


async def test_recycling_after_recycle_turns_reopens_without_the_restart_policy(
        tmp_path: Path) -> None:
    """A planned recycle: the process is closed and opened again on the same session, the
    queued message waits for the new one, and nothing counts as a restart (max_restarts = 0
    would make any restart fatal)."""
    async with core(tmp_path) as c:
        await _launch(c, tmp_path, {"name": "lead", "recycle_turns": 1, "max_restarts": 0,
                                    "restart": "never"})
        for text in ("one", "two"):
            result = await c.teams.send(None, "lead", text, wait=True, timeout=10)
            assert result.state == "answered"  # type: ignore[union-attr]
        await _until(c, "lead", lambda s: s.recycles == 2 and s.readiness == "ready")
        state = c.supervisor.member("web", "lead")
        assert (state.launch, state.restarts, state.last_exit) == ("running", 0, None)
        assert [p.exit_code for p in c.runtime.opened] == [0, 0, None]
        sessions = {p.spec.session_id for p in c.runtime.opened[1:]}
        assert sessions == {state.session_id}, "each new process resumes the session"


def test_recycle_reason_counts_turns_memory_and_children() -> None:
    import os
    import subprocess

    from orchestrator.config import MemberConfig
    from orchestrator.daemon.members._supervisor import recycle_reason
    from runtimes.kit.base import process_tree

    member = MemberConfig(name="x", runtime="codex", recycle_turns=3, recycle_rss_mb=0,
                          recycle_children=1)
    assert recycle_reason(member, None, 2) is None
    assert "3 turns (recycle_turns = 3)" in (recycle_reason(member, None, 3) or "")
    children = [subprocess.Popen(["sleep", "30"]) for _ in range(2)]
    try:
        tree = process_tree(os.getpid())
        assert tree is not None and tree.children >= 2 and tree.rss_bytes > 2**20
        assert "child processes (recycle_children = 1)" in (
            recycle_reason(member, os.getpid(), 0) or "")
        heavy = member.model_copy(update={"recycle_children": 0, "recycle_rss_mb": 1})
        assert "recycle_rss_mb = 1" in (recycle_reason(heavy, os.getpid(), 0) or "")
        off = member.model_copy(update={"recycle_children": 0, "recycle_turns": 0})
        assert recycle_reason(off, os.getpid(), 10_000) is None, "0: never"
    finally:
        for child in children:
            child.kill()
            child.wait()
    assert process_tree(children[0].pid) is None, "a process that is gone"


def test_process_tree_scans_proc_once_for_many_members(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh /proc scan per finished turn was half the daemon's time under a 100-member
    fan-out: within ``max_age`` of a full scan only processes that appeared since are read — and
    a child born a moment ago is still counted (the recycle check after its turn sees it)."""
    import builtins
    import os
    import subprocess

    from orchestrator import processes

    seen = {f"/proc/{entry.name}/stat" for entry in os.scandir("/proc") if entry.name.isdigit()}
    assert processes.process_tree(os.getpid()) is not None  # a full scan
    reads: list[str] = []
    real_open = builtins.open

    def counting_open(path: object, *args: object, **kwargs: object) -> object:
        if str(path).endswith("/stat"):
            reads.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", counting_open)
    before = processes.process_tree(os.getpid(), max_age=3600.0)
    # other tests' processes may appear meanwhile (the suite runs in parallel): those are read,
    # but never a process the full scan already read
    assert before is not None and not seen & set(reads), "no stat file read again"
    child = subprocess.Popen(["sleep", "30"])
    try:
        after = processes.process_tree(os.getpid(), max_age=3600.0)
        assert after is not None and after.children == before.children + 1
        assert f"/proc/{child.pid}/stat" in reads and len(reads) < 10, "only the newcomers"
    finally:
        child.kill()
        child.wait()
    gone = processes.process_tree(os.getpid(), max_age=3600.0)
    assert gone is not None and gone.children == before.children, "a gone process is dropped"


def test_a_busy_members_tree_is_measured_at_most_once_per_recycle_check_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Walking /proc after every turn was a tenth of the daemon's time under a fan-out: the
    memory and children limits are measured at most every ``recycle_check_interval`` seconds
    (default 5), the turn limit after every turn; 0 measures after every turn."""
    import os
    from types import SimpleNamespace

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.members import _supervisor as supervisor
    from orchestrator.daemon.members.state import LaunchState, MemberState
    from orchestrator.processes import TreeUsage

    measured: list[int] = []

    reuses: list[float] = []

    def tree(pid: int, *, max_age: float = 0.0, reuse: float = 0.0) -> TreeUsage:
        measured.append(pid)
        reuses.append(reuse)
        return TreeUsage(rss_bytes=0, children=0)

    monkeypatch.setattr(supervisor, "process_tree", tree)
    from runtimes.hosts.local.host import LocalHost

    def running(**member: object) -> MemberState:
        team = TeamConfig.model_validate({"team": {"name": "t"}, "members": [
            {"name": "x", "runtime": "claude", **member}]})
        state = MemberState(team="t", member=team.resolved(team.members[0]), workdir="/",
                            host=LocalHost())
        state.move(LaunchState.STARTING, "test")
        state.move(LaunchState.RUNNING, "test")
        return state

    state = running(recycle_turns=3)
    process = SimpleNamespace(usable=True, pid=os.getpid())
    for _ in range(2):
        supervisor.Supervisor._turn_ended(state, process)  # type: ignore[arg-type]
    assert measured == [os.getpid()] and state.launch_state is LaunchState.RUNNING
    supervisor.Supervisor._turn_ended(state, process)  # type: ignore[arg-type]
    assert state.launch_state is LaunchState.RECYCLING and "3 turns" in (state.why or ""), \
        "turns: every turn"
    state = running(recycle_check_interval=0.0, recycle_turns=0)
    for _ in range(2):
        supervisor.Supervisor._turn_ended(state, process)  # type: ignore[arg-type]
    assert len(measured) == 3
    assert reuses == [1.0, 0.0, 0.0], "measured every turn: a fresh listing of /proc each time"


def test_a_hundred_members_checks_share_one_listing_of_proc(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a 100-member fan-out, twenty recycle checks a second each listed /proc (a fifth of
    the daemon's CPU): checks within ``reuse`` seconds of a listing share it; ``reuse=0`` (the
    default) still lists /proc now, so a process born a moment ago is seen."""
    import os
    import subprocess

    from orchestrator import processes

    listings: list[object] = []
    real_scandir = os.scandir

    def counting_scandir(path: object) -> object:
        listings.append(path)
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", counting_scandir)
    first = processes.process_tree(os.getpid(), max_age=3600.0, reuse=3600.0)
    assert first is not None
    for _ in range(99):  # the tree is the shared listing's; its RSS is read now (it moves)
        again = processes.process_tree(os.getpid(), max_age=3600.0, reuse=3600.0)
        assert again is not None and again.children == first.children
    assert len(listings) <= 1, "one listing for a hundred checks"
    child = subprocess.Popen(["sleep", "30"])
    try:
        fresh = processes.process_tree(os.getpid(), max_age=3600.0)
        assert first is not None and fresh is not None
        assert fresh.children == first.children + 1, "reuse=0 lists /proc now"
    finally:
        child.kill()
        child.wait()
