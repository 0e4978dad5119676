"""Intake (docs/forge.md): each open issue with the team's label becomes a board task, once;
an edited issue rewrites its task's body and tells the owner; a closed issue cancels its task.

An issue's own dependencies become the task's: ``blocked by #12`` / ``depends on #12, #13`` in
its body, or a task list's ``- [ ] #12``, make its task wait on #12's task — where #12 is an
issue this team took (its task made in this round or an earlier one). A reference to an issue
not taken (yet) is linked in the round that takes it; one that would close a cycle is left out
and logged.

An issue's text is the forge's and anyone's: it reaches the board as data — every character
that acts on a terminal or hides text shown as its mark (``orchestrator.visible``), the title
on one line cut to the board's 200 characters, the body cut to fit the board's 64 KiB with
what was cut said and the issue's link to read it whole — and is never run.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from orchestrator.daemon.board import TEAMCTL, Notice
from orchestrator.daemon.forge import _journal as forge_journal
from orchestrator.errors import TaskRefused, TeamctlError
from orchestrator.limits import MAX_TASK_TEXT_BYTES, MAX_TASK_TITLE_CHARS
from orchestrator.visible import visible, visible_line

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from orchestrator.daemon.board import Board
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.forge.protocol import Forge, Issue
    from orchestrator.protocol.board import TaskDoc

__all__ = ["Intake", "IntakeRound", "references", "task_body", "task_title"]

log = structlog.get_logger("teamctl.daemon")

# "Blocked by #12", "depends on: #12, #13 and #14" (one phrase, its list of issues)
_AFTER = re.compile(r"\b(?:blocked\s+by|depends\s+on)\b[:\s]*((?:#[0-9]{1,9}\b[\s,]*(?:and\s+)?)+)",
                    re.IGNORECASE)
_TASK_LIST = re.compile(r"^[ \t]*[-*+][ \t]+\[[ xX]\][ \t]+#([0-9]{1,9})\b", re.MULTILINE)
_NUMBER = re.compile(r"#([0-9]{1,9})\b")

_BODY_ROOM = MAX_TASK_TEXT_BYTES - 1024  # the link and the cut's note fit beside it


def task_title(issue: Issue) -> str:
    """The task's title: ``#N: title`` on one line, marks for what acts, cut to the board's
    limit (``…`` ends a cut one)."""
    title = f"#{issue.number}: {visible_line(issue.title).strip() or '(no title)'}"
    return title if len(title) <= MAX_TASK_TITLE_CHARS else (
        title[:MAX_TASK_TITLE_CHARS - 1] + "…")


def task_body(issue: Issue) -> str:
    """The task's body: the issue's link, then its text as data (marks for what acts), cut
    to fit the board with the number of characters left out said."""
    text = visible(issue.body.replace("\r\n", "\n"))
    cut = ""
    if len(text.encode("utf-8")) > _BODY_ROOM:
        kept = text.encode("utf-8")[:_BODY_ROOM].decode("utf-8", "ignore")
        cut = (f"\n\n… {len(text) - len(kept)} more characters: read the whole issue at "
               f"{visible_line(issue.url)}")
        text = kept
    return f"From {visible_line(issue.url)} (GitHub issue #{issue.number}):\n\n{text}{cut}"


def references(body: str) -> tuple[int, ...]:
    """The issue numbers an issue's body says it waits on, in order, each once."""
    found = [int(n) for phrase in _AFTER.findall(body) for n in _NUMBER.findall(phrase)]
    found += [int(n) for n in _TASK_LIST.findall(body)]
    return tuple(dict.fromkeys(found))


def _digest(issue: Issue) -> str:
    return hashlib.sha256(f"{issue.title}\0{issue.body}".encode("utf-8", "surrogatepass")
                          ).hexdigest()


@dataclass(frozen=True)
class IntakeRound:
    """What one poll did: the tasks made, rewritten and cancelled, by task id."""

    created: tuple[int, ...] = ()
    edited: tuple[int, ...] = ()
    cancelled: tuple[int, ...] = ()


