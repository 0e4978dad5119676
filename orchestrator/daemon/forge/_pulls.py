"""Pull requests (docs/forge.md): a task that landed (or is done in a worktree where the team
does not integrate) is pushed to a branch of its own, ``teamctl/<team>/T<id>``, and gets a
pull request — a draft while its checks run; each round follows every open one: a new failing
check run or commit status, or a new change request, is a task notice (once per GitHub id) to
the task's owner, who gets the task back in progress; past ``ci_retries`` failing heads the
task fails to the operator (needs you); all green marks it ready for review; approved, green
and mergeable it is merged when ``auto_merge`` says so (GitHub closes the issue it closes).
When the owner's fix lands, the same branch is pushed again: the same pull request.

``Pulls.round`` is one team's round; the journal (``_pull_journal``) is what it starts from,
so a daemon killed anywhere picks up where the record says.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog

from orchestrator.daemon.board import TEAMCTL, Notice
from orchestrator.daemon.forge import _pull_journal as pj
from orchestrator.daemon.forge._pull_messages import (
    check_text,
    needs_you_text,
    pull_body,
    pull_title,
    review_text,
)
from orchestrator.daemon.forge._push import push
from orchestrator.errors import ForgeError, TeamctlError
from orchestrator.visible import visible_line

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from orchestrator.daemon.board import Board
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.forge.protocol import Check, Forge, Pull, RepoAccess, Review
    from orchestrator.forge_config import ForgeSection
    from orchestrator.protocol.board import TaskDoc

__all__ = ["Landings", "Pulls", "branch_of", "start_mark"]

log = structlog.get_logger("teamctl.forge")
_FAILING = "forge_check"
_CHANGES = "forge_review"


def branch_of(team: str, task: int) -> str:
    """The task's branch on the forge."""
    return f"teamctl/{team}/T{task}"


class Landings(Protocol):
    """The merge queue, as the pull requests read it (daemon/land): its newest entry, the
    entries that landed after one (id, task, the owner's commit, the repository's common
    dir), and a done task's commit in its owner's worktree (with the common dir)."""

    async def last_entry(self) -> int: ...

    async def landed_after(self, team: str, after: int) -> list[tuple[int, int, str, str]]: ...

    async def worktree_commit(self, task: TaskDoc) -> tuple[str, str]: ...


async def start_mark(journal: AsyncStore, landings: Landings, team: str, repo: str) -> int:
    """The merge-queue entry the team's pull requests start after: the newest entry when it
    was first asked (kept in the journal), so every landing after it gets a pull request —
    one that lands while GitHub cannot be reached, or before the forge's first round, too."""
    since = await journal.run(pj.since, team, repo)
    if since is None:
        await journal.run(pj.started, team, repo, await landings.last_entry())
        since = await journal.run(pj.since, team, repo)
        assert since is not None
    return since


