"""The approvals queue in process (a real journal, the fake runtime): its states, waiting as
long as it takes, expiry when the asking process goes or the daemon restarts, the flood bound,
rules, and answers that apply nothing twice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.contracts import ApprovalRequest, TurnResult
from orchestrator.daemon import approval_journal
from orchestrator.daemon.approvals import Approvals
from orchestrator.errors import (
    ApprovalExpired,
    ApprovalSettled,
    NotFound,
    RuntimeExited,
    UsageError,
)
from tests.fakes import FakeProcess, core, team_config
from tests.settle import until

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.contracts import Turn
    from tests.fakes import Core

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _asking(request: ApprovalRequest, outcomes: list[Any]) -> Any:
    """A turn step whose runtime asks, then answers with what the operator decided."""
    async def step(process: FakeProcess, turn: Turn) -> TurnResult:
        approver = process.spec.approver
        assert approver is not None
        got: list[Any] = []
        async with anyio.create_task_group() as tg:  # as the adapters do: the process may die
            async def ask() -> None:
                got.append(await approver.ask(request))
                tg.cancel_scope.cancel()
            tg.start_soon(ask)
            await process.wait()
            tg.cancel_scope.cancel()
        if not got:
            raise RuntimeExited(process.spec.member, process.exit_code, [])
        answer = got[0]
        outcomes.append(answer)
        await approver.confirmed(answer.request_id)
        return TurnResult(reply=f"{answer.decision}: {answer.message or answer.text or ''}")
    return step


async def _launch(c: Core, tmp_path: Path, **member: Any) -> None:
    config = team_config(tmp_path, {"name": "lead", "permissions": "ask", **member})
    await c.teams.launch(config, "team.toml", wait=True, timeout=10)


async def _next_pending(c: Core, after: int = 0) -> dict[str, Any]:
    with anyio.fail_after(10):
        doc = await c.approvals.query(after=after, wait=5.0)
    assert doc.approvals, "nothing was asked"
    return doc.approvals[0].model_dump()


async def test_a_request_waits_as_long_as_it_takes_and_the_answer_reaches_the_runtime(
        tmp_path: Path) -> None:
    outcomes: list[Any] = []
    request = ApprovalRequest("permission", "Bash", "rm -rf build")
    async with core(tmp_path) as c:
        c.runtime.script = [_asking(request, outcomes)]
        await _launch(c, tmp_path, turn_idle_timeout=0.5)
        async with anyio.create_task_group() as tg:
            async def send() -> None:
                result = await c.teams.send(None, "lead", "clean up", wait=True, timeout=30)
                outcomes.append(result)
            tg.start_soon(send)
            row = await _next_pending(c)
            state = c.supervisor.member("web", "lead")
            assert state.snapshot().activity == f"waiting for approval {row['id']}"
            assert (row["state"], row["summary"], row["runtime"]) == (
                "pending", "rm -rf build", "claude")
            with pytest.raises(UsageError, match="is a permission request"):
                await c.approvals.decide(row["id"], "answer", text="yes")
            decided = await c.approvals.decide(row["id"], "deny", message="not now")
            assert decided.confirmed and decided.approval.state == "denied"
        answer, result = outcomes
        assert (answer.decision, answer.message) == ("deny", "not now")
        assert result.state == "answered" and result.reply == "deny: not now"
        with pytest.raises(ApprovalSettled, match="already denied"):
            await c.approvals.decide(row["id"], "approve")
        with pytest.raises(NotFound):
            await c.approvals.decide("apv_01ARZ3NDEKTSV4RRFFQ69G5FAV", "approve")


async def test_a_request_expires_when_its_process_exits_and_is_asked_again(
        tmp_path: Path) -> None:
    outcomes: list[Any] = []
    request = ApprovalRequest("permission", "Write", "a.txt")
    async with core(tmp_path) as c:
        c.runtime.script = [_asking(request, outcomes), _asking(request, outcomes)]
        await _launch(c, tmp_path, backoff=[0.01, 0.1])
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: c.teams.send(None, "lead", "write", wait=True, timeout=30))
            first = await _next_pending(c)
            c.runtime.opened[0].exit(1)  # the member crashes while its request waits
            cursor = (await c.approvals.query(everything=True)).cursor
            second = await _next_pending(c, after=cursor)
            assert second["id"] != first["id"], "the re-delivered turn asks again"
            with pytest.raises(ApprovalExpired, match="process that asked is gone"):
                await c.approvals.decide(first["id"], "approve")
            await c.approvals.decide(second["id"], "approve")
        rows = (await c.approvals.query(everything=True)).approvals
        assert [(r.id, r.state) for r in rows] == [(first["id"], "expired"),
                                                   (second["id"], "approved")]
        assert [a.request_id for a in outcomes] == [second["id"]], "applied once, to the new"


async def test_rules_from_allow_and_always_approve_at_once(tmp_path: Path) -> None:
    outcomes: list[Any] = []
    npm = ApprovalRequest("permission", "Bash", "npm test --watch=false")
    async with core(tmp_path) as c:
        c.runtime.script = [_asking(npm, outcomes), _asking(npm, outcomes),
                            _asking(ApprovalRequest("permission", "write",
                                                    f"{tmp_path}/docs/x.md"), outcomes)]
        await _launch(c, tmp_path, allow=["Write(docs/*)"])
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: c.teams.send(None, "lead", "test", wait=True, timeout=30))
            row = await _next_pending(c)
            decided = await c.approvals.decide(row["id"], "approve", always=True)
            assert decided.rule == "Bash(npm test --watch=false)"
        for text in ("test again", "docs"):
            result = await c.teams.send(None, "lead", text, wait=True, timeout=30)
            assert result.reply == "approve: "  # type: ignore[union-attr]
        rows = (await c.approvals.query(everything=True)).approvals
        assert [(r.answer or {}).get("by") for r in rows] == ["operator", "rule", "rule"]
        assert [r.answer["rule"] for r in rows[1:]] == [  # type: ignore[index]
            "Bash(npm test --watch=false)", "Write(docs/*)"]


async def _asked(c: Core, answers: list[Any], count: int) -> bool:
    return len((await c.approvals.query()).approvals) + len(answers) >= count


async def test_a_flood_is_bounded_and_listed_in_order(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approval_journal, "MAX_PENDING_PER_MEMBER", 3)
    async with core(tmp_path) as c:
        await _launch(c, tmp_path)
        approver = c.supervisor.member("web", "lead").approver
        assert approver is not None
        answers: list[Any] = []
        async with anyio.create_task_group() as tg:
            for n in range(5):
                async def ask(n: int = n) -> None:
                    answer = await approver.ask(ApprovalRequest("permission", "Bash", f"echo {n}"))
                    answers.append(answer)
                    await approver.confirmed(answer.request_id)
                tg.start_soon(ask)
                # journaled (pending) or refused: the journal writes in a thread, so a loop
                # where every task waits is not yet the ask's end — its row or its answer is
                await until(lambda n=n: _asked(c, answers, n + 1))
            pending = (await c.approvals.query()).approvals
            assert [r.summary for r in pending] == ["echo 0", "echo 1", "echo 2"]
            assert [a.decision for a in answers] == ["deny", "deny"], "refused at once"
            for row in pending:
                await c.approvals.decide(row.id, "approve")
        assert [a.decision for a in answers].count("approve") == 3


async def test_the_daemon_restart_expires_what_was_pending(tmp_path: Path) -> None:
    async with core(tmp_path) as c:
        await _launch(c, tmp_path)
        approver = c.supervisor.member("web", "lead").approver
        assert approver is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(approver.ask, ApprovalRequest("question", "AskUserQuestion", "which?",
                                                        ("which?",)))
            row = await _next_pending(c)
            expired = Approvals.recover(c.store.sync)
            assert expired == [row["id"]]
            with pytest.raises(ApprovalExpired, match="daemon restarted"):
                await c.approvals.decide(row["id"], "answer", text="blue")
            tg.cancel_scope.cancel()
