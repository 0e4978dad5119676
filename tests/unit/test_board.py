"""The board in process (the core ``build_core`` makes, a real journal): dependencies and
cycles, derived readiness, claims as one transaction under a race, roles and ``max_tasks``,
ownership, leases that follow the owner's launch, paging 10,000 tasks, hostile text."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.daemon.board import OPERATOR, Board
from orchestrator.daemon.board._service import Actor, Assignee, GateResult
from orchestrator.errors import TaskCycle, TaskInvalid, TaskNotFound, TaskRefused
from orchestrator.limits import MAX_PAGE_ROWS
from tests.support.fakes import core

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from orchestrator.daemon.journal import Journal
    from orchestrator.protocol.board import TaskDoc
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio

TEAM = "web"


@pytest.fixture
async def built(tmp_path: Path) -> AsyncIterator[Core]:
    async with core(tmp_path) as c:
        yield c


@pytest.fixture
def board(built: Core) -> Board:
    assert built.built is not None
    return built.built.board


def _bulk(journal: Journal, count: int, blocked_by: int) -> None:
    """``count`` tasks in one transaction (every other one waiting on ``blocked_by``): the
    rows ``create`` writes, without 10,000 round trips."""
    with journal.transaction() as db:
        for n in range(count):
            task_id = db.execute(
                "INSERT INTO tasks (team, title, status, created_by, created_at, updated_at) "
                "VALUES (?, ?, 'pending', 'operator', 0, 0)", (TEAM, f"task {n}")).lastrowid
            if n % 2:
                db.execute("INSERT INTO task_deps VALUES (?, ?)", (task_id, blocked_by))


async def _add(board: Board, title: str, *blocked_by: int, role: str | None = None,
               priority: int = 0) -> int:
    task = await board.create(TEAM, title, role=role, priority=priority,
                              blocked_by=blocked_by, created_by=OPERATOR)
    return task.id


async def _done(board: Board, task_id: int, member: str = "dev") -> None:
    await board.claim(TEAM, member, epoch=1, task_id=task_id)
    await board.complete(task_id, by=Actor(member), summary="did it")


async def test_a_dependency_cycle_is_refused_and_named(board: Board) -> None:
    """An edge that would close a cycle is refused at insert, naming the cycle; nothing of
    it is written."""
    t1 = await _add(board, "schema")
    t2 = await _add(board, "api", t1)
    t3 = await _add(board, "ui", t2)
    with pytest.raises(TaskCycle) as refused:
        await board.deps(t1, by=OPERATOR, add=[t3])
    assert refused.value.message.startswith(f"refused: that dependency would close a cycle "
                                            f"T{t1} → T{t3} → T{t2} → T{t1}")
    assert refused.value.exit_code == 2
    with pytest.raises(TaskCycle, match=f"T{t1} → T{t1}"):
        await board.deps(t1, by=OPERATOR, add=[t1])
    assert (await board.get(t1)).depends_on == []


async def test_a_pending_task_is_ready_only_once_every_dependency_is_done(board: Board) -> None:
    t1 = await _add(board, "schema")
    t2 = await _add(board, "api", t1)
    task = (await board.get(t2)).task
    assert (task.state, task.blocked_by) == ("blocked", [t1])
    assert task.blocked == f"blocked by T{t1} (pending)"
    with pytest.raises(TaskRefused) as refused:
        await board.claim(TEAM, "dev", epoch=1, task_id=t2)
    assert refused.value.code == "task_not_ready" and f"T{t1} (pending)" in refused.value.message
    await _done(board, t1)
    assert (await board.get(t2)).task.state == "ready"
    assert (await board.claim(TEAM, "dev", epoch=1)).id == t2


async def test_a_failed_or_cancelled_dependency_blocks_visibly(board: Board) -> None:
    """A dependency that failed (or was cancelled) never clears by itself: its dependents
    say what blocks them."""
    t1 = await _add(board, "schema")
    t2 = await _add(board, "migration")
    t3 = await _add(board, "api", t1, t2)
    await board.claim(TEAM, "dev", epoch=1, task_id=t1)
    await board.fail(t1, by=Actor("dev"), reason="the disk is read-only")
    await board.cancel(t2, by=OPERATOR)
    task = (await board.get(t3)).task
    assert task.state == "blocked"
    assert task.blocked == f"blocked by a failed task T{t1}, a cancelled task T{t2}"


async def test_fifty_concurrent_claims_on_one_task_make_exactly_one_owner(board: Board) -> None:
    """50 members claim the same task at once: one wins, 49 are refused naming the winner,
    and the journal holds one owner and one claim."""
    task_id = await _add(board, "the one task")
    won: list[str] = []
    refused: list[TaskRefused] = []

    async def claim(member: str) -> None:
        try:
            await board.claim(TEAM, member, epoch=1, task_id=task_id)
            won.append(member)
        except TaskRefused as exc:
            refused.append(exc)

    async with anyio.create_task_group() as tg:
        for n in range(50):
            tg.start_soon(claim, f"m{n}")
    assert len(won) == 1 and len(refused) == 49
    assert {e.code for e in refused} == {"task_owned"}
    assert all(f"{won[0]} holds it" in e.message for e in refused)
    shown = await board.get(task_id)
    assert (shown.task.owner, shown.task.status) == (won[0], "in_progress")
    assert [e.kind for e in shown.events] == ["created", "claimed"]


async def test_a_claim_outside_the_members_role_is_refused(board: Board) -> None:
    backend = await _add(board, "index the table", role="backend")
    with pytest.raises(TaskRefused) as refused:
        await board.claim(TEAM, "designer", epoch=1, roles={"frontend"}, task_id=backend)
    assert refused.value.code == "task_role"
    assert "for role 'backend'; designer is of role frontend" in refused.value.message
    with pytest.raises(TaskRefused, match="no ready task of role frontend"):
        await board.claim(TEAM, "designer", epoch=1, roles={"frontend"})
    assert (await board.claim(TEAM, "db", epoch=1, roles={"backend"})).id == backend


async def test_the_next_ready_task_goes_by_priority_then_age(board: Board) -> None:
    await _add(board, "old low")
    high = await _add(board, "new high", priority=5)
    assert (await board.claim(TEAM, "dev", epoch=1)).id == high


async def test_a_member_holds_at_most_max_tasks(board: Board) -> None:
    t1 = await _add(board, "one")
    t2 = await _add(board, "two")
    await board.claim(TEAM, "dev", epoch=1, task_id=t1)
    with pytest.raises(TaskRefused) as refused:
        await board.claim(TEAM, "dev", epoch=1, task_id=t2)
    assert refused.value.code == "task_limit" and refused.value.retryable
    assert (await board.claim(TEAM, "dev", epoch=1, task_id=t2, max_tasks=2)).owner == "dev"


async def test_a_member_completing_a_task_it_does_not_own_is_refused(board: Board) -> None:
    """Only the owner (or the operator, a lead) updates, releases or completes a task; the
    refusal names who holds it, and the gate (a check command, next phase) is not run."""
    gated: list[int] = []

    async def gate(task: TaskDoc) -> GateResult:
        gated.append(task.id)
        return GateResult("done")

    board.gate = gate
    task_id = await _add(board, "mine")
    await board.claim(TEAM, "lead", epoch=1, task_id=task_id)
    for act in (board.complete(task_id, by=Actor("dev"), summary="done, honest"),
                board.update(task_id, by=Actor("dev"), note="hi"),
                board.release(task_id, by=Actor("dev"))):
        with pytest.raises(TaskRefused) as refused:
            await act
        assert refused.value.code == "task_not_owner"
        assert f"T{task_id} is held by lead, not dev" in refused.value.message
    assert gated == [], "the gate never ran for a member that does not own the task"
    done = await board.complete(task_id, by=Actor("lead"), summary="shipped", evidence="ci #4")
    assert (done.status, done.summary, done.evidence) == ("done", "shipped", "ci #4")
    assert gated == [task_id]


async def test_a_dead_owners_task_is_kept_for_its_next_launch_within_the_grace(
        board: Board) -> None:
    """The owner's process ends: its task stays in progress, leased for the grace, and the
    member's next launch adopts it."""
    task_id = await _add(board, "long job")
    await board.claim(TEAM, "lead", epoch=3, task_id=task_id)
    assert await board.owner_exited(TEAM, "lead", 3, grace=60.0, now=1000.0) == [task_id]
    assert (await board.get(task_id)).task.lease_until == 1060.0
    assert await board.expire(1059.0) == []
    assert await board.owner_started(TEAM, "lead", 4, now=1059.0) == [task_id]
    task = (await board.get(task_id)).task
    assert (task.status, task.owner, task.epoch, task.lease_until) == ("in_progress", "lead",
                                                                      4, None)
    assert await board.expire(5000.0) == []


