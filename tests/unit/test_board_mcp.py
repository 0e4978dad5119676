"""The board's member methods (``member.task_*``, what a member's MCP task tools call) through
the control server's own dispatch, in process over the daemon's core (a real journal, fake
runtimes): each call acts as the member its token names, in its team only, and hostile calls —
bad ids, huge strings, wrong types, another team's task, a task it does not own — are typed
refusals that leave the board as it was."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, cast

import pytest

from orchestrator.daemon.board import OPERATOR, MemberBoardApi
from orchestrator.daemon.board._members import MEMBER_PAGE_ROWS
from orchestrator.daemon.control import ControlServer
from orchestrator.daemon.router import MessageRefused
from tests.support.fakes import core, team_config

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from orchestrator.daemon.journal import Journal
    from orchestrator.daemon.router import Router
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio


class _Caller:
    """The router's caller check, as it answers a member's own process; a token listed in
    ``foreign`` is one read from a teammate's mcp.json."""

    def __init__(self) -> None:
        self.checked: list[str] = []
        self.foreign: set[str] = set()

    async def check_caller(self, token: str, pid: int | None, *,
                           socket_member: tuple[str, str] | None = None) -> None:
        self.checked.append(token)
        if token in self.foreign:
            raise MessageRefused("mcp_token_not_yours", "not this member's process")


class _Api:
    def __init__(self, c: Core) -> None:
        assert c.built is not None
        self.c = c
        self.caller = _Caller()
        self.server = ControlServer(c.teams, on_stop_all=lambda: None,
                                    router=cast("Router", self.caller),
                                    member_board=MemberBoardApi(c.built.board, c.teams,
                                                                c.supervisor))

    def token(self, member: str, team: str = "web") -> str:
        token = self.c.supervisor.member(team, member).token
        assert token is not None
        return token

    async def call(self, method: str, member: str | None = None, **params: Any) -> Any:
        """The result, or the error's ``data`` (code, message) as {"error": ...}."""
        if member is not None:
            params["token"] = self.token(member)
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        answer = json.loads(await self.server.dispatch(line.encode()))
        if "error" in answer:
            return {"error": answer["error"].get("data") or answer["error"]}
        return answer["result"]

    async def ok(self, method: str, member: str, **params: Any) -> Any:
        result = await self.call(method, member, **params)
        assert "error" not in result, result
        return result

    async def refused(self, method: str, member: str | None, code: str, **params: Any) -> str:
        result = await self.call(method, member, **params)
        assert "error" in result, result
        assert result["error"]["code"] == code, result
        return str(result["error"]["message"])


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[_Api]:
    async with core(tmp_path) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "dev"}, {"name": "ops"},
                                         {"name": "qa"}), "t.toml",
                             wait=True, timeout=10)
        other = (tmp_path / "other")
        other.mkdir()
        await c.teams.launch(team_config(other, {"name": "dev"}, name="far"), "f.toml",
                             wait=True, timeout=10)
        yield _Api(c)


async def test_members_create_claim_and_complete_and_the_dependent_task_becomes_ready(
        api: _Api) -> None:
    """A member's tools act as itself in its own team: it creates tasks (one waiting on two),
    two members claim and complete one each, and the third is ready only then."""
    t1 = await api.ok("member.task_create", "dev", title="parse the config")
    t2 = await api.ok("member.task_create", "dev", title="write the docs", body="all of them")
    t3 = await api.ok("member.task_create", "dev", title="release",
                      blocked_by=[t1["id"], t2["id"]])
    assert (t1["created_by"], t1["team"], t3["state"]) == ("dev", "web", "blocked")
    claimed = await api.ok("member.task_claim", "dev")  # no id: the next ready task for me
    assert (claimed["id"], claimed["owner"]) == (t1["id"], "dev")
    assert claimed["epoch"] == api.c.supervisor.member("web", "dev").epoch
    await api.ok("member.task_claim", "ops", id=t2["id"])
    await api.ok("member.task_update", "ops", id=t2["id"], note="half way")
    await api.ok("member.task_complete", "dev", id=t1["id"], summary="parsed")
    listed = await api.ok("member.task_list", "dev", filter="ready")
    assert listed["tasks"] == [], "T3 still waits on T2"
    done = await api.ok("member.task_complete", "ops", id=t2["id"], summary="written",
                        evidence="make docs")
    assert done["state"] == "done"
    ready = await api.ok("member.task_list", "ops", filter="ready")
    assert [t["id"] for t in ready["tasks"]] == [t3["id"]]
    mine = await api.ok("member.task_list", "ops", filter="mine")
    assert [t["id"] for t in mine["tasks"]] == [t2["id"]]
    shown = await api.ok("member.task_get", "ops", id=t2["id"])
    assert [e["kind"] for e in shown["events"]] == ["created", "claimed", "updated",
                                                    "completed"]
    assert {e["actor"] for e in shown["events"]} == {"dev", "ops"}
    assert api.caller.checked.count(api.token("ops")) == 6, "every call's caller is checked"
    released = await api.ok("member.task_claim", "ops", id=t3["id"])
    assert released["state"] == "in_progress"
    back = await api.ok("member.task_release", "ops", id=t3["id"], reason="out of time")
    assert (back["state"], back["owner"]) == ("ready", None)


