"""The board, live in the daemon's core (docs/board.md): leases that follow the supervisor's
launches, idle claimers handed the next ready task, the check before done, reviews, and the
current task in ``status`` — in process, on the daemon's own ``build_core`` around a fake
runtime (tests/support/fakes.py)."""

from __future__ import annotations

import re
import shlex
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.config import TeamConfig
from orchestrator.contracts import TextPart
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from orchestrator.errors import TaskRefused
from tests.support.fakes import Core, FakeRuntime, core

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from orchestrator.daemon.board import Board

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio
PY = shlex.quote(sys.executable)  # one word of a check command, from any checkout


def _team(tmp_path: Path, members: list[dict[str, Any]], **board: Any) -> TeamConfig:
    rows = [{"runtime": "claude", "start_timeout": 5.0, "backoff": [0.01, 0.01], **m}
            for m in members]
    return TeamConfig.model_validate({"team": {"name": "web", "workdir": str(tmp_path)},
                                      "board": board, "members": rows})


@asynccontextmanager
async def _running(tmp_path: Path, members: list[dict[str, Any]], **board: Any
                   ) -> AsyncIterator[Core]:
    async with core(tmp_path, FakeRuntime(), lease_check_interval=0.01) as c:
        await c.teams.launch(_team(tmp_path, members, **board), "t.toml", wait=True,
                             timeout=10)
        yield c


def _board(c: Core) -> Board:
    assert c.built is not None
    return c.built.board


async def _until(c: Core, ready: Callable[[], Awaitable[bool]], timeout: float = 10) -> None:
    """Wait (bounded) on the change feed until ``ready()``."""
    assert c.built is not None
    changes = c.built.changes
    with anyio.fail_after(timeout):
        while True:
            version = changes.version
            if await ready():
                return
            await changes.wait(version, 1.0)


def _texts(c: Core, member: str) -> list[str]:
    return [" ".join(p.text for p in t.parts if isinstance(p, TextPart))
            for process in c.runtime.opened if process.spec.member == member
            for t in process.turns]


async def _turn_with(c: Core, member: str, needle: str) -> str:
    async def seen() -> bool:
        return any(needle in t for t in _texts(c, member))
    await _until(c, seen)
    return next(t for t in _texts(c, member) if needle in t)


async def _ready(c: Core, member: str, timeout: float = 10) -> None:
    """Wait (bounded) until the member's turn is over: it reads ``ready`` (``_turn_with``
    returns as soon as the turn is sent, while the member is still busy in it)."""
    state = c.supervisor.member("web", member)
    with anyio.fail_after(timeout):
        while state.readiness != "ready":
            await state.changed().wait()


async def _status(c: Core, task_id: int) -> tuple[str, str | None, int | None]:
    task = (await _board(c).get(task_id)).task
    return task.status, task.owner, task.epoch


# -- the team file -------------------------------------------------------------------------------

@pytest.mark.parametrize(("board", "member", "says"), [
    ({"check": "make 'test"}, {}, "does not split into words"),
    ({"review_by": "nobody"}, {}, "board.review_by: no member named 'nobody'"),
    ({}, {"max_tasks": 0}, "max_tasks"),
    ({"check_timeout": 7200}, {}, "check_timeout"),
])
def test_bad_board_keys_are_refused_naming_the_key(tmp_path: Path, board: dict[str, Any],
                                                   member: dict[str, Any], says: str) -> None:
    """The board's team-file keys are validated with the file: a check whose quotes do not
    balance, a reviewer who is not a member, max_tasks 0, a check_timeout past an hour."""
    with pytest.raises(ValueError, match=re.escape(says)):
        _team(tmp_path, [{"name": "a", **member}], **board)


# -- leases follow liveness ---------------------------------------------------------------------

