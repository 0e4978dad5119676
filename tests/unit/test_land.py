"""The merge queue (orchestrator/daemon/land/; docs/land.md), in process on the daemon's own
core with a real git repository: done tasks land on the integration branch one at a time and in
order; a conflict or a failing integration check goes back to the owner, who is told what and
how; after ``integrate_retries`` the task fails to the operator; a daemon that died mid-way
leaves the branch at its last good commit and the entry queued (or landed, never twice); the
member's branch is data — no hook, filter or fsmonitor of the repository runs."""

from __future__ import annotations

import shlex
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from orchestrator.contracts import TextPart
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor, Assignee
from orchestrator.errors import IntegrateRefused
from tests.support.fakes import Core, FakeRuntime, core
from tests.support.git import git
from tests.support.land import commit_in, integrating_team, land_repo, settled_entry, tip
from tests.support.settle import until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.land import Land

pytestmark = pytest.mark.anyio
PY = shlex.quote(sys.executable)
BRANCH = "teamctl/web/main"


@asynccontextmanager
async def _team(tmp_path: Path, config: TeamConfig) -> AsyncIterator[tuple[Core, Land, Board]]:
    async with core(tmp_path, FakeRuntime()) as c:
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        assert c.built is not None
        yield c, c.built.land, c.built.board


def _tree(c: Core, member: str) -> Path:
    return Path(c.supervisor.member("web", member).workdir)


async def _task(c: Core, board: Board, member: str, title: str) -> int:
    task = await board.create("web", title, created_by=OPERATOR,
                              assignee=Assignee(member, c.supervisor.member("web",
                                                                            member).epoch))
    return task.id


async def _done(board: Board, task: int, member: str) -> str:
    return (await board.complete(task, by=Actor(member), summary="done", team="web")).state


def _told(c: Core, member: str) -> list[str]:
    """What teamctl's messages to ``member`` said (the turns it was given)."""
    return [part.text for process in c.runtime.opened if process.spec.member == member
            for turn in process.turns for part in turn.parts if isinstance(part, TextPart)]


