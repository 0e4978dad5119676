"""What a forge is to teamctl: the few things the daemon asks of one (GitHub now; a GitLab
module would implement the same), and the plain values they answer with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Forge", "Issue", "RateLimit", "RepoAccess"]


@dataclass(frozen=True)
class Issue:
    """An issue as intake needs it: its forge-wide ``id`` (what the journal records), its
    ``number`` in the repository, its text as the forge gave it (shown escaped, never run)."""

    id: int
    number: int
    title: str
    body: str
    state: str
    url: str
    labels: tuple[str, ...]
    updated_at: str


@dataclass(frozen=True)
class RepoAccess:
    """What the token may do in the repository: the forge's own ``permissions`` object
    (``pull``, ``triage``, ``push``, ``maintain``, ``admin`` on GitHub)."""

    repo: str
    permissions: Mapping[str, bool]

    def missing(self, *needed: str) -> tuple[str, ...]:
        """The permissions of ``needed`` the token does not have."""
        return tuple(name for name in needed if not self.permissions.get(name, False))


@dataclass(frozen=True)
class RateLimit:
    """The forge's last rate-limit headers: requests left in the window, its size, its reset
    (epoch seconds); None before the first answer."""

    remaining: int | None = None
    limit: int | None = None
    reset: float | None = None


class Forge(Protocol):
    """One forge's repository, as the daemon uses it. Every method raises ForgeError (its
    code says which failure) and nothing else."""

    @property
    def rate_limit(self) -> RateLimit: ...

    @property
    def requests_made(self) -> int: ...

    async def repo_access(self) -> RepoAccess: ...

    async def labelled_issues(self, label: str, state: str) -> list[Issue]: ...

    async def issue(self, number: int) -> Issue: ...

    async def comment(self, number: int, body: str) -> int: ...

    async def aclose(self) -> None: ...