async def test_a_dead_owners_task_is_released_after_the_grace_with_a_note(board: Board) -> None:
    """A task is never in progress under a dead member past the grace: it goes back to
    pending, nobody's, and its lifetime says why; the late launch adopts nothing."""
    task_id = await _add(board, "long job")
    await board.claim(TEAM, "lead", epoch=3, task_id=task_id)
    await board.owner_exited(TEAM, "lead", 3, grace=60.0, now=1000.0)
    assert await board.expire(1060.0) == [task_id]
    shown = await board.get(task_id)
    assert (shown.task.status, shown.task.state, shown.task.owner) == ("pending", "ready", None)
    assert shown.events[-1].kind == "lapsed"
    assert shown.events[-1].note == (f"released: T{task_id}'s owner lead died and did not come "
                                     "back within 60 s")
    assert await board.owner_started(TEAM, "lead", 4, now=1061.0) == []


async def test_a_late_launch_releases_a_lapsed_lease_rather_than_adopt_it(board: Board) -> None:
    task_id = await _add(board, "long job")
    await board.claim(TEAM, "lead", epoch=3, task_id=task_id)
    await board.owner_exited(TEAM, "lead", 3, grace=60.0, now=1000.0)
    assert await board.owner_started(TEAM, "lead", 4, now=2000.0) == []
    assert (await board.get(task_id)).task.status == "pending"