def _files(repo: Path, ref: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", ref).split())


async def test_two_tasks_that_merge_cleanly_land_in_order(tmp_path: Path) -> None:
    """Two members' done tasks land on teamctl/web/main, the first first, each as a merge
    commit naming its task; the operator's branch and checkout are never touched."""
    repo = land_repo(tmp_path / "repo")
    main_before = git(repo, "rev-parse", "main").strip()
    async with _team(tmp_path, integrating_team(repo, "a", "b", check="true")) as (c, _, board):
        t1, t2 = await _task(c, board, "a", "add a"), await _task(c, board, "b", "add b")
        commit_in(_tree(c, "a"), "a.txt", "from a\n")
        commit_in(_tree(c, "b"), "b.txt", "from b\n")
        assert await _done(board, t1, "a") == "done"
        assert await _done(board, t2, "b") == "done"
        first, second = await settled_entry(c, t1), await settled_entry(c, t2)
        shown = await board.get(t1, "web")
    assert (first.state, second.state) == ("landed", "landed")
    assert first.id < second.id
    assert tip(repo, BRANCH) == second.result
    assert {"a.txt", "b.txt", "README.md"} <= _files(repo, BRANCH)
    subjects = git(repo, "log", "--format=%s", "--first-parent", BRANCH).splitlines()
    assert subjects[:2] == [f"T{t2}: add b (b)", f"T{t1}: add a (a)"]
    assert git(repo, "rev-parse", "main").strip() == main_before
    assert not (repo / "a.txt").exists()  # the operator's checkout as it was
    assert [e.kind for e in shown.events][-2:] == ["queued", "landed"]


async def test_what_the_owner_left_uncommitted_is_committed_with_the_tasks_title(
        tmp_path: Path) -> None:
    repo = land_repo(tmp_path / "repo")
    async with _team(tmp_path, integrating_team(repo, "a")) as (c, _, board):
        t1 = await _task(c, board, "a", "wire the form")
        (_tree(c, "a") / "form.txt").write_text("the form\n")
        await _done(board, t1, "a")
        entry = await settled_entry(c, t1)
        events = (await board.get(t1, "web")).events
    assert entry.state == "landed"
    assert git(repo, "log", "-1", "--format=%s", entry.commit).strip() == f"T{t1}: wire the form"
    assert "form.txt" in _files(repo, BRANCH)
    assert any("teamctl committed what was left" in (e.note or "") for e in events)


async def test_a_conflict_goes_back_to_its_owner_naming_the_file_and_lands_once_fixed(
        tmp_path: Path) -> None:
    """The second of two tasks editing one line conflicts: it is back in progress under its
    owner, who is told the file and the hunk; the owner merges the branch, resolves, completes
    again, and it lands."""
    repo = land_repo(tmp_path / "repo")
    async with _team(tmp_path, integrating_team(repo, "a", "b")) as (c, _, board):
        t1, t2 = await _task(c, board, "a", "one"), await _task(c, board, "b", "two")
        commit_in(_tree(c, "a"), "README.md", "the project by a\nline two\nline three\n")
        commit_in(_tree(c, "b"), "README.md", "the project by b\nline two\nline three\n")
        await _done(board, t1, "a")
        assert (await settled_entry(c, t1)).state == "landed"
        await _done(board, t2, "b")
        back = await settled_entry(c, t2)
        assert back.state == "sent_back" and "README.md" in (back.note or "")
        task = (await board.get(t2, "web")).task
        assert (task.state, task.owner) == ("in_progress", "b")
        await until(lambda: _async(any("README.md" in t and "did not land" in t
                                       for t in _told(c, "b"))))
        told = next(t for t in _told(c, "b") if "did not land" in t)
        assert "+the project by b" in told or "the project by b" in told
        assert f"git merge {BRANCH}" in told
        tree = _tree(c, "b")
        merged = _run_git(tree, "merge", BRANCH)
        assert merged != 0  # the same conflict, in its own worktree
        commit_in(tree, "README.md", "the project by a and b\nline two\nline three\n",
                  "resolve")
        await _done(board, t2, "b")
        landed = await settled_entry(c, t2)
    assert landed.state == "landed" and landed.attempt == 2
    assert git(repo, "show", f"{BRANCH}:README.md").startswith("the project by a and b")


async def _async(value: bool) -> bool:
    return value


def _run_git(cwd: Path, *args: str) -> int:
    import subprocess
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(cwd),
                               "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
                          ).returncode


async def test_a_failing_check_goes_back_then_after_the_retries_to_the_operator(
        tmp_path: Path) -> None:
    """The integration check fails on the merged result: the owner is told the command, its
    exit and its output's end (redacted), twice; the third failure fails the task for the
    operator, and the branch never moved."""
    repo = land_repo(tmp_path / "repo")
    check = f"{PY} -c \"print('BROKEN build sk-ant-api03-{'x' * 40}'); raise SystemExit(3)\""
    async with _team(tmp_path, integrating_team(repo, "a", check=check, retries=3)) as (
            c, _, board):
        t1 = await _task(c, board, "a", "breaks")
        for attempt in (1, 2, 3):
            commit_in(_tree(c, "a"), "x.txt", f"attempt {attempt}\n")
            await _done(board, t1, "a")
            entry = await settled_entry(c, t1)
            assert entry.attempt == attempt
            if attempt < 3:
                assert entry.state == "sent_back"
                assert (await board.get(t1, "web")).task.state == "in_progress"
        task = (await board.get(t1, "web")).task
        told = [t for t in _told(c, "a") if "did not land" in t]
    assert entry.state == "needs_you" and task.state == "failed"
    assert tip(repo, BRANCH) == git(repo, "rev-parse", "main").strip()  # made, never moved
    assert len(told) == 2
    assert "(exit 3)" in told[0] and "BROKEN build" in told[0]
    assert "sk-ant-api03-xxxx" not in told[0]
    assert "2 more attempts" in told[0] and "1 more attempt " in told[1]


