"""Pull requests (orchestrator/daemon/forge/_pulls.py; docs/forge.md) on the daemon's own core:
real git (a local bare repository is the remote), the real GitHub client over HTTP against the
local fake, fake members. A labelled issue's task lands and gets a draft pull request with
``Closes #N``; a failing check goes back to the owner with its output, the fix is pushed to the
same pull request, green and approved it is merged and the fake closes the issue; a change
request's two comments reach the owner once, across a restart of the core on the same journal;
a token without push rights is said, naming the permission; hostile check output reaches the
owner as data."""

from __future__ import annotations

from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.config import TeamConfig
from orchestrator.contracts import TextPart
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from orchestrator.daemon.forge import _pull_journal as pj
from orchestrator.daemon.migrations import open_journal
from orchestrator.daemon.notify._needs_you import gather
from tests.support.fake_github import FakeGitHub
from tests.support.fakes import Core, FakeRuntime, core
from tests.support.git import git
from tests.support.land import commit_in, land_repo, settled_entry
from tests.support.settle import until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from orchestrator.daemon.forge import Forges

pytestmark = pytest.mark.anyio
TOKEN = "ghp_pulls-secret-0042"
ENV = "TEAMCTL_T_GH_PULLS"
BRANCH = "teamctl/web/T1"


def _remote(tmp_path: Path, repo: Path) -> Path:
    """GitHub's side of the push: a bare clone of the repository (its ``main``)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    return remote


@contextmanager
def _github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, push: bool = True
            ) -> Iterator[tuple[FakeGitHub, Path, Path]]:
    """The fake GitHub with issue #1 labelled, the repository and its bare remote; the token
    in the daemon's environment."""
    monkeypatch.setenv(ENV, TOKEN)
    repo = land_repo(tmp_path / "repo")
    remote = _remote(tmp_path, repo)
    rights = {"admin": False, "maintain": False, "push": push, "triage": True, "pull": True}
    with FakeGitHub(token=TOKEN, remote=remote, permissions=rights) as fake:
        fake.add_label("teamctl")
        fake.add_issue("Fix the form", labels=("teamctl",))
        yield fake, repo, remote


def _config(repo: Path, fake: FakeGitHub, remote: Path, **forge: object) -> TeamConfig:
    return TeamConfig.model_validate({
        "team": {"name": "web", "workdir": str(repo), "worktree": True,
                 "integrate": {"check": "true"}},
        "members": [{"name": "a", "runtime": "claude", "start_timeout": 5.0}],
        "forge": {"github": {"repo": "octo-org/web", "token_env": ENV, "api": fake.url},
                  "intake": {"label": "teamctl"}, "pull_requests": True,
                  "remote": str(remote), **forge}})


@asynccontextmanager
async def _team(tmp_path: Path, config: TeamConfig, runtime: FakeRuntime,
                again: bool = False) -> AsyncIterator[Core]:
    """The team on a core; ``again``: on the journal the last core left (a daemon that
    restarts)."""
    journal = open_journal(tmp_path / "home" / "state.db") if again else None
    async with core(tmp_path, runtime, store=journal) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        yield c


def _forges(c: Core) -> Forges:
    assert c.built is not None
    return c.built.forges


async def _rounds(c: Core, at_least: int = 1) -> None:
    async def done() -> bool:
        status = _forges(c).status("web")
        return status is not None and status.rounds >= at_least
    await until(done, 20)


async def _poll(c: Core) -> None:
    """One more round of the team's loop, now."""
    status = _forges(c).status("web")
    before = 0 if status is None else status.rounds + (status.error is not None)
    _forges(c).poke("web")

    async def done() -> bool:
        now = _forges(c).status("web")
        return now is not None and now.rounds + (now.error is not None) > before
    await until(done, 20)


def _told(runtime: FakeRuntime, needle: str) -> list[str]:
    return [part.text for process in runtime.opened if process.spec.member == "a"
            for turn in process.turns for part in turn.parts
            if isinstance(part, TextPart) and needle in part.text]


async def _land(c: Core, task: int, name: str, text: str) -> str:
    assert c.built is not None
    tree = Path(c.supervisor.member("web", "a").workdir)
    commit_in(tree, name, text)
    await c.built.board.complete(task, by=Actor("a"), summary=f"wrote {name}", team="web")
    entry = await settled_entry(c, task)
    assert entry.state == "landed", entry.note
    return entry.commit


