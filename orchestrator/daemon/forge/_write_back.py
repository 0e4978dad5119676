"""``write_back`` (docs/forge.md): a comment on the issue when its task is claimed, goes to
review, and is done — and nothing else. Each round compares each taken task's state with
the last one written back (``forge_issues.told``); a comment is recorded once GitHub answered
it, so a daemon killed between the two writes it again (at least once, never lost). The
comment is teamctl's own words and names: no member's text goes to the issue. With
``pull_requests``, "done" is said with the task's pull request (its number and page): it
waits for the pull request to be opened — for its landing first, where the team
integrates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.daemon.forge import _journal as forge_journal
from orchestrator.daemon.forge import _pull_journal as pj
from orchestrator.visible import visible_line

if TYPE_CHECKING:
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.forge.protocol import Forge
    from orchestrator.protocol.board import TaskDoc

__all__ = ["STATES", "WriteBack"]

STATES = ("claimed", "review", "done")  # in their order: a later one is never followed back


def _state(task: TaskDoc) -> str | None:
    if task.status == "done":
        return "done"
    if task.status == "review":
        return "review"
    if task.status == "in_progress" and task.owner is not None:
        return "claimed"
    return None


def _comment(task: TaskDoc, state: str, pull: pj.PullRow | None = None) -> str:
    owner = visible_line(task.owner or "")[:64]
    opened = "" if pull is None or pull.number is None else (
        f": pull request #{pull.number}, {visible_line(pull.url or '')[:300]}")
    return {"claimed": f"teamctl: T{task.id} was claimed by `{owner}`.",
            "review": f"teamctl: T{task.id} is in review.",
            "done": f"teamctl: T{task.id} is done{opened}."}[state]


class WriteBack:
    """One team's write-back to one forge: ``round`` after each intake round."""

    def __init__(self, *, team: str, repo: str, forge: Forge, board: Board,
                 journal: AsyncStore, pulls: bool = False, integrates: bool = False) -> None:
        self._pulls = pulls  # the team's tasks get pull requests: "done" names its own
        self._integrates = integrates  # ... once landed
        self._team = team
        self._repo = repo
        self._forge = forge
        self._board = board
        self._journal = journal

    async def round(self) -> list[tuple[int, str]]:
        """The comments written: (issue number, state). Raises ForgeError (the next round
        tries again from what was recorded)."""
        written = []
        for number, task_id, told in await self._journal.run(forge_journal.told, self._team,
                                                            self._repo):
            task = (await self._board.get(task_id, self._team)).task
            state = _state(task)
            if state is None or state == told or (
                    told in STATES and STATES.index(state) < STATES.index(told)):
                continue
            pull = None
            if state == "done" and self._pulls:
                pull = await self._journal.run(pj.of_task, self._team, self._repo, task_id)
                if (pull is None and self._integrates) or (
                        pull is not None and pull.number is None):
                    continue  # its pull request is to come: "done" is said with it
            await self._forge.comment(number, _comment(task, state, pull))
            await self._journal.run(forge_journal.set_told, self._team, self._repo, task_id,
                                    state)
            written.append((number, state))
        return written