async def test_an_integrate_of_a_task_that_is_not_done_or_of_a_team_without_a_queue_is_refused(
        tmp_path: Path) -> None:
    repo = land_repo(tmp_path / "repo")
    async with _team(tmp_path, integrating_team(repo, "a")) as (c, land, board):
        t1 = await _task(c, board, "a", "not yet")
        with pytest.raises(IntegrateRefused, match="in_progress, not done"):
            await land.integrate("web", t1)
    plain = integrating_team(land_repo(tmp_path / "repo2"), "a")
    plain = type(plain).model_validate({**plain.model_dump(), "team": {
        **plain.team.model_dump(), "integrate": None}})
    async with _team(tmp_path / "2", plain) as (c, land, board):
        t1 = await _task(c, board, "a", "x")
        await _done(board, t1, "a")
        assert await land.entries(t1) == []  # no queue: nothing entered
        with pytest.raises(IntegrateRefused, match="no \\[team\\] integrate"):
            await land.integrate("web", t1)


async def test_a_paused_queue_keeps_its_entries_until_resumed(tmp_path: Path) -> None:
    repo = land_repo(tmp_path / "repo")
    async with _team(tmp_path, integrating_team(repo, "a")) as (c, land, board):
        await land.queue("web", pause=True)
        t1 = await _task(c, board, "a", "waits")
        commit_in(_tree(c, "a"), "w.txt", "w\n")
        await _done(board, t1, "a")
        doc = await land.queue("web")
        assert doc.paused and [e.task for e in doc.waiting] == [t1]
        assert tip(repo, BRANCH) is None
        await land.queue("web", resume=True)
        assert (await settled_entry(c, t1)).state == "landed"


async def test_a_branch_checked_out_somewhere_is_never_moved(tmp_path: Path) -> None:
    """The integration branch is the operator's checked-out branch: teamctl refuses to move
    it under that checkout and the task goes to the operator."""
    repo = land_repo(tmp_path / "repo")
    config = integrating_team(repo, "a")
    config = type(config).model_validate({**config.model_dump(), "team": {
        **config.team.model_dump(), "integrate": {"branch": "main"}}})
    before = git(repo, "rev-parse", "main").strip()
    async with _team(tmp_path, config) as (c, _, board):
        t1 = await _task(c, board, "a", "x")
        commit_in(_tree(c, "a"), "x.txt", "x\n")
        await _done(board, t1, "a")
        entry = await settled_entry(c, t1)
    assert entry.state == "needs_you" and "checked out in" in (entry.note or "")
    assert git(repo, "rev-parse", "main").strip() == before


@pytest.mark.parametrize("mode", ["squash", "rebase"])
async def test_squash_and_rebase_land_the_owners_changes(tmp_path: Path, mode: str) -> None:
    repo = land_repo(tmp_path / "repo")
    async with _team(tmp_path, integrating_team(repo, "a", "b", mode=mode)) as (c, _, board):
        t1, t2 = await _task(c, board, "a", "one"), await _task(c, board, "b", "two")
        commit_in(_tree(c, "a"), "a.txt", "a\n")
        commit_in(_tree(c, "a"), "a2.txt", "a2\n")
        commit_in(_tree(c, "b"), "b.txt", "b\n")
        await _done(board, t1, "a")
        await _done(board, t2, "b")
        assert (await settled_entry(c, t1)).state == "landed"
        assert (await settled_entry(c, t2)).state == "landed"
    log = git(repo, "log", "--format=%P %s", BRANCH).splitlines()
    assert all(len(line.split(" ", 2)[0].split()) <= 1 for line in log)  # no merge commit
    assert {"a.txt", "a2.txt", "b.txt"} <= _files(repo, BRANCH)
    if mode == "squash":
        assert len(log) == 3 and log[0].endswith(f"T{t2}: two (b)")