async def _claimed_issue(c: Core, fake: FakeGitHub) -> int:
    """Issue #1 taken as a task (the first round), assigned to a."""
    assert c.built is not None
    await _rounds(c)
    task = (await c.built.board.listing("web")).tasks[0].id
    await c.built.board.assign(task, Assignee("a", c.supervisor.member("web", "a").epoch),
                               by=OPERATOR)
    return task


async def _pulled(fake: FakeGitHub, c: Core, head: str, branch: str = BRANCH
                  ) -> dict[str, object]:
    """The pull request of ``branch`` once its head is ``head``: looked at after each round of
    the team's loop (each ends with a new status, failed or not), one more asked for while it
    is not — a poke a round, not one a look."""
    with anyio.fail_after(20):
        while (pull := fake.pull_of(branch)) is None or pull["head"]["sha"] != head:
            await _another_round(c)
    return pull


async def _another_round(c: Core) -> None:
    """The team's loop poked, and the end of a round awaited (its status made anew)."""
    before = _forges(c).status("web")
    _forges(c).poke("web")
    await until(lambda: _async(_forges(c).status("web") is not before), 20)


async def test_a_landed_issue_task_gets_a_draft_pull_request_that_closes_the_issue_once_merged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue → task → done → landed → pushed to teamctl/web/T1 → a draft pull request with
    the summary and Closes #1; a failing check → the owner is told with its output and gets
    the task back; its fix lands and is pushed to the same pull request; green → ready; an
    approval → merged (auto_merge) → the fake closes issue #1."""
    runtime = FakeRuntime()
    with _github(tmp_path, monkeypatch) as (fake, repo, remote):
        async with _team(tmp_path, _config(repo, fake, remote, auto_merge=True), runtime) as c:
            assert c.built is not None
            board = c.built.board
            task = await _claimed_issue(c, fake)
            first = await _land(c, task, "form.txt", "the form\n")
            pull = await _pulled(fake, c, first)
            assert git(remote, "rev-parse", BRANCH).strip() == first
            # status reads the pull requests from the journal when asked, not from the last
            # round's copy: a row written in the middle of a round shows at once
            await c.store.run(pj.update, "web", "octo-org/web", task, 0.0, note="mid-round")
            mid = await _forges(c).doc("web")
            assert mid is not None and [p.note for p in mid.pulls] == ["mid-round"]
            fake.add_check_run(first, "tests", "failure", summary="1 failed",
                               text="E   assert form() == 'ok'\nFAILED test_form.py::test_it")
            await _poll(c)
            await until(lambda: _async(bool(_told(runtime, "FAILED test_form.py"))))
            back = (await board.get(task, "web")).task
            assert (back.status, back.owner) == ("in_progress", "a")
            fixed = await _land(c, task, "form.txt", "the form, fixed\n")
            again = await _pulled(fake, c, fixed)
            fake.add_check_run(fixed, "tests", "success")
            await _poll(c)
            assert fake.pull_of(BRANCH)["draft"] is False  # type: ignore[index]
            fake.add_review(int(pull["number"]), "APPROVED", "good")  # type: ignore[call-overload]
            await _poll(c)
            page = await board.get(task, "web")
            status = await _forges(c).doc("web")
    assert again["number"] == pull["number"] and len(fake.state.pulls) == 1
    assert pull["title"] == "#1: Fix the form" and pull["base"]["ref"] == "main"  # type: ignore[index]
    assert "Closes #1" in str(pull["body"]) and "wrote form.txt" in str(pull["body"])
    assert fake.state.pulls[int(pull["number"])]["merged"] is True  # type: ignore[call-overload]
    assert fake.state.issues[1]["state"] == "closed"
    told = _told(runtime, "FAILED test_form.py")
    assert len(told) == 1 and "'tests' failed (failure)" in told[0] and "1 failed" in told[0]
    assert [n.kind for n in page.notices if n.kind.startswith("forge")] == ["forge_check"]
    assert page.task.status == "done"
    assert status is not None and [(p.task, p.state) for p in status.pulls] == [(task, "merged")]
    assert set(fake.state.auth_headers) == {f"Bearer {TOKEN}"}


async def _async(value: bool) -> bool:
    return value