async def test_a_dead_owners_task_is_kept_for_its_restarted_launch(tmp_path: Path) -> None:
    """A member whose process dies holding a task gets it back in its next launch (within
    task_grace): the new epoch adopts it, it is never released meanwhile."""
    async with _running(tmp_path, [{"name": "a"}], task_grace=60) as c:
        board = _board(c)
        state = c.supervisor.member("web", "a")
        task = await board.create("web", "fix it", created_by=OPERATOR,
                                  assignee=Assignee("a", state.epoch))
        assert (task.status, task.epoch) == ("in_progress", 1)
        c.runtime.opened[-1].exit(1)

        async def adopted() -> bool:
            return await _status(c, task.id) == ("in_progress", "a", 2)
        await _until(c, adopted)
        kinds = [e.kind for e in (await board.get(task.id)).events]
        assert "adopted" in kinds and "lapsed" not in kinds


@pytest.mark.parametrize("grace", [0, 0.05])  # 0.05: past the lease check's 0.01 interval
async def test_a_dead_owners_task_is_released_after_the_grace(tmp_path: Path,
                                                              grace: float) -> None:
    """A member that dies holding a task and does not come back within task_grace loses it:
    the lease check releases it to pending, nobody's, with a note in its lifetime — at once,
    or (a grace to wait out) when the check's sleep until the lease's end is over."""
    async with _running(tmp_path, [{"name": "a", "restart": "never"}],
                        task_grace=grace) as c:
        board = _board(c)
        task = await board.create("web", "fix it", created_by=OPERATOR,
                                  assignee=Assignee("a", c.supervisor.member("web", "a").epoch))
        c.runtime.opened[-1].exit(1)

        async def released() -> bool:
            return await _status(c, task.id) == ("pending", None, None)
        await _until(c, released)
        lapsed = [e for e in (await board.get(task.id)).events if e.kind == "lapsed"]
        assert lapsed and f"died and did not come back within {grace:g} s" in (lapsed[0].note
                                                                                or "")


# -- offers ---------------------------------------------------------------------------------------

async def test_an_idle_claimer_is_handed_a_ready_task_not_a_blocked_one(tmp_path: Path) -> None:
    """An idle member with claims = true is handed the ready task (claimed for it, and told in
    a message naming the task and task_complete); a blocked task is never handed; once its
    dependency is done, the dependent goes to the next idle claimer."""
    async with _running(tmp_path, [{"name": "lead"}, {"name": "dev", "claims": True}]) as c:
        board = _board(c)
        first = await board.create("web", "schema", created_by=OPERATOR,
                                   assignee=Assignee("lead", 1))
        blocked = await board.create("web", "api", body="on the schema",
                                     blocked_by=[first.id], created_by=OPERATOR)
        assert c.built is not None
        offers = c.built.offers
        assert not await offers.on_idle("web", "dev")  # only a blocked task: nothing
        assert await _status(c, blocked.id) == ("pending", None, None)
        await board.complete(first.id, by=Actor("lead"), summary="done")
        text = await _turn_with(c, "dev", f"you now own task T{blocked.id}")
        assert "api" in text and "on the schema" in text
        assert f"task_complete(id={blocked.id}" in text
        assert await _status(c, blocked.id) == ("in_progress", "dev", 1)
        assert not any("you now own" in t for t in _texts(c, "lead"))  # not a claimer
        told = [m for m in (await c.teams.history("web", "dev")).messages
                if "you now own" in m.text]
        assert [m.task_id for m in told] == [blocked.id], "history shows the task it is about"


async def test_no_task_is_handed_to_a_held_or_busy_member(tmp_path: Path) -> None:
    """A claimer the ledger holds (a budget, a rate limit) or that is not ready is never
    handed a task; released, it is."""
    async with _running(tmp_path, [{"name": "dev", "claims": True}]) as c:
        assert c.built is not None
        offers = c.built.offers
        ledger, board = c.built.ledger, _board(c)
        ledger.hold_budget("web", "dev", "over its budget")
        task = await board.create("web", "x", created_by=OPERATOR)
        assert not await offers.on_idle("web", "dev")
        assert await _status(c, task.id) == ("pending", None, None)
        state = c.supervisor.member("web", "dev")
        state.slot.busy = True
        ledger._holds.release("web", "dev")
        assert not await offers.on_idle("web", "dev")  # busy: not ready
        state.slot.busy = False
        state.notify()
        await _turn_with(c, "dev", f"you now own task T{task.id}")


