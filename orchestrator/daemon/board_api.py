"""The operator's board methods on the control API (``teamctl task ...``): ``task_add``,
``task_list``, ``task_show``, ``task_assign``, ``task_release``, ``task_cancel``,
``task_deps``, ``task_review``, ``task_done``. Each request's params are a strict pydantic
model with bounded sizes (the board checks the text again, whoever calls it; a task's id is
3 or "T3", as an output printed it); the operator acts with ``board.OPERATOR``.
``api.ControlServer`` serves them beside its own methods."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.daemon.board import OPERATOR, Assignee
from orchestrator.limits import (
    MAX_PAGE_ROWS,
    MAX_SEQ,
    MAX_TASK_DEPS,
    MAX_TASK_TEXT_BYTES,
    NAME_PATTERN,
)
from orchestrator.wire import TaskRefIn  # noqa: TC001 (pydantic reads it)

if TYPE_CHECKING:
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.supervisor import Supervisor
    from orchestrator.daemon.teams import Teams
    from orchestrator.wire import TaskDoc, TaskListDoc, TaskShowDoc

__all__ = ["BoardApi", "assignee_of"]

Handler = Callable[[Any], Awaitable[BaseModel]]
_NAME = Field(default=None, pattern=NAME_PATTERN)
_ID = Field(ge=1, le=MAX_SEQ)
_TEXT = Field(default=None, max_length=MAX_TASK_TEXT_BYTES)
_IDS: Any = Field(default_factory=list, max_length=MAX_TASK_DEPS)


class _Params(BaseModel):
    """Strict: "3" and true are refused, not coerced to 3 and 1."""

    model_config = ConfigDict(extra="forbid", strict=True)
    team: str | None = _NAME


class TaskAddParams(_Params):
    title: str = Field(min_length=1, max_length=1000)
    body: str = Field(default="", max_length=MAX_TASK_TEXT_BYTES)
    role: str | None = _NAME
    priority: int = Field(default=0, ge=-1000, le=1000)
    blocked_by: list[TaskRefIn] = _IDS
    assign: str | None = _NAME
    check: str | None = Field(default=None, max_length=2000)


class TaskListParams(_Params):
    status: Literal["ready", "blocked", "pending", "in_progress", "review", "done", "failed",
                    "cancelled"] | None = None
    owner: str | None = _NAME
    role: str | None = _NAME
    after: TaskRefIn = Field(default=0, ge=0, le=MAX_SEQ)
    limit: int = Field(default=100, ge=1, le=MAX_PAGE_ROWS)


class TaskIdParams(_Params):
    id: TaskRefIn = _ID


class TaskAssignParams(TaskIdParams):
    member: str = Field(pattern=NAME_PATTERN)


class TaskReasonParams(TaskIdParams):
    reason: str | None = _TEXT


class TaskReviewParams(TaskIdParams):
    approve: bool
    note: str = Field(min_length=1, max_length=MAX_TASK_TEXT_BYTES)


class TaskDoneParams(TaskIdParams):
    summary: str = Field(min_length=1, max_length=MAX_TASK_TEXT_BYTES)


class TaskDepsParams(TaskIdParams):
    add: list[TaskRefIn] = _IDS
    remove: list[TaskRefIn] = _IDS


def assignee_of(teams: Teams, supervisor: Supervisor, team: str, member: str) -> Assignee:
    """The member and its launch now (None: no process of it runs)."""
    teams.resolve_member(team, member)
    state = supervisor.member(team, member)
    return Assignee(member, state.epoch if state.launch == "running" else None)


class BoardApi:
    """The board as the operator reaches it: teams resolved as every method does (``--team``
    may be omitted when one team runs), an assignee's launch read from the supervisor."""

    def __init__(self, board: Board, teams: Teams, supervisor: Supervisor) -> None:
        self._board = board
        self._teams = teams
        self._supervisor = supervisor

    def methods(self) -> dict[str, tuple[type[BaseModel], Handler]]:
        return {
            "task_add": (TaskAddParams, self._add),
            "task_list": (TaskListParams, self._list),
            "task_show": (TaskIdParams, self._show),
            "task_assign": (TaskAssignParams, self._assign),
            "task_release": (TaskReasonParams, self._release),
            "task_cancel": (TaskReasonParams, self._cancel),
            "task_deps": (TaskDepsParams, self._deps),
            "task_review": (TaskReviewParams, self._review),
            "task_done": (TaskDoneParams, self._done),
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