async def test_a_change_request_with_two_comments_reaches_the_owner_once_across_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CHANGES_REQUESTED with two comments: the owner gets one message with both, each with
    its file and line; a new core on the same journal (a daemon restarted) tells nothing
    again."""
    runtime = FakeRuntime()
    with _github(tmp_path, monkeypatch) as (fake, repo, remote):
        config = _config(repo, fake, remote)
        async with _team(tmp_path, config, runtime) as c:
            task = await _claimed_issue(c, fake)
            pull = await _pulled(fake, c, await _land(c, task, "form.txt", "x\n"))
            review = fake.add_review(int(pull["number"]), "CHANGES_REQUESTED",  # type: ignore[call-overload]
                                     "two things")
            fake.add_review_comment(int(pull["number"]), review["id"], "form.py", 12,  # type: ignore[call-overload]
                                    "this drops the error")
            fake.add_review_comment(int(pull["number"]), review["id"], "form.css", None,  # type: ignore[call-overload]
                                    "<b>unused</b> \x1b[31mrule")
            await _poll(c)
            await until(lambda: _async(bool(_told(runtime, "requested changes"))))
        async with _team(tmp_path, config, runtime, again=True) as again:
            await _rounds(again)
            await _poll(again)
            assert again.built is not None
            page = await again.built.board.get(task, "web")
    told = _told(runtime, "requested changes")
    assert len(told) == 1
    assert "form.py:12:\nthis drops the error" in told[0]
    assert "form.css:\n<b>unused</b> \u241b[31mrule" in told[0] and "\x1b" not in told[0]
    assert [n.kind for n in page.notices if n.kind.startswith("forge")] == ["forge_review"]


async def test_a_token_without_push_rights_says_which_permission_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _github(tmp_path, monkeypatch, push=False) as (fake, repo, remote):
        async with _team(tmp_path, _config(repo, fake, remote), FakeRuntime()) as c:
            task = await _claimed_issue(c, fake)
            await _land(c, task, "form.txt", "x\n")
            await _poll(c)
            doc = await _forges(c).doc("web")
            waiting = await _forges(c).needs_you("web")
    assert doc is not None and doc.error is not None
    assert doc.error.startswith("forge_push_refused") and "lacks push" in doc.error
    assert [p.note for p in waiting] and "lacks push" in (waiting[0].note or "")
    assert fake.pull_of(BRANCH) is None
    assert "refs/heads/teamctl/web/T1" not in git(remote, "for-each-ref")


async def test_hostile_check_output_reaches_the_owner_as_data_and_ci_retries_then_need_you(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing check whose output is 100 KiB of markup and terminal escapes reaches the owner
    with every escape shown as its mark and cut to its bound; with ``ci_retries = 1`` the
    second failing head fails the task to the operator — a needs-you item of the notifier's,
    and the pull request's state in status."""
    runtime = FakeRuntime()
    hostile = "\x1b]52;c;cm0gLXJmIH4=\x07<script>alert(1)</script>\x1b[2J" * 2000  # ~100 KiB
    with _github(tmp_path, monkeypatch) as (fake, repo, remote):
        async with _team(tmp_path, _config(repo, fake, remote, ci_retries=1), runtime) as c:
            assert c.built is not None
            task = await _claimed_issue(c, fake)
            first = await _land(c, task, "form.txt", "x\n")
            await _pulled(fake, c, first)
            fake.add_check_run(first, "\x1b[31mlint", "failure", summary="<b>bad</b>",
                               text=hostile)
            await _poll(c)
            await until(lambda: _async(bool(_told(runtime, "failed (failure)"))))
            second = await _land(c, task, "form.txt", "y\n")
            await _pulled(fake, c, second)
            fake.add_status(second, "ci/build", "error", "the build broke")
            await _poll(c)
            waiting = await gather("web", teams=c.teams, approvals=c.built.approvals,
                                   board=None, pulls=c.built.forges)
            task_now = (await c.built.board.get(task, "web")).task
            doc = await _forges(c).doc("web")
    [told] = _told(runtime, "failed (failure)")
    assert "\x1b" not in told and "\x07" not in told
    assert "\u241b]52;c;cm0gLXJmIH4=\u2407<script>alert(1)</script>" in told
    assert "more characters (see it on GitHub)" in told and len(told) < 20_000
    assert "'\u241b[31mlint'" in told
    assert task_now.status == "failed"
    assert [i.kind for i in waiting] == ["integrate"] and "ci_retries = 1" in waiting[0].detail
    assert doc is not None and doc.pulls[0].state == "needs_you"
    assert not _told(runtime, "the build broke")  # the operator's now, not the owner's