async def test_a_released_task_cools_down_before_it_is_handed_back(tmp_path: Path) -> None:
    """A task the member released itself is not handed to it again within offer_cooldown
    (no offer storm); after the cooldown it is (once), on the member's next idle look."""
    async with _running(tmp_path, [{"name": "dev", "claims": True}],
                        offer_cooldown=300) as c:
        board = _board(c)
        assert c.built is not None
        offers = c.built.offers
        task = await board.create("web", "x", created_by=OPERATOR)
        await _turn_with(c, "dev", f"you now own task T{task.id}")
        await _ready(c, "dev")  # idle, so a refusal below is the cooldown's, not "busy"
        await board.release(task.id, by=Actor("dev"), reason="not mine")
        assert not await offers.on_idle("web", "dev")
        assert await _status(c, task.id) == ("pending", None, None)
        later = board.clock() + 301
        board.clock = lambda: later
        c.mailbox.poke("web", "dev")  # its queue looks again (its own runner calls on_idle)

        async def handed_back() -> bool:
            return await _status(c, task.id) == ("in_progress", "dev", 1)
        await _until(c, handed_back)
        offered = [e for e in (await board.get(task.id)).events if e.kind == "offered"]
        assert len(offered) == 2, "handed once, then once again after the cooldown"


async def test_the_end_of_a_released_tasks_cooldown_wakes_the_teams_claimers_once(
        tmp_path: Path) -> None:
    """Nothing on the board changes when a cooldown ends, so nothing poked the claimers: a
    member that released the only ready task was handed it again only if something else made
    its queue look (the test above pokes by hand; a liveness probe's end sometimes did). The
    board's cooldown check (``Offers.wake_cooled``, every lease interval) pokes the team's
    claimers when a cooldown ends in the interval, once."""
    from orchestrator.daemon.board import Offers

    async with _running(tmp_path, [{"name": "dev", "claims": True}],
                        offer_cooldown=300) as c:
        assert c.built is not None
        board = _board(c)
        task = await board.create("web", "x", created_by=OPERATOR)
        await _turn_with(c, "dev", f"you now own task T{task.id}")
        await _ready(c, "dev")
        released = board.clock()
        await board.release(task.id, by=Actor("dev"), reason="not mine")
        poked: list[tuple[str, str]] = []
        offers = Offers(c.store, board, c.teams, c.supervisor,
                        lambda team, member: poked.append((team, member)),
                        held=lambda team, member: False)
        assert await offers.wake_cooled(released, released + 299) == [] and poked == []
        assert offers.next_cooled is not None  # the loop sleeps until this end
        assert released + 300 <= offers.next_cooled <= board.clock() + 300
        assert await offers.wake_cooled(released + 299, released + 301) == ["web"]
        assert poked == [("web", "dev")] and offers.next_cooled is None  # nothing cools
        assert await offers.wake_cooled(released + 301, released + 600) == []  # once


async def test_the_cooldown_loop_hands_a_released_task_back_when_its_cooldown_ends(
        tmp_path: Path) -> None:
    """The core's own cooldown loop (no hand poke, no other change on the board): it sleeps
    until the released task's cooldown ends, then the claimer is handed it again. (The
    cooldown outlasts the release's own look at the claimer, milliseconds.)"""
    async with _running(tmp_path, [{"name": "dev", "claims": True}],
                        offer_cooldown=0.1) as c:
        board = _board(c)
        task = await board.create("web", "x", created_by=OPERATOR)
        await _turn_with(c, "dev", f"you now own task T{task.id}")
        await _ready(c, "dev")
        await board.release(task.id, by=Actor("dev"), reason="not mine")

        async def handed_back() -> bool:
            return await _status(c, task.id) == ("in_progress", "dev", 1)
        await _until(c, handed_back)
        offered = [e for e in (await board.get(task.id)).events if e.kind == "offered"]
        assert len(offered) == 2, "handed once, then once again after the cooldown"