async def test_a_started_daemon_leases_every_task_in_progress(board: Board) -> None:
    """The daemon killed while members held tasks: at its start each task is leased for the
    grace (kept for the owner's next launch, released after); none keeps a dead owner."""
    t1 = await _add(board, "one")
    t2 = await _add(board, "two")
    await board.claim(TEAM, "a", epoch=7, task_id=t1)
    await board.claim(TEAM, "b", epoch=2, task_id=t2)
    assert await board.daemon_started(now=1000.0, grace=30.0) == [t1, t2]
    assert await board.owner_started(TEAM, "a", 1, now=1010.0) == [t1]
    assert await board.expire(1030.0) == [t2]
    assert (await board.get(t1)).task.owner == "a"
    assert (await board.get(t2)).task.owner is None


async def test_assigning_hands_a_ready_task_over_and_keeps_a_blocked_one(board: Board) -> None:
    t1 = await _add(board, "schema")
    t2 = await _add(board, "api", t1)
    ready = await board.assign(t1, Assignee("dev", 2), by=OPERATOR)
    assert (ready.status, ready.owner, ready.epoch) == ("in_progress", "dev", 2)
    kept = await board.assign(t2, Assignee("qa", None), by=OPERATOR)
    assert (kept.status, kept.owner, kept.lease_until) == ("pending", "qa", None)
    with pytest.raises(TaskRefused, match="qa is assigned it"):
        await board.claim(TEAM, "other", epoch=1, task_id=t2)
    with pytest.raises(TaskRefused) as refused:
        await board.assign(t1, Assignee("x", 1), by=Actor("dev"))
    assert refused.value.code == "task_forbidden"
    await board.complete(t1, by=Actor("dev"), summary="ok")
    assert (await board.claim(TEAM, "qa", epoch=1)).id == t2


async def test_assigning_to_a_member_that_is_not_running_starts_its_lease(board: Board) -> None:
    task_id = await _add(board, "job")
    task = await board.assign(task_id, Assignee("dev", None), by=OPERATOR)
    assert task.status == "in_progress" and task.lease_until is not None


async def test_ten_thousand_tasks_list_in_pages_and_filter(board: Board, built: Core) -> None:
    """10,000 tasks: each page is at most MAX_PAGE_ROWS rows, the pages cover every task once,
    and a filter (ready, blocked, owner) counts and pages the same way."""
    first = await _add(board, "root")
    await built.store.run(_bulk, 9_999, first)
    started = time.perf_counter()
    seen, after = [], 0
    while True:
        page = await board.listing(TEAM, after_id=after, limit=MAX_PAGE_ROWS)
        assert len(page.tasks) <= MAX_PAGE_ROWS and page.total == 10_000
        seen += [t.id for t in page.tasks]
        if page.next_after is None:
            break
        after = page.next_after
    elapsed = time.perf_counter() - started
    assert sorted(seen) == seen and len(set(seen)) == 10_000
    blocked = await board.listing(TEAM, state="blocked", limit=10)
    assert blocked.total == 4_999 and all(t.state == "blocked" for t in blocked.tasks)
    assert (await board.listing(TEAM, state="ready", limit=1)).total == 5_001
    await board.claim(TEAM, "dev", epoch=1, task_id=first)
    assert [t.id for t in (await board.listing(TEAM, owner="dev")).tasks] == [first]
    print(f"\nlisting 10,000 tasks in 10 pages: {elapsed * 1000:.0f} ms")


@pytest.mark.parametrize(("title", "body", "problem"), [
    ("fix\x1b[2Jthe screen", "", "control character (U+001B"),
    ("two\nlines", "", "control character (U+000A"),
    ("", "", "1 to 200 characters"),
    ("x" * 201, "", "1 to 200 characters"),
    ("ok", "a\x00b", "control character (U+0000"),
    ("ok", "x" * (10 * 1024 * 1024), "at most 65536 bytes"),
])
async def test_hostile_task_text_is_refused(board: Board, title: str, body: str,
                                            problem: str) -> None:
    with pytest.raises(TaskInvalid, match=re.escape(problem)):
        await board.create(TEAM, title, body, created_by=OPERATOR)
    assert (await board.listing(TEAM)).total == 0


async def test_dependencies_must_be_tasks_of_the_same_team(board: Board) -> None:
    other = await board.create("other", "theirs", created_by=OPERATOR)
    with pytest.raises(TaskNotFound, match=f"no task T{other.id} in team 'web'"):
        await _add(board, "ours", other.id)
    with pytest.raises(TaskNotFound):
        await _add(board, "ours", 999)
