"""The pieces every family shares: the documents' and the params' base models (unknown keys
refused), the team/member/token params most methods take, a board task's id as it travels
(``TaskRef``: ``"T3"`` out, 3 or ``"T3"`` in), who wrote a message, a delivery's state.
"""

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

from orchestrator.limits import NAME_PATTERN

__all__ = [
    "OPERATOR",
    "TEAMCTL",
    "DeliveryState",
    "Doc",
    "EmptyParams",
    "MemberParams",
    "Params",
    "TaskRef",
    "TaskRefIn",
    "TeamParams",
    "TokenParams",
]


class Doc(BaseModel):
    # built when first used, not when imported: the daemon answers a few of the ~110
    # documents and parameters a session (docs/dev/performance.md, "The daemon's memory")
    model_config = ConfigDict(extra="forbid", defer_build=True)


_TASK_REF = re.compile(r"[Tt]?([0-9]{1,19})")


def _task_number(value: Any) -> Any:
    """``"T3"`` (as every output writes it) or ``3`` → 3; anything else is left to fail."""
    if isinstance(value, str) and (found := _TASK_REF.fullmatch(value)):
        return int(found.group(1))
    return value


def _task_ref_in(value: Any) -> Any:
    """A request's task id: ``3`` or ``"T3"`` (what an output printed), never ``"3"``."""
    if isinstance(value, str) and re.fullmatch(r"T[0-9]{1,19}", value):
        return int(value[1:])
    return value


# a task id in a request (strict: the int, or T3 as read from an output)
TaskRefIn = Annotated[int, BeforeValidator(_task_ref_in)]


# A board task's id: an int in the daemon, ``"T3"`` in every JSON document as on every screen
# and in the members' tools — one form wherever a task is named (it was 3 in --json, T3
# elsewhere: issue 45). Read back from either.
TaskRef = Annotated[int, BeforeValidator(_task_number),
                    PlainSerializer(lambda number: f"T{number}", return_type=str,
                                    when_used="json"),
                    WithJsonSchema({"type": "string", "pattern": "^T[0-9]+$"})]


DeliveryState = Literal["queued", "prepared", "sent", "answered", "failed", "blocked"]


OPERATOR = "operator"  # who sent a message: the operator,
TEAMCTL = "teamctl"  # teamctl itself (the board's hand-overs, gate results, review asks)


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class EmptyParams(Params):
    pass


class TeamParams(Params):
    team: str | None = Field(default=None, pattern=NAME_PATTERN)


class MemberParams(TeamParams):
    member: str = Field(pattern=NAME_PATTERN)


class TokenParams(Params):
    token: str = Field(min_length=16, max_length=128)