class Intake:
    """One team's intake from one forge: ``poll`` once a round (the caller's loop)."""

    def __init__(self, *, team: str, repo: str, label: str, state: str, forge: Forge,
                 board: Board, journal: AsyncStore, clock: Callable[[], float],
                 on_created: Callable[[TaskDoc, Issue], None] | None = None) -> None:
        self._team = team
        self._repo = repo
        self._label = label
        self._state = state
        self._forge = forge
        self._board = board
        self._journal = journal
        self._clock = clock
        self._on_created = on_created

    async def poll(self) -> IntakeRound:
        """One round: the labelled issues listed (a 304 when nothing changed), each new one
        a task, each changed one rewritten, each taken one no longer listed looked up and
        its task cancelled if it was closed. Raises ForgeError (the caller waits and retries:
        a rate limit until its reset)."""
        listed = {i.id: i for i in await self._forge.labelled_issues(self._label, self._state)}
        known = await self._journal.run(forge_journal.taken, self._team, self._repo)
        created, edited, cancelled = [], [], []
        tasks = {was.number: was.task for was in known.values() if not was.closed}
        changed: list[Issue] = []  # taken or edited this round: their references linked
        for issue in listed.values():
            was = known.get(issue.id)
            if was is None:
                task = await self._take(issue)
                created.append(task.id)
                tasks[issue.number] = task.id
                changed.append(issue)
            elif not was.closed and was.digest != _digest(issue):
                edited.append((await self._rewrite(issue, was)).id)
                changed.append(issue)
        new = {issue.number for issue in changed if issue.id not in known}
        await self._link([issue for issue in listed.values() if issue in changed or
                          not new.isdisjoint(references(issue.body))], tasks)
        for issue_id, was in known.items():
            if was.closed or issue_id in listed:
                continue
            issue = await self._forge.issue(was.number)
            if issue.state == "closed":
                cancelled.append(await self._close(was))
        return IntakeRound(tuple(created), tuple(edited),
                           tuple(c for c in cancelled if c is not None))

    async def _link(self, issues: list[Issue], tasks: dict[int, int]) -> None:
        """Each issue's task made to wait on the tasks of the issues its body references
        (those taken; an edge already there is not written again)."""
        for issue in issues:
            task = tasks.get(issue.number)
            wanted = [tasks[n] for n in references(issue.body)
                      if n in tasks and n != issue.number]
            if task is None or not wanted:
                continue
            try:
                have = set((await self._board.get(task, self._team)).depends_on)
                add = [t for t in wanted if t not in have]
                if add:
                    await self._board.deps(task, by=TEAMCTL, add=add, team=self._team)
            except TeamctlError as exc:  # a cycle, a settled task: said, the round goes on
                log.warning("forge_dependency_refused", team=self._team, task=task,
                            issue=issue.number, code=exc.code, error=exc.message)

    async def _take(self, issue: Issue) -> TaskDoc:
        now = self._clock()

        def then(db: sqlite3.Connection, task: TaskDoc) -> None:
            forge_journal.record(db, self._team, self._repo, issue_id=issue.id,
                                 number=issue.number, task=task.id, digest=_digest(issue),
                                 now=now)

        task = await self._board.create(self._team, task_title(issue), task_body(issue),
                                        created_by=TEAMCTL, then=then)
        if self._on_created is not None:
            self._on_created(task, issue)
        return task

    async def _rewrite(self, issue: Issue, was: forge_journal.Taken) -> TaskDoc:
        digest = _digest(issue)

        def then(db: sqlite3.Connection) -> None:
            forge_journal.edited(db, self._team, self._repo, issue.id, digest)

        notice = Notice(source=f"forge:{self._repo}:issue:{issue.id}:edit:{digest[:16]}",
                        kind="forge_edited",
                        text=f"T{was.task}: its issue #{issue.number} was edited on GitHub; "
                             f"the task's body now reads:\n\n{task_body(issue)}")
        return await self._board.rewrite(was.task, body=task_body(issue),
                                         note=f"issue #{issue.number} edited", notice=notice,
                                         then=then)

    async def _close(self, was: forge_journal.Taken) -> int | None:
        try:
            await self._board.cancel(was.task, by=TEAMCTL,
                                     reason=f"issue #{was.number} was closed on GitHub")
        except TaskRefused:  # settled already (done, cancelled): nothing to cancel
            cancelled = None
        else:
            cancelled = was.task
        await self._journal.run(forge_journal.closed, self._team, self._repo, was.issue_id)
        return cancelled