async def test_hostile_task_tool_calls_are_typed_refusals_and_change_nothing(api: _Api) -> None:
    """Bad ids, huge strings, wrong types, unknown keys, another team's task, a task the member
    does not own, an assignment by a member that is not the lead, a token that is not current
    or is another member's: each a typed refusal; the board is as it was, the server answers
    the next call."""
    mine = await api.ok("member.task_create", "dev", title="mine")
    far_token = api.token("dev", "far")
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "member.task_create",
                       "params": {"token": far_token, "title": "far away"}})
    far = json.loads(await api.server.dispatch(line.encode()))["result"]
    await api.ok("member.task_claim", "dev", id=mine["id"])
    before = await api.ok("member.task_get", "dev", id=mine["id"])
    bad: list[tuple[str, dict[str, Any]]] = [
        ("member.task_get", {"id": mine["id"][1:]}),  # "3" is not an id: strict (T3 is)
        ("member.task_get", {"id": 0}),
        ("member.task_get", {"id": -1}),
        ("member.task_get", {"id": 2**63}),
        ("member.task_get", {"id": True}),
        ("member.task_get", {"id": None}),
        ("member.task_get", {"id": [1]}),
        ("member.task_get", {}),
        ("member.task_create", {"title": "x" * 1001}),
        ("member.task_create", {"title": ""}),
        ("member.task_create", {"title": 5}),
        ("member.task_create", {"title": "t", "blocked_by": list(range(1, 102))}),
        ("member.task_create", {"title": "t", "blocked_by": "1"}),
        ("member.task_create", {"title": "t", "role": "no spaces allowed"}),
        ("member.task_create", {"title": "t", "owner": "dev"}),
        ("member.task_update", {"id": mine["id"], "note": "n" * 70_000}),
        ("member.task_complete", {"id": mine["id"], "summary": None}),
        ("member.task_complete", {"id": mine["id"], "summary": "s", "evidence": ["a"]}),
        ("member.task_release", {"id": mine["id"]}),
        ("member.task_review", {"id": mine["id"], "approve": "yes", "note": "n"}),
        ("member.task_list", {"filter": "everything"}),
        ("member.task_list", {"after": -5}),
        ("member.task_claim", {"id": "1"}),  # 1 or "T1" (as printed), never a digit string
    ]
    for method, params in bad:
        await api.refused(method, "dev", "usage_error", **params)
    text_refusals = [
        ("member.task_create", {"title": "two\nlines"}),
        ("member.task_create", {"title": "bell \x07"}),
        ("member.task_create", {"title": "t", "body": "\x1b[2J clear"}),
        ("member.task_update", {"id": mine["id"], "note": "é" * 40_000}),  # 80,000 bytes
    ]
    for method, params in text_refusals:
        await api.refused(method, "dev", "task_invalid", **params)
    # another team's task does not exist for this member, whatever it tries
    for method, params in [("member.task_get", {}), ("member.task_claim", {}),
                           ("member.task_update", {"note": "n"}),
                           ("member.task_complete", {"summary": "s"}),
                           ("member.task_release", {"reason": "r"})]:
        message = await api.refused(method, "dev", "task_not_found", id=far["id"], **params)
        assert "far away" not in message
    await api.refused("member.task_create", "dev", "task_not_found", title="t",
                      blocked_by=[far["id"]])
    # what it does not own
    for method, params in [("member.task_complete", {"summary": "it was me"}),
                           ("member.task_update", {"note": "mine now"}),
                           ("member.task_release", {"reason": "go"})]:
        message = await api.refused(method, "ops", "task_not_owner", id=mine["id"], **params)
        assert "dev" in message, "the refusal names the owner"
    await api.refused("member.task_create", "ops", "task_forbidden", title="t",
                      assignee="dev")
    await api.refused("member.task_get", None, "messaging_token_unknown", token="x" * 32,
                      id=mine["id"])
    api.caller.foreign.add(api.token("ops"))
    await api.refused("member.task_claim", "ops", "mcp_token_not_yours")
    api.caller.foreign.clear()
    after = await api.ok("member.task_get", "dev", id=mine["id"])
    assert after == before, "nothing a refused call sent reached the board"
    listed = await api.ok("member.task_list", "dev")
    assert [t["title"] for t in listed["tasks"]] == ["mine"]
    assert (await api.ok("member.task_list", "ops"))["total"] == 1