async def test_a_daemon_that_died_mid_integration_recovers_landed_or_queued_never_twice(
        tmp_path: Path) -> None:
    """Entries left running: the one whose result the branch already holds is landed (the
    move happened, its record did not); the one it does not hold is queued again and lands
    once."""
    repo = land_repo(tmp_path / "repo")
    async with _team(tmp_path, integrating_team(repo, "a", "b")) as (c, land, board):
        await land.queue("web", pause=True)
        t1, t2 = await _task(c, board, "a", "one"), await _task(c, board, "b", "two")
        commit_in(_tree(c, "a"), "a.txt", "a\n")
        commit_in(_tree(c, "b"), "b.txt", "b\n")
        await _done(board, t1, "a")
        await _done(board, t2, "b")
        e1, e2 = (await land.entries(t1))[0], (await land.entries(t2))[0]
        main = git(repo, "rev-parse", "main").strip()
        git(repo, "branch", BRANCH, main)
        # as a daemon killed after the first's branch move, and during the second's check
        moved = git(repo, "commit-tree", "-p", main, "-p", e1.commit, "-m", "landed",
                    f"{e1.commit}^{{tree}}").strip()
        git(repo, "update-ref", f"refs/heads/{BRANCH}", moved)
        journal = land._journal
        await journal.move(e1.id, "running", phase="landing", onto=main, result=moved)
        await journal.move(e2.id, "running", phase="checking", onto=moved, result="f" * 40)
        (c.home.root / "land" / "web" / str(e2.id)).mkdir(parents=True)
        await journal.set_paused("web", False)
        await land.start()
        first, second = await settled_entry(c, t1), await settled_entry(c, t2)
    assert first.state == "landed" and first.result == moved
    assert second.state == "landed" and second.result != "f" * 40
    assert git(repo, "rev-list", "--count", f"{main}..{BRANCH}", "--first-parent"
               ).strip() == "2"  # each landed once
    assert not (c.home.root / "land" / "web" / str(e2.id)).exists()


async def test_the_members_branch_is_data_no_hook_filter_or_fsmonitor_runs(
        tmp_path: Path) -> None:
    """Hooks, an fsmonitor and a filter planted in the repository's configuration (as a
    member that writes .git would), attributes in the member's commit naming the filter:
    both tasks land — the snapshot of what was left, the scratch worktree's checkout, the
    merge and the branch's move all ran git — and none of them ran as the operator."""
    repo = land_repo(tmp_path / "repo")
    canary = tmp_path / "canary"
    async with _team(tmp_path, integrating_team(repo, "a", "b", mode="merge")) as (
            c, _, board):
        t1, t2 = await _task(c, board, "a", "one"), await _task(c, board, "b", "two")
        (_tree(c, "a") / ".gitattributes").write_text("* filter=evil\n")
        commit_in(_tree(c, "a"), "a.txt", "a\n")
        commit_in(_tree(c, "b"), "b.txt", "b\n")
        (_tree(c, "b") / "left.txt").write_text("left uncommitted\n")
        _plant(repo, canary)
        await _done(board, t1, "a")
        await _done(board, t2, "b")
        assert (await settled_entry(c, t1)).state == "landed"
        assert (await settled_entry(c, t2)).state == "landed"
    assert "left.txt" in _files(repo, BRANCH)
    assert not canary.exists(), canary.read_text()


