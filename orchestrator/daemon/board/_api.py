"""The operator's board methods on the control API (``teamctl task ...``): ``task_add``,
``task_list``, ``task_show``, ``task_assign``, ``task_release``, ``task_cancel``,
``task_deps``, ``task_review``, ``task_done``. Each request's params are a strict pydantic
model with bounded sizes (``orchestrator.protocol.board``: the board checks the text again,
whoever calls it; a task's id is 3 or "T3", as an output printed it); the operator acts with
``board.OPERATOR``. The control server serves them beside its own methods."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from orchestrator import protocol
from orchestrator.daemon.board._service import OPERATOR, Assignee

if TYPE_CHECKING:
    from orchestrator.daemon.board._service import Board
    from orchestrator.daemon.members import Supervisor
    from orchestrator.daemon.teams import Teams
    from orchestrator.protocol.board import (
        TaskAddParams,
        TaskAssignParams,
        TaskDepsParams,
        TaskDoc,
        TaskDoneParams,
        TaskIdParams,
        TaskListDoc,
        TaskListParams,
        TaskReasonParams,
        TaskReviewParams,
        TaskShowDoc,
    )

__all__ = ["BoardApi", "assignee_of"]

Handler = Callable[[Any], Awaitable[BaseModel]]


def assignee_of(teams: Teams, supervisor: Supervisor, team: str, member: str) -> Assignee:
    """The member and its launch now (None: no process of it runs — the task is kept for it
    ``task_grace``). An asleep member's last launch holds it: a sleep is not an exit, and its
    next launch adopts the task."""
    teams.resolve_member(team, member)
    state = supervisor.member(team, member)
    return Assignee(member, state.epoch if state.launch in ("running", "asleep") else None)


class BoardApi:
    """The board as the operator reaches it: teams resolved as every method does (``--team``
    may be omitted when one team runs), an assignee's launch read from the supervisor."""

    def __init__(self, board: Board, teams: Teams, supervisor: Supervisor) -> None:
        self._board = board
        self._teams = teams
        self._supervisor = supervisor

    def handlers(self) -> dict[str, Handler]:
        """Its handlers, by the protocol table's rows."""
        return {
            protocol.TASK_ADD.name: self._add,
            protocol.TASK_LIST.name: self._list,
            protocol.TASK_SHOW.name: self._show,
            protocol.TASK_ASSIGN.name: self._assign,
            protocol.TASK_RELEASE.name: self._release,
            protocol.TASK_CANCEL.name: self._cancel,
            protocol.TASK_DEPS.name: self._deps,
            protocol.TASK_REVIEW.name: self._review,
            protocol.TASK_DONE.name: self._done,
        }

    def _assignee(self, team: str, member: str) -> Assignee:
        return assignee_of(self._teams, self._supervisor, team, member)

    async def _add(self, params: TaskAddParams) -> TaskDoc:
        team = self._teams.resolve(params.team).name
        assignee = None if params.assign is None else self._assignee(team, params.assign)
        return await self._board.create(
            team, params.title, params.body, role=params.role, priority=params.priority,
            blocked_by=params.blocked_by, created_by=OPERATOR, assignee=assignee,
            check=params.check)

    async def _list(self, params: TaskListParams) -> TaskListDoc:
        team = params.team or self._teams.resolve(None).name
        return await self._board.listing(team, state=params.status, owner=params.owner,
                                         role=params.role, after_id=params.after,
                                         limit=params.limit)

    async def _show(self, params: TaskIdParams) -> TaskShowDoc:
        return await self._board.get(params.id, params.team)

    async def _assign(self, params: TaskAssignParams) -> TaskDoc:
        team = (await self._board.get(params.id, params.team)).task.team
        return await self._board.assign(params.id, self._assignee(team, params.member),
                                        by=OPERATOR, team=team)

    async def _release(self, params: TaskReasonParams) -> TaskDoc:
        return await self._board.release(params.id, by=OPERATOR, reason=params.reason,
                                         team=params.team)

    async def _cancel(self, params: TaskReasonParams) -> TaskDoc:
        return await self._board.cancel(params.id, by=OPERATOR, reason=params.reason,
                                        team=params.team)

    async def _review(self, params: TaskReviewParams) -> TaskDoc:
        return await self._board.review(params.id, by=OPERATOR, approve=params.approve,
                                        note=params.note, team=params.team)

    async def _done(self, params: TaskDoneParams) -> TaskDoc:
        """The operator finishes a task as its owner would: through the same gate (the
        check as the owner, then the review); its owner is told."""
        return await self._board.complete(params.id, by=OPERATOR, summary=params.summary,
                                          team=params.team)

    async def _deps(self, params: TaskDepsParams) -> TaskDoc:
        return await self._board.deps(params.id, by=OPERATOR, add=params.add,
                                      remove=params.remove, team=params.team)
