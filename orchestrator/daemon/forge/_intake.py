"""Intake (docs/forge.md): each open issue with the team's label becomes a board task, once;
an edited issue rewrites its task's body and tells the owner; a closed issue cancels its task.

An issue's text is the forge's and anyone's: it reaches the board as data — every character
that acts on a terminal or hides text shown as its mark (``orchestrator.visible``), the title
on one line cut to the board's 200 characters, the body cut to fit the board's 64 KiB with
what was cut said and the issue's link to read it whole — and is never run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.daemon.board import TEAMCTL, Notice
from orchestrator.daemon.forge import _journal as forge_journal
from orchestrator.errors import TaskRefused
from orchestrator.limits import MAX_TASK_TEXT_BYTES, MAX_TASK_TITLE_CHARS
from orchestrator.visible import visible, visible_line

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from orchestrator.daemon.board import Board
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.forge.protocol import Forge, Issue
    from orchestrator.protocol.board import TaskDoc

__all__ = ["Intake", "IntakeRound", "task_body", "task_title"]

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
        for issue in listed.values():
            was = known.get(issue.id)
            if was is None:
                created.append((await self._take(issue)).id)
            elif not was.closed and was.digest != _digest(issue):
                edited.append((await self._rewrite(issue, was)).id)
        for issue_id, was in known.items():
            if was.closed or issue_id in listed:
                continue
            issue = await self._forge.issue(was.number)
            if issue.state == "closed":
                cancelled.append(await self._close(was))
        return IntakeRound(tuple(created), tuple(edited),
                           tuple(c for c in cancelled if c is not None))

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
