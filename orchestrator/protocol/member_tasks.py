"""The params of the board's MCP tools (``member.task_*``, one per tool of
``daemon/mcp/_tasks.py``): strict, with the board's bounds and the member's token. Each tool's
``inputSchema`` is its params model's JSON schema without the token (``daemon/mcp/_schema.py``),
so the descriptions here are what the model reads; a task id's schema is the tool's form
(``"T3"`` or ``"3"``, ``TOOL_TASK_ID_PATTERN``: the tool hands the daemon the number).
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from orchestrator.limits import (
    MAX_SEQ,
    MAX_TASK_DEPS,
    MAX_TASK_TEXT_BYTES,
    MAX_TASK_TITLE_CHARS,
    NAME_PATTERN,
    TOOL_TASK_ID_PATTERN,
)
from orchestrator.protocol.common import TaskRefIn

__all__ = [
    "ClaimParams", "CompleteParams", "CreateParams", "IdParams", "ListParams",
    "MemberTaskParams", "NoteParams", "ReleaseParams", "ReviewParams", "ToolTaskRef",
]


# a task id: the daemon's (3 or "T3", strict); its schema is what the member's tool takes
ToolTaskRef = Annotated[TaskRefIn, WithJsonSchema({
    "type": "string", "pattern": TOOL_TASK_ID_PATTERN, "maxLength": 20,
    "description": "a task: T3 or 3"})]


def _id(description: str) -> Any:
    return Field(ge=1, le=MAX_SEQ, description=f"{description}: T3 or 3")


def _text(description: str) -> Any:
    return Field(max_length=MAX_TASK_TEXT_BYTES, description=description)


class MemberTaskParams(BaseModel):
    """Strict, no unknown key; the caller's token (as ``member.send_message``'s)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    token: str = Field(min_length=16, max_length=128)


class ListParams(MemberTaskParams):
    filter: Literal["all", "mine", "ready", "blocked", "pending", "in_progress", "review",
                    "done", "failed", "cancelled"] = Field(default="all",
                                                           description="which tasks")
    after: ToolTaskRef = Field(default=0, ge=0, le=MAX_SEQ,
                               description="list the tasks after this one: T3 or 3")


class IdParams(MemberTaskParams):
    id: ToolTaskRef = _id("the task")


class CreateParams(MemberTaskParams):
    title: str = Field(min_length=1, max_length=MAX_TASK_TITLE_CHARS, description="one line")
    body: str = Field(default="", max_length=MAX_TASK_TEXT_BYTES,
                      description="what to do, how to tell it is done")
    blocked_by: list[ToolTaskRef] = Field(default_factory=list, max_length=MAX_TASK_DEPS,
                                          description="the tasks it waits on")
    role: str | None = Field(default=None, pattern=NAME_PATTERN,
                             description="only a member of this role may claim it")
    assignee: str | None = Field(default=None, pattern=NAME_PATTERN,
                                 description="the teammate it is handed to (lead only)")


class ClaimParams(MemberTaskParams):
    id: ToolTaskRef | None = Field(default=None, ge=1, le=MAX_SEQ,
                                   description="the task (omit: the next ready task for "
                                   "you): T3 or 3")


class NoteParams(IdParams):
    note: str = _text("what changed")


class CompleteParams(IdParams):
    summary: str = _text("what was done")
    evidence: str | None = Field(default=None, max_length=MAX_TASK_TEXT_BYTES,
                                 description="how it was checked")


class ReleaseParams(IdParams):
    reason: str = _text("why")


class ReviewParams(IdParams):
    approve: bool = Field(description="true: done; false: back to its owner, in progress")
    note: str = _text("what you found")