# -- the check before done ------------------------------------------------------------------------

async def _complete(c: Core, member: str, title: str, check: str | None = None) -> int:
    board = _board(c)
    task = await board.create("web", title, created_by=OPERATOR, check=check,
                              assignee=Assignee(member, c.supervisor.member("web", member).epoch))
    await board.complete(task.id, by=Actor(member), summary="did it")
    return task.id


async def test_a_passing_check_makes_the_task_done(tmp_path: Path) -> None:
    """The team's check runs in the owner's workdir; exit 0 → done (its event says so)."""
    check = f"{PY} -c \"import os,sys; open('ran','w').write(os.getcwd()); sys.exit(0)\""
    async with _running(tmp_path, [{"name": "a"}], check=check) as c:
        task_id = await _complete(c, "a", "x")
        assert (await _status(c, task_id))[0] == "done"
        assert (tmp_path / "ran").read_text() == str(tmp_path)


async def test_a_failing_check_keeps_the_task_in_progress_and_tells_the_owner(
        tmp_path: Path) -> None:
    """A check that exits non-zero keeps the task in progress; its output is in the task's
    lifetime and in a message to the owner. A task's own check overrides the team's."""
    fail = f"{PY} -c \"print('boom: 3 tests failed'); raise SystemExit(3)\""
    async with _running(tmp_path, [{"name": "a"}], check=f"{PY} -c pass") as c:
        task_id = await _complete(c, "a", "x", check=fail)
        assert await _status(c, task_id) == ("in_progress", "a", 1)
        gate = [e for e in (await _board(c).get(task_id)).events if e.kind == "gate"]
        assert gate and "exit 3" in (gate[0].note or "") and "boom" in (gate[0].note or "")
        text = await _turn_with(c, "a", f"task T{task_id}")
        assert "boom: 3 tests failed" in text and "is not done yet" in text
        told = [m for m in (await c.teams.history("web", "a")).messages if "boom" in m.text]
        assert [m.task_id for m in told] == [task_id], "history shows the task it is about"


async def test_a_hanging_check_is_killed_at_its_timeout_and_reported(tmp_path: Path) -> None:
    """A check that does not finish within check_timeout is killed (its process group) and
    reported to the owner; the task stays in progress."""
    # a shell, not an interpreter: it has said "started" a few milliseconds in, well within
    # the timeout, and its group (the shell and its sleep) is what the timeout kills
    hang = "/bin/sh -c 'echo started; sleep 600'"
    async with _running(tmp_path, [{"name": "a"}], check=hang, check_timeout=0.2) as c:
        task_id = await _complete(c, "a", "x")
        assert (await _status(c, task_id))[0] == "in_progress"
        text = await _turn_with(c, "a", f"task T{task_id}")
        assert "did not finish within 0.2 s (killed)" in text and "started" in text


# -- review ---------------------------------------------------------------------------------------

