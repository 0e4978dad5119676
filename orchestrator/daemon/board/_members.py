"""The board as a member reaches it: ``member.task_*`` on the control API, called by the MCP
server its CLI runs (``teamctl mcp``: ``task_list``, ``task_get``, ``task_create``,
``task_claim``, ``task_update``, ``task_complete``, ``task_release``, ``task_review``).

Each call is authenticated as ``member.send_message`` is: the member's per-launch token, from
one of that member's own processes (``Router.check_caller``); the member it names acts as
itself — ``Actor(name, privileged=<lead>)`` — in its own team only (another team's task is
``task_not_found``), with its launch (epoch), role and ``max_tasks`` for a claim. The board
decides the rest (a member acts only on what it holds; only a lead assigns). Params are strict
pydantic models with the board's bounds (``orchestrator.protocol.member_tasks``): "3" is not
an id, a 10 MB note never reaches it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from orchestrator import protocol
from orchestrator.daemon.board._api import assignee_of
from orchestrator.daemon.board._service import Actor
from orchestrator.errors import TaskRefused, TeamctlError

if TYPE_CHECKING:
    from orchestrator.daemon.board._service import Board
    from orchestrator.daemon.members import MemberState, Supervisor
    from orchestrator.daemon.teams import Teams
    from orchestrator.protocol.board import TaskDoc, TaskListDoc, TaskShowDoc
    from orchestrator.protocol.member_tasks import (
        ClaimParams,
        CompleteParams,
        CreateParams,
        IdParams,
        ListParams,
        NoteParams,
        ReleaseParams,
        ReviewParams,
    )

__all__ = ["MEMBER_PAGE_ROWS", "MemberBoardApi", "member_actor", "working_on"]

Handler = Callable[[Any], Awaitable[BaseModel]]
CheckCaller = Callable[[str], Awaitable[object]]
MEMBER_PAGE_ROWS = 50  # a task_list page: what a model reads in one tool result


async def working_on(board: Board, team: str, member: str) -> int | None:
    """The task ``member`` holds in progress (the oldest, when it holds several), if any: a
    message it sends belongs to it."""
    page = await board.listing(team, state="in_progress", owner=member, limit=1)
    return page.tasks[0].id if page.tasks else None


def member_actor(state: MemberState) -> Actor:
    """Who a member is on the board: itself; privileged when its team file makes it the lead."""
    return Actor(state.name, privileged=state.config.lead)


class MemberBoardApi:
    """``member.task_*``: each call's token checked by ``check_caller`` (the router's: a token
    from another member's process is refused), then resolved to its member's launch."""

    def __init__(self, board: Board, teams: Teams, supervisor: Supervisor) -> None:
        self._board = board
        self._teams = teams
        self._supervisor = supervisor

    def handlers(self, check_caller: CheckCaller) -> dict[str, Handler]:
        """Its handlers, by the protocol table's rows (``member.task_x`` for tool ``task_x``)."""
        self._check_caller = check_caller
        tools = protocol.MEMBER_TASKS
        return {
            tools["task_list"].name: self._list,
            tools["task_get"].name: self._get,
            tools["task_create"].name: self._create,
            tools["task_claim"].name: self._claim,
            tools["task_update"].name: self._update,
            tools["task_complete"].name: self._complete,
            tools["task_release"].name: self._release,
            tools["task_review"].name: self._review,
        }

    async def _member(self, token: str) -> MemberState:
        await self._check_caller(token)
        state = self._supervisor.by_token(token)
        if state is None:
            raise _Stale()
        return state

    async def _list(self, params: ListParams) -> TaskListDoc:
        me = await self._member(params.token)
        mine = params.filter == "mine"
        state = None if params.filter in ("all", "mine") else params.filter
        return await self._board.listing(me.team, state=state, owner=me.name if mine else None,
                                         after_id=params.after, limit=MEMBER_PAGE_ROWS)

    async def _get(self, params: IdParams) -> TaskShowDoc:
        me = await self._member(params.token)
        return await self._board.get(params.id, me.team)

    async def _create(self, params: CreateParams) -> TaskDoc:
        me = await self._member(params.token)
        actor = member_actor(me)
        assignee = None
        if params.assignee is not None:
            if not actor.privileged:
                raise TaskRefused("task_forbidden", "only the team's lead assigns a task; "
                                  "create it without assignee (or ask the lead)", task_id=None)
            assignee = assignee_of(self._teams, self._supervisor, me.team, params.assignee)
        return await self._board.create(me.team, params.title, params.body, role=params.role,
                                        blocked_by=params.blocked_by, created_by=actor,
                                        assignee=assignee)

    async def _claim(self, params: ClaimParams) -> TaskDoc:
        me = await self._member(params.token)
        role = me.config.role
        return await self._board.claim(me.team, me.name, epoch=me.epoch,
                                       roles=() if role is None else (role,),
                                       max_tasks=me.config.max_tasks, task_id=params.id)

    async def _update(self, params: NoteParams) -> TaskDoc:
        me = await self._member(params.token)
        return await self._board.update(params.id, by=member_actor(me), note=params.note,
                                        team=me.team)

    async def _complete(self, params: CompleteParams) -> TaskDoc:
        me = await self._member(params.token)
        return await self._board.complete(params.id, by=member_actor(me),
                                          summary=params.summary, evidence=params.evidence,
                                          team=me.team)

    async def _release(self, params: ReleaseParams) -> TaskDoc:
        me = await self._member(params.token)
        return await self._board.release(params.id, by=member_actor(me), reason=params.reason,
                                         team=me.team)

    async def _review(self, params: ReviewParams) -> TaskDoc:
        me = await self._member(params.token)
        return await self._board.review(params.id, by=member_actor(me), approve=params.approve,
                                        note=params.note, team=me.team)


class _Stale(TeamctlError):
    """The token names no current launch (restarted or stopped): as the messaging tools say."""

    code = "messaging_token_unknown"
    retryable = True

    def __init__(self) -> None:
        super().__init__("this MCP session's member token is not current (the member was "
                         "restarted or stopped); nothing was done")
