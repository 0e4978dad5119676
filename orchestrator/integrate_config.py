"""The team file's merge queue keys (docs/land.md): ``[team] integrate = { branch, check, mode,
check_timeout }`` and ``integrate_retries``, their types and checks, apart from config.py.

``branch`` is a branch teamctl owns and moves — by default ``teamctl/<team>/main`` (``<team>``
is replaced by the team's name), made from the base the first time a task lands; never a
branch checked out anywhere (the operator's, a member's: refused when a task would land, see
``daemon/land``). Its name is checked here as git would (``git check-ref-format``'s rules, a
little stricter) and against the members' own branches (``teamctl/<team>/<member>/work``):
one ref cannot be a directory of another.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_BRANCH", "Integrate", "IntegrateMode", "branch_clash", "check_branch"]

DEFAULT_BRANCH = "teamctl/<team>/main"
IntegrateMode = Literal["merge", "squash", "rebase"]
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/<>-]{0,199}")
_BAD_PARTS = ("..", "//", "@{", "/.", ".lock/")


def check_branch(name: str) -> str:
    """A branch name git accepts and a shell or an option cannot misread: letters, digits,
    ``._/-`` (and the ``<team>`` placeholder), not starting with ``-`` or ``.``, no ``..``,
    no ``//``, no part starting with ``.`` or ending with ``.lock``."""
    bare = name.replace("<team>", "team")
    if (not _BRANCH.fullmatch(name) or not re.fullmatch(r"[A-Za-z0-9._/-]+", bare)
            or any(part in bare + "/" for part in _BAD_PARTS) or bare.endswith(("/", "."))):
        raise ValueError(f"integrate.branch = {name!r} is not a branch name teamctl uses: "
                         "letters, digits and ._/- only, no '..', no '//', no part starting "
                         "with '.' or ending with '.lock' (e.g. \"teamctl/<team>/main\")")
    return name


class Integrate(BaseModel):
    """``[team] integrate``: where finished tasks land, what must pass first, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    branch: Annotated[str, AfterValidator(check_branch)] = DEFAULT_BRANCH
    check: Annotated[str, Field(min_length=1, max_length=2000)] | None = None
    mode: IntegrateMode = "merge"
    check_timeout: Annotated[float, Field(gt=0, le=86400, allow_inf_nan=False)] = 1800.0

    @model_validator(mode="after")
    def _check_splits(self) -> Integrate:
        if self.check is None:
            return self
        try:
            argv = shlex.split(self.check)
        except ValueError as exc:
            raise ValueError(f"integrate.check = {self.check!r} does not split into words "
                             f"({exc}); balance its quotes") from None
        if not argv:
            raise ValueError("integrate.check is empty; name a command, e.g. \"make test\"")
        return self

    def branch_of(self, team: str) -> str:
        """The integration branch of ``team`` (``<team>`` replaced)."""
        return self.branch.replace("<team>", team)


def branch_clash(branch: str, team: str, members: list[str]) -> str | None:
    """The member whose own branch (``teamctl/<team>/<member>/work``) ``branch`` would be,
    hold, or lie inside (git keeps refs as files: one cannot be the other's directory)."""
    for member in members:
        own = f"teamctl/{team}/{member}/work"
        if branch == own or branch.startswith(own + "/") or own.startswith(branch + "/"):
            return member
    return None