async def test_review_by_a_member_sends_the_task_to_it_and_its_verdict_settles_it(
        tmp_path: Path) -> None:
    """review_by = member: a completed task goes to review and the reviewer is asked in a
    message; only the reviewer (or the operator) decides — not the owner, not a teammate;
    rejected → in progress with the reason told to the owner, approved → done."""
    members = [{"name": "a"}, {"name": "rev"}, {"name": "other"}]
    async with _running(tmp_path, members, review_by="rev") as c:
        board = _board(c)
        task_id = await _complete(c, "a", "feature")
        assert (await _status(c, task_id))[0] == "review"
        asked = await _turn_with(c, "rev", f"please review task T{task_id}")
        assert "did it" in asked and f"task_review(id={task_id}" in asked
        for who in ("a", "other"):
            with pytest.raises(TaskRefused) as refused:
                await board.review(task_id, by=Actor(who), approve=True, note="lgtm")
            assert refused.value.code == "task_forbidden"
        await board.review(task_id, by=Actor("rev"), approve=False, note="no tests")
        assert await _status(c, task_id) == ("in_progress", "a", 1)
        assert "rejected by rev: no tests" in await _turn_with(c, "a", "rejected by rev")
        await board.complete(task_id, by=Actor("a"), summary="with tests")
        await board.review(task_id, by=Actor("rev"), approve=True, note="lgtm")
        assert (await _status(c, task_id))[0] == "done"


async def test_review_by_the_operator_waits_in_review_for_teamctl_task_review(
        tmp_path: Path) -> None:
    """review_by = "operator": the task waits in review (no member is asked) until the
    operator decides."""
    async with _running(tmp_path, [{"name": "a"}], review_by="operator") as c:
        task_id = await _complete(c, "a", "x")
        assert (await _status(c, task_id))[0] == "review"
        await _board(c).review(task_id, by=OPERATOR, approve=True, note="ok")
        assert (await _status(c, task_id))[0] == "done"


# -- status ---------------------------------------------------------------------------------------

async def test_status_shows_each_members_current_task(tmp_path: Path) -> None:
    """teamctl status: each member's current task (in progress or in review)."""
    async with _running(tmp_path, [{"name": "a"}, {"name": "b"}]) as c:
        await _board(c).create("web", "fix the login", created_by=OPERATOR,
                               assignee=Assignee("a", 1))
        doc = await c.teams.status("web")
        tasks = {m.name: m.task for m in doc.teams[0].members}
        assert tasks == {"a": "T1 fix the login", "b": None}


async def test_the_lease_check_reads_the_journal_only_once_a_lease_may_be_due() -> None:
    """An idle daemon's lease check costs nothing: with no task held for a dead owner it asks
    the journal nothing; once an owner exits keeping tasks, it asks when their grace ends —
    never before — and learns the next one from the journal after each release."""
    from types import SimpleNamespace

    from orchestrator.daemon.board import Leases

    calls: list[str] = []
    clock = [1000.0]
    due: list[float | None] = [None]

    class _Board:
        def clock(self) -> float:
            return clock[0]

        async def expire(self, now: float) -> list[int]:
            calls.append("expire")
            if due[0] is None or due[0] > now:
                return []
            due[0] = None  # released: no lease left
            return [7]

        async def next_lease(self) -> float | None:
            calls.append("next_lease")
            return due[0]

        async def owner_exited(self, *args: Any, grace: float, now: float) -> list[int]:
            due[0] = now + grace
            return [7]

    teams = SimpleNamespace(running=lambda team: None)
    leases = Leases(_Board(), teams)  # type: ignore[arg-type]
    assert await leases.expire_once() == [] and calls == ["expire", "next_lease"], \
        "a new daemon reads once: leases may be left from the last one"
    calls.clear()
    for _ in range(5):
        clock[0] += 1
        assert await leases.expire_once() == []
    assert calls == [], "no lease held: the journal is not asked"
    state = SimpleNamespace(team="web", name="lead", epoch=1)
    await leases.exited(state)  # type: ignore[arg-type]
    grace = leases.grace("web")
    clock[0] += grace - 1
    assert await leases.expire_once() == [] and calls == [], "not due yet"
    clock[0] += 2
    assert await leases.expire_once() == [7] and calls == ["expire", "next_lease"]
    calls.clear()
    clock[0] += 60
    assert await leases.expire_once() == [] and calls == [], "released: quiet again"