def _approved(reviews: list[Review]) -> bool:
    """Each reviewer's last verdict: one approves, none asks for changes."""
    last = {r.user: r.state for r in reviews
            if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED")}
    return "APPROVED" in last.values() and "CHANGES_REQUESTED" not in last.values()


class Pulls:
    """One team's pull requests on one forge: ``round`` once a poll."""

    def __init__(self, *, team: str, section: ForgeSection, forge: Forge, board: Board,
                 journal: AsyncStore, landings: Landings,
                 epoch_of: Callable[[str, str], int | None], clock: Callable[[], float],
                 environ: Mapping[str, str]) -> None:
        self._team = team
        self.section = section
        self._section = section
        self._repo = section.github.repo
        self.forge = forge
        self._forge = forge
        self._board = board
        self._journal = journal
        self._landings = landings
        self._epoch_of = epoch_of
        self._clock = clock
        self._environ = environ
        self._access: RepoAccess | None = None

    async def round(self) -> int:
        """Landings taken, then each followed pull request looked at; the number followed.
        Raises the first failure of the round (after the others were looked at; a rate limit
        at once)."""
        await self._adopt()
        rows = await self._journal.run(pj.active, self._team, self._repo)
        first: TeamctlError | None = None
        for row in rows:
            try:
                await self._follow(row)
            except TeamctlError as exc:  # this pull request's trouble, not the others'
                if isinstance(exc, ForgeError) and exc.until is not None:
                    raise
                await self._update(row, note=f"{exc.code}: {exc.message}"[:2000])
                log.warning("forge_pull_failed", team=self._team, task=row.task,
                            code=exc.code)
                first = first or exc
        if first is not None:
            raise first
        return len(rows)

    async def want(self, task: int, commit: str, source: str, entry: int | None = None
                   ) -> pj.PullRow:
        """The task's pull request is to show ``commit`` of the repository ``source``."""
        return await self._journal.run(pj.want, self._team, self._repo, task=task,
                                       branch=branch_of(self._team, task), source=source,
                                       commit=commit, now=self._clock(), entry=entry)

    async def _adopt(self) -> None:
        since = await start_mark(self._journal, self._landings, self._team, self._repo)
        for entry, task, commit, repo in await self._landings.landed_after(self._team, since):
            await self.want(task, commit, repo, entry)

    async def _update(self, row: pj.PullRow, **fields: object) -> None:
        await self._journal.run(pj.update, self._team, self._repo, row.task, self._clock(),
                                **fields)

    # -- a pull request's life ----------------------------------------------------------------

    async def _follow(self, row: pj.PullRow) -> None:
        if row.pushed != row.commit:
            await self._push(row)
            row = replace(row, pushed=row.commit, note=None)
        if row.number is None:
            await self._open(row)
            return
        pull = await self._forge.pull(row.number)
        if pull.merged or pull.state != "open":
            await self._ended(row, pull)
            return
        checks = await self._forge.checks(pull.head_sha)
        reviews = await self._forge.reviews(pull.number)
        if not await self._failures(row, pull, [c for c in checks if c.state == "failure"]):
            return  # it went to the operator
        await self._changes(row, pull, reviews)
        green = all(c.state == "success" for c in checks)
        ready = row.ready or not pull.draft
        if green and not ready:
            await self._forge.mark_ready(pull)
            await self._update(row, ready=1)
            await self._note(row, f"pull request #{pull.number}: its checks passed; marked "
                             "ready for review")
            ready = True
        if (self._section.auto_merge and green and ready and _approved(reviews)
                and pull.mergeable is True):
            await self._merge(row, pull)

    async def _push(self, row: pj.PullRow) -> None:
        if self._access is None:
            access = await self._forge.repo_access()
            if access.missing("push"):
                raise ForgeError("forge_push_refused", f"the token lacks push on {self._repo}: "
                                 "give it (and the git credentials teamctl pushes with) "
                                 "'write' access to the repository ('teamctl doctor' lists "
                                 "what the token has)")
            self._access = access
        url = self._section.push_url()
        await anyio.to_thread.run_sync(functools.partial(
            push, Path(row.source), url, row.commit, row.branch, repo=self._repo,
            environ=self._environ))
        await self._update(row, pushed=row.commit, note=None)
        log.info("forge_pushed", team=self._team, task=row.task, branch=row.branch,
                 commit=row.commit[:12])
        if row.number is not None:
            await self._note(row, f"pushed {row.commit[:12]} to {row.branch}: pull request "
                             f"#{row.number} shows it")

    async def _open(self, row: pj.PullRow) -> None:
        task = (await self._board.get(row.task, self._team)).task
        pull = await self._forge.find_pull(row.branch)  # one opened before a crash
        if pull is None or pull.state != "open":
            access = self._access or await self._forge.repo_access()
            pull = await self._forge.open_pull(
                title=pull_title(task), body=pull_body(task, row.issue), head=row.branch,
                base=access.default_branch, draft=True)
        await self._update(row, number=pull.number, url=pull.url, state="open",
                           ready=int(not pull.draft))
        log.info("forge_pull_opened", team=self._team, task=row.task, number=pull.number)
        await self._note(row, f"pull request #{pull.number} opened: {pull.url} (a draft while "
                         "its checks run)")

    async def _ended(self, row: pj.PullRow, pull: Pull) -> None:
        state: pj.PullState = "merged" if pull.merged else "closed"
        await self._update(row, state=state)
        log.info("forge_pull_ended", team=self._team, task=row.task, number=pull.number,
                 state=state)
        await self._note(row, f"pull request #{pull.number} was {state} on GitHub")

    async def _merge(self, row: pj.PullRow, pull: Pull) -> None:
        await self._forge.merge(pull.number, pull.head_sha)
        await self._update(row, state="merged")
        log.info("forge_pull_merged", team=self._team, task=row.task, number=pull.number)
        await self._note(row, f"pull request #{pull.number} approved, green and mergeable: "
                         "merged (auto_merge)")

    # -- what comes back ----------------------------------------------------------------------

    async def _failures(self, row: pj.PullRow, pull: Pull, failed: list[Check]) -> bool:
        """New failing checks told to the owner (False: the task went to the operator)."""
        new = [c for c in failed if not await self._board.known(self._source(pull, c))]
        if not new:
            return True
        if row.failed_head != pull.head_sha:
            count = row.failed_heads + 1
            await self._update(row, failed_heads=count, failed_head=pull.head_sha)
            if count > self._section.ci_retries:
                await self._to_operator(row, count)
                return False
        for check in new:
            await self._tell(row, Notice(self._source(pull, check), _FAILING,
                                         check_text(row, pull, check)),
                             f"pull request #{pull.number}: "
                             f"{visible_line(check.name)[:100]} failed")
        return True

    async def _changes(self, row: pj.PullRow, pull: Pull, reviews: list[Review]) -> None:
        for review in reviews:
            source = f"forge:{self._repo}:pr:{pull.number}:review:{review.id}"
            if review.state != "CHANGES_REQUESTED" or await self._board.known(source):
                continue
            comments = await self._forge.review_comments(pull.number, review.id)
            await self._tell(row, Notice(source, _CHANGES,
                                         review_text(row, pull, review, comments)),
                             f"pull request #{pull.number}: changes requested")

    def _source(self, pull: Pull, check: Check) -> str:
        return f"forge:{self._repo}:pr:{pull.number}:{check.kind}:{check.id}"

    async def _tell(self, row: pj.PullRow, notice: Notice, note: str) -> None:
        """Told to the task's owner: a done task back in progress under it with the notice,
        any other told as it is."""
        task = (await self._board.get(row.task, self._team)).task
        if task.status == "done" and task.owner is not None:
            await self._board.send_back(row.task, fail=False, note=note, notice=notice,
                                        epoch=self._epoch_of(self._team, task.owner))
        else:
            await self._board.tell(row.task, notice)
        log.info("task_owner_told", team=self._team, task=row.task, member=task.owner,
                 source=notice.source)

    async def _to_operator(self, row: pj.PullRow, failed: int) -> None:
        text = needs_you_text(row, failed, self._section.ci_retries)
        task = (await self._board.get(row.task, self._team)).task
        if task.status == "done":
            await self._board.send_back(row.task, fail=True, epoch=None, note=text)
        elif task.status in ("pending", "in_progress", "review"):
            await self._board.fail(row.task, by=TEAMCTL, reason=text)
        await self._update(row, state="needs_you", note=text)
        log.info("forge_pull_needs_you", team=self._team, task=row.task, number=row.number,
                 failed=failed)

    async def _note(self, row: pj.PullRow, note: str) -> None:
        await self._board.note(row.task, self._team, kind="pull_request", note=note)