async def test_hostile_check_output_and_review_comments_reach_the_live_view_escaped_and_cut(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing check whose name, summary and 100 KiB output carry markup, terminal escapes
    and a bidi override, and a change request whose comment's file and words do: the live
    view's task page (its lifetime, what was told) and the owner's conversation show each as
    text — every control and bidi character as its mark, then HTML-escaped — and the output
    cut as told to the owner (not 100 KiB on the page)."""
    import httpx

    from orchestrator.attachments.artifacts import ArtifactStore
    from orchestrator.daemon.web.app import View, build_app

    runtime = FakeRuntime()
    chunk = "\x1b]52;c;cm0gLXJmIH4=\x07<script>alert(1)</script>\u202egnp.exe\x1b[2J"
    hostile = chunk * (100 * 1024 // len(chunk))
    with _github(tmp_path, monkeypatch) as (fake, repo, remote):
        async with _team(tmp_path, _config(repo, fake, remote), runtime) as c:
            assert c.built is not None
            task = await _claimed_issue(c, fake)
            pull = await _pulled(fake, c, await _land(c, task, "form.txt", "x\n"))
            number = int(pull["number"])  # type: ignore[call-overload]
            fake.add_check_run(str(pull["head"]["sha"]),  # type: ignore[index]
                               "<img src=x onerror=alert(1)>\u202elint", "failure",
                               summary="<b>bad</b>\x1b[31m", text=hostile)
            review = fake.add_review(number, "CHANGES_REQUESTED", "<script>x</script>\x07")
            fake.add_review_comment(number, review["id"], "<img src=y onerror=alert(2)>.py", 3,
                                    "\u202edrop this\x1b]0;owned\x07 <iframe>")
            await _poll(c)
            await until(lambda: _async(bool(_told(runtime, "requested changes"))))
            uploads = tmp_path / "uploads"
            uploads.mkdir()
            view = View(c.teams, c.store, c.approvals, c.built.changes,
                        ArtifactStore(c.home.artifacts), c.home.logs / "teamctl.jsonl",
                        uploads, board=c.built.board, land=c.built.land)
            view.sessions.port = 8765
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(view)),
                                         base_url="http://127.0.0.1:8765") as client:
                await client.get(f"/?token={view.sessions.new_token()}")
                page = (await client.get(f"/fragments/task?id={task}")).text
                talk = (await client.get("/fragments/conversation?member=web/a")).text
                column = (await client.get("/fragments/board")).text
    for html in (page, talk, column):
        assert not set(html) & {"\x1b", "\x07", "\u202e"}
        for raw in ("<script>", "<img", "<iframe>", "<b>bad"):
            assert raw not in html
    assert "forge_check → <b>a</b>" in page and "forge_review → <b>a</b>" in page
    assert "&lt;img src=x onerror=alert(1)&gt;&lt;U+202E&gt;lint failed" in page
    assert "␛]52;c;cm0gLXJmIH4=␇&lt;script&gt;alert(1)&lt;/script&gt;&lt;U+202E&gt;gnp.exe" in talk
    assert "more characters (see it on GitHub)" in talk and len(talk) < 60_000
    assert "&lt;img src=y onerror=alert(2)&gt;.py:3:" in talk
    assert "&lt;U+202E&gt;drop this␛]0;owned␇ &lt;iframe&gt;" in talk


async def test_a_landing_while_the_forge_cannot_be_asked_gets_its_pull_request_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The token unset when the team comes up: the forge's rounds fail before GitHub is
    asked; a task lands meanwhile — before the forge's first round that reaches GitHub. Once
    the token is there, that round reads the landing from the merge queue's journal and the
    task gets its pull request."""
    with _github(tmp_path, monkeypatch) as (fake, repo, remote):
        monkeypatch.delenv(ENV)
        async with _team(tmp_path, _config(repo, fake, remote), FakeRuntime()) as c:
            assert c.built is not None

            async def failing() -> bool:
                status = _forges(c).status("web")
                return status is not None and status.error is not None
            await until(failing, 20)
            task = await c.built.board.create(
                "web", "a task of the operator's", created_by=OPERATOR,
                assignee=Assignee("a", c.supervisor.member("web", "a").epoch))
            landed = await _land(c, task.id, "form.txt", "x\n")
            missing = await _forges(c).doc("web")
            monkeypatch.setenv(ENV, TOKEN)
            await _pulled(fake, c, landed, f"teamctl/web/T{task.id}")
    assert missing is not None and missing.error is not None
    assert missing.error.startswith("forge_token"), missing.error
    assert [p["head"]["ref"] for p in fake.state.pulls.values()] == [f"teamctl/web/T{task.id}"]
