"""The team file's ``[forge]`` section (docs/forge.md): where the team's work comes from and
goes back to, apart from config.py.

``github = { repo = "owner/name", token_env = "GITHUB_TOKEN", api = "https://api.github.com" }``
names the repository, the environment variable the daemon reads the token from (the token
itself is never in the team file, a log, an argv or a member's environment) and the API's
base URL (GitHub Enterprise's, or a test's fake). ``intake = { label, state }``: which issues
become tasks; ``write_back``: comment on the issue when its task is claimed, in review, done;
``pull_requests``, ``remote``, ``auto_merge``, ``ci_retries``, ``poll_interval``: the pull
request's part (``remote``: where ``git push`` sends a task's branch; default GitHub's HTTPS URL
of the repository).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_API", "ForgeSection", "GithubSettings", "Intake"]

DEFAULT_API = "https://api.github.com"
_ENV = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
# GitHub's own rules: an owner is 1-39 letters, digits or single hyphens; a repository name
# is letters, digits, '.', '_', '-' (never '.' or '..' alone)
_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
_LABEL_BAD = re.compile(r"[\x00-\x1f\x7f,]")


def _repo(value: str) -> str:
    owner, _, name = value.partition("/")
    if (not _OWNER.fullmatch(owner) or not _NAME.fullmatch(name) or name in (".", "..")
            or name.endswith(".git")):
        raise ValueError(f"repo = {value!r} is not a GitHub repository: write \"owner/name\" "
                         "(letters, digits, '-' in the owner; '._-' too in the name, without "
                         "'.git'), e.g. \"octo-org/web\"")
    return value


def _api(value: str) -> str:
    if not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?", value):
        raise ValueError(f"api = {value!r} is not an http(s) URL without credentials, query "
                         "or fragment (e.g. \"https://api.github.com\", or "
                         "\"https://ghe.example.com/api/v3\" for GitHub Enterprise)")
    return value.rstrip("/")


def _remote(value: str) -> str:
    if (not value or value != value.strip() or value.startswith("-")
            or any(c.isspace() or not c.isprintable() for c in value)):
        raise ValueError(f"remote = {value!r} is not a git URL or path: one word, not starting "
                         "with '-' (e.g. \"git@github.com:octo-org/web.git\" or "
                         "\"https://github.com/octo-org/web.git\")")
    return value


def _label(value: str) -> str:
    if _LABEL_BAD.search(value) or value != value.strip():
        raise ValueError(f"label = {value!r}: a label without control characters, commas or "
                         "surrounding spaces (e.g. \"teamctl\")")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class GithubSettings(_Strict):
    """``[forge] github``: the repository, where its token is, where its API is."""

    repo: Annotated[str, Field(max_length=140), AfterValidator(_repo)]
    token_env: Annotated[str, Field(pattern=_ENV)] = "GITHUB_TOKEN"
    api: Annotated[str, Field(max_length=300), AfterValidator(_api)] = DEFAULT_API

    @property
    def owner(self) -> str:
        return self.repo.partition("/")[0]

    @property
    def name(self) -> str:
        return self.repo.partition("/")[2]


class Intake(_Strict):
    """``[forge] intake``: the issues that become tasks."""

    label: Annotated[str, Field(min_length=1, max_length=50), AfterValidator(_label)] = "teamctl"
    state: Literal["open"] = "open"


class ForgeSection(_Strict):
    """``[forge]``: one forge (GitHub for now) and what teamctl does with it."""

    github: GithubSettings
    intake: Intake | None = None
    write_back: Annotated[bool, Field(strict=True)] = False
    pull_requests: Annotated[bool, Field(strict=True)] = False
    remote: Annotated[str, Field(max_length=1000), AfterValidator(_remote)] | None = None
    auto_merge: Annotated[bool, Field(strict=True)] = False
    ci_retries: Annotated[int, Field(ge=0, le=20, strict=True)] = 3
    poll_interval: Annotated[float, Field(ge=5, le=3600, allow_inf_nan=False)] = 60.0

    def push_url(self) -> str:
        """Where a task's branch is pushed: ``remote``, else the repository's HTTPS URL on
        the API's host (github.com for api.github.com; the host itself for Enterprise)."""
        if self.remote is not None:
            return self.remote
        scheme, _, rest = self.github.api.partition("://")
        host = rest.partition("/")[0]
        host = "github.com" if host == "api.github.com" else host
        return f"{scheme}://{host}/{self.github.repo}.git"