def _plant(repo: Path, canary: Path) -> None:
    """Every hook a merge, a checkout, a commit or a ref move runs, and the configuration keys
    that run programs, each appending its name to ``canary``."""
    hooks = repo / ".git" / "hooks"
    for hook in ("post-checkout", "post-merge", "pre-commit", "commit-msg", "pre-merge-commit",
                 "prepare-commit-msg", "post-commit", "reference-transaction", "pre-rebase",
                 "post-rewrite", "pre-auto-gc"):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> {canary}\n")
        (hooks / hook).chmod(0o755)
    for key, value in (("core.fsmonitor", f"echo fsmonitor >> {canary}; false"),
                       ("filter.evil.clean", f"sh -c 'echo clean >> {canary}; cat'"),
                       ("filter.evil.smudge", f"sh -c 'echo smudge >> {canary}; cat'"),
                       ("filter.evil.process", f"sh -c 'echo process >> {canary}'"),
                       ("filter.evil.required", "true"),
                       ("core.hooksPath", str(hooks)),
                       ("gpg.program", f"sh -c 'echo gpg >> {canary}'"),
                       ("commit.gpgSign", "true")):
        git(repo, "config", key, value)


def test_queue_models_refuse_pause_and_resume_together() -> None:
    from pydantic import ValidationError

    from orchestrator.protocol.land import IntegrateParams, QueueParams
    with pytest.raises(ValidationError):
        QueueParams(pause=True, resume=True)
    with pytest.raises(ValidationError):
        IntegrateParams.model_validate({"id": "3"})
    assert IntegrateParams.model_validate({"id": "T3"}).id == 3



async def test_a_task_that_could_not_land_needs_the_operator_until_sent_back(
        tmp_path: Path) -> None:
    """After its retries the task is a needs-you item (kind ``integrate``: [notify] pushes
    it) naming what failed and the command that sends it back; assigning it back settles it."""
    from orchestrator.daemon.notify._needs_you import gather

    repo = land_repo(tmp_path / "repo")
    async with _team(tmp_path, integrating_team(repo, "a", check="false", retries=1)) as (
            c, land, board):
        t1 = await _task(c, board, "a", "never passes")
        commit_in(_tree(c, "a"), "x.txt", "x\n")
        await _done(board, t1, "a")
        assert (await settled_entry(c, t1)).state == "needs_you"
        assert c.built is not None
        found = await gather("web", teams=c.teams, approvals=c.approvals, board=board,
                             land=land)
        [item] = [i for i in found if i.kind == "integrate"]
        await board.assign(t1, Assignee("a", c.supervisor.member("web", "a").epoch),
                           by=OPERATOR)
        after = await gather("web", teams=c.teams, approvals=c.approvals, board=board,
                             land=land)
    assert item.title == f"T{t1} could not land"
    assert "'false' failed (exit 1)" in item.detail
    assert f"teamctl task assign T{t1} a" in item.detail
    assert not [i for i in after if i.kind == "integrate"]


async def test_a_reviewed_task_lands_what_was_reviewed_not_the_owners_later_work(
        tmp_path: Path) -> None:
    """With review_by: what the owner had when its task went to review (its leftovers
    committed then) is what lands on approval — what it wrote afterwards, for its next task,
    stays in its worktree, uncommitted."""
    repo = land_repo(tmp_path / "repo")
    config = integrating_team(repo, "a")
    config = type(config).model_validate({**config.model_dump(), "board": {
        **config.board.model_dump(), "review_by": "operator"}})
    async with _team(tmp_path, config) as (c, _, board):
        t1 = await _task(c, board, "a", "the form")
        (_tree(c, "a") / "form.txt").write_text("the form\n")
        assert await _done(board, t1, "a") == "review"
        (_tree(c, "a") / "next.txt").write_text("the next task's work\n")
        await board.review(t1, by=OPERATOR, approve=True, note="good")
        entry = await settled_entry(c, t1)
        left = git(_tree(c, "a"), "status", "--porcelain")
    assert entry.state == "landed"
    assert "form.txt" in _files(repo, BRANCH) and "next.txt" not in _files(repo, BRANCH)
    assert "?? next.txt" in left