async def test_task_list_on_ten_thousand_tasks_answers_pages_of_fifty(api: _Api) -> None:
    """10,000 tasks: a member's task_list is one page of 50 (id order) with the total and
    where the next page starts; the next page follows it."""
    assert api.c.built is not None
    first = await api.c.built.board.create("web", "task 0", created_by=OPERATOR)
    await api.c.store.run(_bulk, 9_999)
    started = time.perf_counter()
    page = await api.ok("member.task_list", "dev")
    elapsed = time.perf_counter() - started
    print(f"task_list first page on 10,000 tasks: {elapsed * 1000:.1f} ms")
    assert page["total"] == 10_000 and len(page["tasks"]) == MEMBER_PAGE_ROWS
    assert page["tasks"][0]["id"] == f"T{first.id}"  # as every output names a task
    nxt = await api.ok("member.task_list", "dev", after=page["next_after"])
    assert nxt["tasks"][0]["id"] == f"T{int(page['next_after'][1:]) + 1}"
    blocked = await api.ok("member.task_list", "dev", filter="blocked")
    assert blocked["total"] == 0


def _bulk(journal: Journal, count: int) -> None:
    """``count`` more tasks in one transaction (the rows ``create`` writes)."""
    with journal.transaction() as db:
        db.executemany(
            "INSERT INTO tasks (team, title, status, created_by, created_at, updated_at) "
            "VALUES ('web', ?, 'pending', 'operator', 0, 0)",
            [(f"task {n}",) for n in range(1, count + 1)])


async def test_a_message_sent_while_holding_a_task_belongs_to_it(api: _Api) -> None:
    """A member's send_message while it holds a task in progress carries that task's id (in
    history and thread); before the claim, and after the task is done, it carries none; a
    board message (``Mailbox.send(task_id=...)``, an offer or a gate's output) carries its
    task."""
    c = api.c
    task = await api.ok("member.task_create", "dev", title="fix the login")
    before = await c.router.send_message(api.token("dev"), "qa", "about to start")
    await api.ok("member.task_claim", "dev", id=task["id"])
    during = await c.router.send_message(api.token("dev"), "ops", "working on it")
    await api.ok("member.task_complete", "dev", id=task["id"], summary="fixed")
    await c.mailbox.send("web", "ops", "offer: T1", task_id=task["id"])
    history = {m.text: m for member in ("ops", "qa")
               for m in (await c.teams.history("web", member)).messages}
    assert history["about to start"].task_id is None
    assert f"T{history['working on it'].task_id}" == task["id"]
    assert f"T{history['offer: T1'].task_id}" == task["id"]
    thread = await c.teams.thread(during.id)
    assert thread.messages[0].id == during.id and f"T{thread.messages[0].task_id}" == task["id"]
    assert before.id != during.id


async def test_the_lead_assigns_and_the_reviewer_settles_through_their_tools(
        api: _Api, tmp_path: Path) -> None:
    """A ``lead = true`` member acts on any task and assigns (a member that is not the lead
    may not); with ``review_by``, a completed task waits in review until the reviewer's
    task_review approves it — which nobody else's may."""
    lab = tmp_path / "lab"
    lab.mkdir()
    config = team_config(lab, {"name": "boss", "lead": True}, {"name": "dev"}, {"name": "rev"},
                         name="lab")
    config = config.model_copy(update={"board": config.board.model_copy(
        update={"review_by": "rev"})})
    await api.c.teams.launch(config, "lab.toml", wait=True, timeout=10)

    async def call(method: str, member: str, **params: Any) -> Any:
        return await api.call(method, token=api.token(member, "lab"), **params)

    task = await call("member.task_create", "boss", title="ship it", assignee="dev")
    assert (task["state"], task["owner"]) == ("in_progress", "dev")
    noted = await call("member.task_update", "boss", id=task["id"], note="the lead may")
    assert "error" not in noted, noted
    done = await call("member.task_complete", "dev", id=task["id"], summary="shipped")
    assert done["state"] == "review", done
    refused = await call("member.task_review", "dev", id=task["id"], approve=True,
                         note="looks fine to me")
    assert refused["error"]["code"] == "task_forbidden", refused
    approved = await call("member.task_review", "rev", id=task["id"], approve=True,
                          note="checked")
    assert approved["state"] == "done", approved
