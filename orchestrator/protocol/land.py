"""The merge queue as the operator reaches it (``teamctl queue``, ``teamctl integrate``;
docs/land.md): an entry of the queue, the queue of a team, and the params (strict, bounded).
"""

from typing import Literal

from pydantic import Field, model_validator

from orchestrator.limits import MAX_SEQ, NAME_PATTERN
from orchestrator.protocol.common import Doc, Params, TaskRef, TaskRefIn

__all__ = ["EntryPhase", "EntryState", "IntegrateParams", "QueueDoc", "QueueEntryDoc",
           "QueueParams"]

EntryState = Literal["queued", "running", "landed", "sent_back", "needs_you"]
EntryPhase = Literal["merging", "checking", "landing"]


class QueueEntryDoc(Doc):
    """One task's commits on their way to the integration branch (one attempt)."""

    id: int = Field(description="the entry's number: the queue's order")
    team: str
    task: TaskRef
    title: str
    owner: str = Field(description="the member whose commits these are")
    source: str = Field(description="the owner's branch")
    commit: str = Field(description="the owner's commit that lands")
    branch: str = Field(description="the integration branch it lands on")
    attempt: int = Field(description="this task's attempt since it last landed or reached "
                         "the operator (integrate_retries at most)")
    state: EntryState = Field(description="queued, running, landed, sent_back (to its "
                              "owner), needs_you (the operator)")
    phase: EntryPhase | None = Field(description="while running: merging, checking, landing")
    onto: str | None = Field(description="the integration branch's commit it was merged onto")
    result: str | None = Field(description="the commit the branch moved to (landed) or would "
                               "have (a failed check)")
    note: str | None = Field(description="what happened: the conflict's files, the check's "
                             "exit and output's end, or nothing new to land")
    queued_at: float
    started_at: float | None
    finished_at: float | None
    check_seconds: float | None = Field(description="how long the integration check ran")


class QueueDoc(Doc):
    """``teamctl queue --json``: what waits, what runs, what landed or went back."""

    team: str
    branch: str | None = Field(description="the integration branch (null: the team has no "
                               "[team] integrate)")
    mode: str | None
    check: str | None
    paused: bool
    waiting: list[QueueEntryDoc] = Field(description="queued, oldest first")
    running: QueueEntryDoc | None
    recent: list[QueueEntryDoc] = Field(description="the last entries that ended, newest "
                                        "first (at most 20)")


class QueueParams(Params):
    team: str | None = Field(default=None, pattern=NAME_PATTERN)
    pause: bool = Field(default=False, strict=True)
    resume: bool = Field(default=False, strict=True)

    @model_validator(mode="after")
    def _one_way(self) -> "QueueParams":
        if self.pause and self.resume:
            raise ValueError("pause and resume together: give one")
        return self


class IntegrateParams(Params):
    team: str | None = Field(default=None, pattern=NAME_PATTERN)
    id: TaskRefIn = Field(ge=1, le=MAX_SEQ, strict=True)
