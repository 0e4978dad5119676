"""Intake (orchestrator/daemon/forge/_intake.py; docs/forge.md): the real GitHub client over
HTTP against the local fake, on the daemon's own core — an open labelled issue becomes a task
once (across a new Intake on the same journal, as after a restart), an edited one rewrites
its task and tells the owner, a closed one cancels its task, and hostile titles and bodies
reach the board as data."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.contracts import TextPart
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from orchestrator.daemon.forge import Forges, Intake, WriteBack, open_forge
from orchestrator.forge_config import ForgeSection
from runtimes.kit.base import member_environ
from tests.support.fake_github import FakeGitHub
from tests.support.fakes import Core, FakeRuntime, core, team_config
from tests.support.settle import all_blocked, until

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.daemon.board import Board
    from orchestrator.daemon.forge import Forge

pytestmark = pytest.mark.anyio
_TOKEN = "ghp_fake-token-0001"


def _forge(fake: FakeGitHub) -> Forge:
    section = ForgeSection.model_validate(
        {"github": {"repo": "octo-org/web", "token_env": "T", "api": fake.url}})
    return open_forge(section, {"T": _TOKEN})


def _intake(c: Core, forge: Forge) -> Intake:
    assert c.built is not None
    return Intake(team="web", repo="octo-org/web", label="teamctl", state="open", forge=forge,
                  board=c.built.board, journal=c.store, clock=time.time)


def _board(c: Core) -> Board:
    assert c.built is not None
    return c.built.board


def _told(runtime: FakeRuntime, member: str, needle: str) -> list[str]:
    return [part.text for process in runtime.opened if process.spec.member == member
            for turn in process.turns for part in turn.parts
            if isinstance(part, TextPart) and needle in part.text]


async def test_an_issue_becomes_a_task_once_and_its_close_cancels_it(tmp_path: Path) -> None:
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_label("teamctl")
        fake.add_issue("Fix the login form", body="It 500s on submit.", labels=("teamctl",))
        fake.add_issue("not ours", labels=("other",))
        async with core(tmp_path, FakeRuntime()) as c:
            forge = _forge(fake)
            try:
                first = await _intake(c, forge).poll()
                again = await _intake(c, forge).poll()  # a new Intake: the journal's record
                fake.edit_issue(1, state="closed")
                closed = await _intake(c, forge).poll()
                after = await _intake(c, forge).poll()
            finally:
                await forge.aclose()
            [task_id] = first.created
            page = await _board(c).get(task_id, "web")
    assert page.task.title == "#1: Fix the login form"
    assert page.task.body.startswith("From https://github.com/octo-org/web/issues/1 ")
    assert "It 500s on submit." in page.task.body
    assert again.created == again.edited == again.cancelled == ()
    assert closed.cancelled == (task_id,) and page.task.status == "cancelled"
    assert after.cancelled == ()  # the closed issue is not looked up again


async def test_an_issues_blocked_by_and_task_list_become_the_tasks_dependencies(
        tmp_path: Path) -> None:
    """``blocked by #1`` and a task list's ``- [ ] #4`` make the tasks wait, in the round
    that takes both ends (#4 is labelled a round later); a cycle between two issues keeps one
    edge and the round goes on; an edit that adds a reference links it, once."""
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_label("teamctl")
        fake.add_issue("API", labels=("teamctl",))  # 1
        fake.add_issue("UI", body="Blocked by #1, needs the API.", labels=("teamctl",))  # 2
        fake.add_issue("Epic", body="- [ ] #4\n- [x] #99 not ours", labels=("teamctl",))  # 3
        fake.add_issue("Later", body="", labels=())  # 4: not ours yet
        fake.add_issue("A", body="depends on #6", labels=("teamctl",))  # 5
        fake.add_issue("B", body="Depends on: #5", labels=("teamctl",))  # 6
        async with core(tmp_path, FakeRuntime()) as c:
            forge = _forge(fake)
            try:
                first = await _intake(c, forge).poll()
                fake.edit_issue(4, labels=[fake.state.labels["teamctl"]])
                second = await _intake(c, forge).poll()
                fake.edit_issue(1, body="blocked by #4")
                third = await _intake(c, forge).poll()
                fake.edit_issue(1, body="blocked by #4 (still)")
                fourth = await _intake(c, forge).poll()
            finally:
                await forge.aclose()
            api, ui, epic, a, b = first.created
            [later] = second.created
            shown = {t: await _board(c).get(t, "web") for t in (api, ui, epic, a, b)}
    assert shown[ui].depends_on == [api]
    assert shown[epic].depends_on == [later]  # linked in the round that took #4
    assert (shown[a].depends_on, shown[b].depends_on) in (([b], []), ([], [a]))  # one edge
    assert third.edited == fourth.edited == (api,)
    assert shown[api].depends_on == [later]
    assert [e.kind for e in shown[api].events].count("deps") == 1  # not written again


async def test_an_edited_issue_rewrites_the_body_and_tells_the_owner(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_issue("Fix it", body="first text", labels=("teamctl",))
        async with core(tmp_path, runtime) as c:
            await c.teams.launch(team_config(tmp_path, {"name": "a"}), "t.toml", wait=True,
                                 timeout=10)
            forge = _forge(fake)
            try:
                [task_id] = (await _intake(c, forge).poll()).created
                await _board(c).assign(task_id, Assignee("a", c.supervisor.member(
                    "web", "a").epoch), by=OPERATOR)
                fake.edit_issue(1, body="second text, with a new step")
                edited = await _intake(c, forge).poll()
                twice = await _intake(c, forge).poll()
            finally:
                await forge.aclose()

            async def reminded() -> bool:  # the told turn ended silent on the board
                page = await _board(c).get(task_id, "web")
                return any(n.kind == "reminder" for n in page.notices)
            await until(reminded)
            page = await _board(c).get(task_id, "web")
    assert edited.edited == (task_id,) and twice.edited == ()
    assert "second text, with a new step" in page.task.body
    assert "first text" not in page.task.body
    # the edit told once; the fake's answer said nothing on the board, so teamctl's reminder
    # (board/_silence.py) follows it — the race that made this test fail under load
    assert [n.kind for n in page.notices] == ["forge_edited", "reminder"]
    assert len(_told(runtime, "a", "was edited on GitHub")) == 1


async def test_hostile_titles_and_bodies_reach_the_board_as_data(tmp_path: Path) -> None:
    hostile_title = "\x1b]52;c;cm0gLXJmIH4=\x07<script>alert(1)</script>\u202e" + "t" * 300
    huge = "\x1b[2J" + "<img src=x onerror=alert(1)>\r\n" * 4000  # ~120 KiB with marks
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_issue(hostile_title, body=huge, labels=("teamctl",))
        fake.add_issue("", body=None, labels=("teamctl",))
        async with core(tmp_path, FakeRuntime()) as c:
            forge = _forge(fake)
            try:
                created = (await _intake(c, forge).poll()).created
            finally:
                await forge.aclose()
            pages = [await _board(c).get(t, "web") for t in created]
    title, body = pages[0].task.title, pages[0].task.body
    assert "\x1b" not in title + body and "\x07" not in title and "\u202e" not in title
    assert "\u241b]52;c;" in title and "<U+202E>" in title  # shown as marks, not dropped
    assert len(title) == 200 and title.endswith("…")
    assert len(body.encode()) <= 64 * 1024
    assert "more characters: read the whole issue at https://github.com/" in body
    assert "<img src=x onerror=alert(1)>" in body  # markup kept as text, escaped where shown
    assert pages[1].task.title == "#2: (no title)"


async def test_a_launched_team_takes_its_issues_and_no_member_sees_the_token(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's loop (daemon/forge/_service.py) through the core: the team launched, its
    first round runs at once; the token is in the daemon's environment, and the member's
    whole environment (as its runtime builds it) holds no trace of it."""
    monkeypatch.setenv("TEAMCTL_T_GH_TOKEN", _TOKEN)
    runtime = FakeRuntime()
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_issue("From the forge", body="please", labels=("teamctl",))
        config = team_config(tmp_path, {"name": "a"}).model_copy(update={
            "forge": ForgeSection.model_validate({
                "github": {"repo": "octo-org/web", "token_env": "TEAMCTL_T_GH_TOKEN",
                           "api": fake.url},
                "intake": {"label": "teamctl"}})})
        async with core(tmp_path, runtime) as c:
            await c.teams.launch(config, "t.toml", wait=True, timeout=10)

            async def listed() -> bool:
                return bool((await _board(c).listing("web")).tasks)
            await until(listed)
            [task] = (await _board(c).listing("web")).tasks
            assert c.built is not None
            status = c.built.forges.status("web")
            envs = [member_environ({}, process.spec.env) for process in runtime.opened]
    assert task.title == "#1: From the forge"
    assert status is not None and status.error is None and status.rounds >= 1
    assert status.rate is not None and status.rate.remaining is not None
    assert envs and all(_TOKEN not in repr(env) for env in envs)
    assert all("TEAMCTL_T_GH_TOKEN" not in env for env in envs)
    assert set(fake.state.auth_headers) == {f"Bearer {_TOKEN}"}


async def test_a_spent_rate_limit_makes_the_loop_wait_until_its_reset_shown_in_status(
        tmp_path: Path) -> None:
    """The loop's wait after a spent window is the time to its reset (not the poll interval),
    and status says until when; nothing is sent meanwhile, even when a landing pokes it."""
    waits: list[float] = []
    parked = anyio.Event()

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        parked.set()
        await anyio.Event().wait()  # the test ends the loop

    with FakeGitHub(token=_TOKEN) as fake:
        fake.spend_rate_limit(reset=10_000)
        config = team_config(tmp_path, {"name": "a"}).model_copy(update={
            "forge": ForgeSection.model_validate({
                "github": {"repo": "octo-org/web", "token_env": "T", "api": fake.url},
                "intake": {"label": "teamctl"}, "poll_interval": 30})})
        async with core(tmp_path, FakeRuntime()) as c, anyio.create_task_group() as tg:
            assert c.built is not None
            forges = Forges(c.store, c.built.board, lambda _team: config, tg,
                            open_forge=open_forge, environ={"T": _TOKEN}, clock=lambda: 4_000.0,
                            sleep=sleep)
            # no member launched here: the supervisor's observer is called by hand
            await forges.launched(_Launched("web"))  # type: ignore[arg-type]
            with anyio.fail_after(10):
                await parked.wait()
            asked = len(fake.state.requests)
            forges.poke("web")  # a landing: it waits for the reset all the same
            await all_blocked()
            doc = await forges.doc("web")
            tg.cancel_scope.cancel()
    assert waits == [6_000.0] and len(fake.state.requests) == asked
    assert doc is not None and doc.waiting_until == 10_000 and doc.remaining == 0
    assert doc.error is not None and doc.error.startswith("forge_rate_limited")
    assert _TOKEN not in repr(doc)


class _Launched:
    def __init__(self, team: str) -> None:
        self.team = team


async def test_write_back_comments_on_claim_review_and_done_once_each(tmp_path: Path) -> None:
    runtime = FakeRuntime()
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_issue("Fix it", labels=("teamctl",))
        async with core(tmp_path, runtime) as c:
            await c.teams.launch(team_config(tmp_path, {"name": "a"}), "t.toml", wait=True,
                                 timeout=10)
            forge = _forge(fake)
            back = WriteBack(team="web", repo="octo-org/web", forge=forge,
                             board=_board(c), journal=c.store)
            try:
                [task_id] = (await _intake(c, forge).poll()).created
                pending = await back.round()
                await _board(c).assign(task_id, Assignee("a", c.supervisor.member(
                    "web", "a").epoch), by=OPERATOR)
                claimed = await back.round()
                again = await back.round()
                await _board(c).complete(task_id, by=Actor("a"), summary="fixed @everyone")
                done = await back.round()
                after = await back.round()
            finally:
                await forge.aclose()
    assert pending == [] and again == [] and after == []
    assert claimed == [(1, "claimed")] and done == [(1, "done")]
    assert fake.comments_on(1) == [f"teamctl: T{task_id} was claimed by `a`.",
                                   f"teamctl: T{task_id} is done."]


async def test_write_back_says_done_with_the_pull_request_once_it_is_opened(
        tmp_path: Path) -> None:
    """With pull requests, a team that integrates: "done" waits while the task has not
    landed (no row), while its pull request is not opened (a row without a number), and is
    then said once, naming the pull request's number and page."""
    from orchestrator.daemon.forge import _pull_journal as pj

    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_issue("Fix it", labels=("teamctl",))
        async with core(tmp_path, FakeRuntime()) as c:
            await c.teams.launch(team_config(tmp_path, {"name": "a"}), "t.toml", wait=True,
                                 timeout=10)
            forge = _forge(fake)
            back = WriteBack(team="web", repo="octo-org/web", forge=forge,
                             board=_board(c), journal=c.store, pulls=True, integrates=True)
            try:
                [task_id] = (await _intake(c, forge).poll()).created
                await _board(c).assign(task_id, Assignee("a", c.supervisor.member(
                    "web", "a").epoch), by=OPERATOR)
                await _board(c).complete(task_id, by=Actor("a"), summary="fixed")
                unlanded = await back.round()
                await c.store.run(pj.want, "web", "octo-org/web", task=task_id,
                                  branch=f"teamctl/web/T{task_id}", source="/r", commit="c1",
                                  now=1.0)
                unopened = await back.round()
                await c.store.run(pj.update, "web", "octo-org/web", task_id, 2.0, number=7,
                                  url="https://github.com/octo-org/web/pull/7\x1b[2J",
                                  state="open")
                done = await back.round()
                after = await back.round()
            finally:
                await forge.aclose()
    assert unlanded == [] and unopened == [] and after == []
    assert done == [(1, "done")]
    assert fake.comments_on(1) == [(
        f"teamctl: T{task_id} is done: pull request #7, "
        "https://github.com/octo-org/web/pull/7\u241b[2J.")]
