"""What a forge is to teamctl: the few things the daemon asks of one (GitHub now; a GitLab
module would implement the same), and the plain values they answer with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Check", "Forge", "Issue", "Pull", "RateLimit", "RepoAccess", "Review",
           "ReviewComment"]


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
    default_branch: str = "main"

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


@dataclass(frozen=True)
class Pull:
    """A pull request as the daemon follows it: its number, its page, the commit its head
    branch is at, whether it is open, merged, a draft, and whether the forge can merge it
    (``mergeable`` None: not computed yet)."""

    id: int
    node_id: str
    number: int
    url: str
    head_sha: str
    state: str
    merged: bool
    draft: bool
    mergeable: bool | None


@dataclass(frozen=True)
class Check:
    """One check on a commit: a check run (``kind`` "check") or a commit status ("status");
    ``state`` pending, success or failure (a conclusion other than success, neutral or
    skipped is a failure); the text as the forge gave it (shown escaped, never run)."""

    kind: str
    id: int
    name: str
    state: str
    conclusion: str
    title: str
    summary: str
    text: str
    url: str


@dataclass(frozen=True)
class ReviewComment:
    """A review's comment on a line of the diff: its file, its line (None: on the file)."""

    id: int
    path: str
    line: int | None
    body: str


@dataclass(frozen=True)
class Review:
    """A review of a pull request: ``APPROVED``, ``CHANGES_REQUESTED``, ``COMMENTED``..."""

    id: int
    state: str
    body: str
    user: str
    commit: str | None
    url: str


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

    async def find_pull(self, branch: str) -> Pull | None: ...

    async def open_pull(self, *, title: str, body: str, head: str, base: str,
                        draft: bool) -> Pull: ...

    async def pull(self, number: int) -> Pull: ...

    async def mark_ready(self, pull: Pull) -> None: ...

    async def checks(self, sha: str) -> list[Check]: ...

    async def reviews(self, number: int) -> list[Review]: ...

    async def review_comments(self, number: int, review: int) -> list[ReviewComment]: ...

    async def merge(self, number: int, sha: str) -> str: ...

    async def aclose(self) -> None: ...
