"""The board as the operator reaches it (``task_*``, ``teamctl task``; docs/board.md): a task, a
page of tasks, one task with its events — and the operator's params (strict: "3" is not an
id, a task is 3 or "T3"; every text bounded).
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.limits import (
    MAX_PAGE_ROWS,
    MAX_SEQ,
    MAX_TASK_DEPS,
    MAX_TASK_TEXT_BYTES,
    NAME_PATTERN,
)
from orchestrator.protocol.common import Doc, TaskRef, TaskRefIn

__all__ = [
    "TaskAddParams",
    "TaskAssignParams",
    "TaskDepsParams",
    "TaskDoc",
    "TaskDoneParams",
    "TaskEventDoc",
    "TaskIdParams",
    "TaskListDoc",
    "TaskListParams",
    "TaskNoticeDoc",
    "TaskParams",
    "TaskReasonParams",
    "TaskReviewParams",
    "TaskShowDoc",
    "TaskState",
    "TaskStatus",
]


TaskStatus = Literal["pending", "in_progress", "review", "done", "failed", "cancelled"]


# what a task is shown as: a pending one is ready (every dependency done) or blocked
TaskState = Literal["ready", "blocked", "in_progress", "review", "done", "failed", "cancelled"]


_JOURNALED: dict[TaskState, TaskStatus] = {
    "ready": "pending", "blocked": "pending", "in_progress": "in_progress", "review": "review",
    "done": "done", "failed": "failed", "cancelled": "cancelled"}


class TaskDoc(Doc):
    """One board task (``teamctl task add|assign|release|cancel|deps --json``)."""

    id: TaskRef = Field(description="T3, as every output names it")
    team: str
    title: str
    body: str
    role: str | None = Field(description="only a member of this role may claim it")
    priority: int = Field(description="higher first")
    state: TaskState = Field(description="the one state: a pending task is ready or blocked")
    owner: str | None = Field(description="who holds it (a pending one: assigned, waiting)")
    epoch: int | None = Field(description="which launch of the owner holds it")
    lease_until: float | None = Field(description="its owner's process ended: released to "
                                      "pending at this time unless the owner comes back")
    blocked_by: list[TaskRef] = Field(description="the dependencies not done yet")
    blocked: str | None = Field(description="what blocks it, in words (a failed or "
                                "cancelled dependency said so)")
    check: str | None = Field(description="the gate command to pass before done")
    created_by: str
    summary: str | None
    evidence: str | None
    created_at: float
    updated_at: float

    @property
    def status(self) -> TaskStatus:
        """As journaled: ``ready`` and ``blocked`` are both ``pending`` (the daemon's own
        transitions read it; no output carries it beside ``state``)."""
        return _JOURNALED[self.state]


class TaskListDoc(Doc):
    """``teamctl task list --json``: one page, oldest first."""

    team: str
    tasks: list[TaskDoc]
    total: int = Field(description="tasks matching the filter, every page")
    next_after: TaskRef | None = Field(description="--after for the next page (null: the "
                                       "last)")


class TaskEventDoc(Doc):
    at: float
    actor: str = Field(description="the operator or a member")
    kind: str = Field(description="created, assigned, claimed, updated, released, lapsed, "
                      "adopted, deps, completed, failed, cancelled")
    note: str | None


class TaskNoticeDoc(Doc):
    """An event about the task that someone had to act on, and where it was delivered."""

    at: float
    source: str = Field(description="its source id: a second event with the same id is "
                        "dropped")
    kind: str = Field(description="gate, review, review_asked, integration, ...")
    member: str | None = Field(description="who was told: the task's owner then (null: it "
                               "waits for the next owner)")
    message_id: str | None = Field(description="the message that told it (teamctl history)")
    delivery: str | None = Field(description="that message's delivery: queued, sent, "
                                 "answered, failed, or waiting for an owner")


class TaskShowDoc(Doc):
    """``teamctl task show ID --json``: the task, its edges, its lifetime and its notices."""

    task: TaskDoc
    depends_on: list[TaskRef]
    dependents: list[TaskRef]
    events: list[TaskEventDoc]
    notices: list[TaskNoticeDoc] = Field(default_factory=list, description="the events "
                                         "about it told to a member, and where each went")
    traces: list[str] = Field(default_factory=list, description="the trace ids of the "
                              "conversations its turns were in, oldest first (teamctl trace)")


_NAME = Field(default=None, pattern=NAME_PATTERN)


_ID = Field(ge=1, le=MAX_SEQ)


_TEXT = Field(default=None, max_length=MAX_TASK_TEXT_BYTES)


_IDS: Any = Field(default_factory=list, max_length=MAX_TASK_DEPS)


class TaskParams(BaseModel):
    """Strict: "3" and true are refused, not coerced to 3 and 1."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    team: str | None = _NAME


class TaskAddParams(TaskParams):
    title: str = Field(min_length=1, max_length=1000)
    body: str = Field(default="", max_length=MAX_TASK_TEXT_BYTES)
    role: str | None = _NAME
    priority: int = Field(default=0, ge=-1000, le=1000)
    blocked_by: list[TaskRefIn] = _IDS
    assign: str | None = _NAME
    check: str | None = Field(default=None, max_length=2000)


class TaskListParams(TaskParams):
    status: Literal["ready", "blocked", "pending", "in_progress", "review", "done", "failed",
                    "cancelled"] | None = None
    owner: str | None = _NAME
    role: str | None = _NAME
    after: TaskRefIn = Field(default=0, ge=0, le=MAX_SEQ)
    limit: int = Field(default=100, ge=1, le=MAX_PAGE_ROWS)


class TaskIdParams(TaskParams):
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
