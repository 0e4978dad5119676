"""GitHub's REST API with httpx, following GitHub's documented contract (docs/forge.md):
``Accept: application/vnd.github+json`` and ``X-GitHub-Api-Version: 2022-11-28``; conditional
requests (the ``ETag`` of a list's first page sent back as ``If-None-Match``: a ``304`` is the
list kept, and costs no rate limit); pages followed by the ``Link`` header's ``rel="next"``
(same origin only); ``x-ratelimit-remaining``/``x-ratelimit-reset`` kept, and no request sent
while the window is spent; 401, 403, 404, 422 and the rate limits (403 or 429 with the
window spent, or ``retry-after``) as typed ForgeErrors. The token goes in the Authorization
header only."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import httpx

from orchestrator.errors import ForgeError
from orchestrator.forge import github_answers as answers
from orchestrator.forge.protocol import Issue, RateLimit, RepoAccess
from orchestrator.tls import client_context

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.forge.protocol import Check, Pull, Review, ReviewComment
    from orchestrator.forge.tokens import Token

__all__ = ["API_VERSION", "GitHub"]

API_VERSION = "2022-11-28"
_LINK_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')
_MAX_PAGES = 50  # 5000 issues at 100 a page: past it, a list is cut (said in the error)
_PER_PAGE = 100
_TIMEOUT = 30.0
_KEPT = 2000  # answers kept for their ETags, at most
_READY = ("mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) "
          "{ pullRequest { isDraft } } }")


def graphql_url(api: str) -> str:
    """GitHub's GraphQL endpoint beside the REST API ``api``: ``/graphql`` on github.com (and
    a test's fake), ``/api/graphql`` for GitHub Enterprise's ``/api/v3``."""
    api = api.rstrip("/")
    return api[:-len("/v3")] + "/graphql" if api.endswith("/api/v3") else api + "/graphql"


def _issue(data: Any) -> Issue:
    try:
        return Issue(id=int(data["id"]), number=int(data["number"]),
                     title=str(data["title"]), body=str(data.get("body") or ""),
                     state=str(data["state"]), url=str(data["html_url"]),
                     labels=tuple(str(label["name"]) if isinstance(label, dict) else str(label)
                                  for label in data.get("labels") or ()),
                     updated_at=str(data["updated_at"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ForgeError("forge_bad_answer", f"GitHub answered an issue without {exc}; is "
                         "[forge] github.api GitHub's REST API?") from None


class GitHub:
    """One repository on GitHub (or GitHub Enterprise: ``api``), as a Forge."""

    def __init__(self, *, repo: str, api: str, token: Token,
                 clock: Callable[[], float] = time.time,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._repo = repo
        self._api = api.rstrip("/")
        self._clock = clock
        self._client = httpx.AsyncClient(
            base_url=self._api, timeout=_TIMEOUT, transport=transport, follow_redirects=False,
            verify=client_context(),
            headers={"Accept": "application/vnd.github+json",
                     "X-GitHub-Api-Version": API_VERSION,
                     "User-Agent": "teamctl",
                     "Authorization": f"Bearer {token.reveal()}"})
        self._rate = RateLimit()
        self._requests = 0
        # the first page's URL -> (its ETag, the whole list it stood for)
        self._etags: dict[str, tuple[str, list[Any]]] = {}
        self._objects: dict[str, tuple[str, Any]] = {}  # the same for one object's URL

    @property
    def rate_limit(self) -> RateLimit:
        return self._rate

    @property
    def requests_made(self) -> int:
        """Requests sent (304s included): the figure docs/forge.md's budget counts."""
        return self._requests

    async def aclose(self) -> None:
        await self._client.aclose()

    async def repo_access(self) -> RepoAccess:
        data = await self._json("GET", f"/repos/{self._repo}")
        permissions = data.get("permissions") if isinstance(data, dict) else None
        if not isinstance(permissions, dict):
            raise ForgeError("forge_bad_answer", f"GitHub's answer for {self._repo} has no "
                             "permissions object: the token may not be a user's token")
        return RepoAccess(self._repo, {str(k): v is True for k, v in permissions.items()},
                          default_branch=str(data.get("default_branch") or "main"))

    async def labelled_issues(self, label: str, state: str) -> list[Issue]:
        """The issues (not pull requests) with ``label`` in ``state``, every page."""
        items = await self._list(f"/repos/{self._repo}/issues",
                                 {"labels": label, "state": state})
        return [_issue(item) for item in items
                if isinstance(item, dict) and "pull_request" not in item]

    async def issue(self, number: int) -> Issue:
        return _issue(await self._json("GET", f"/repos/{self._repo}/issues/{int(number)}"))

    async def comment(self, number: int, body: str) -> int:
        data = await self._json("POST", f"/repos/{self._repo}/issues/{int(number)}/comments",
                                json={"body": body})
        try:
            return int(data["id"])
        except (KeyError, TypeError, ValueError):
            raise ForgeError("forge_bad_answer",
                             "GitHub answered a comment without its id") from None

    # -- pull requests, their checks and reviews ----------------------------------------

    async def find_pull(self, branch: str) -> Pull | None:
        """The newest pull request (any state) whose head is ``branch`` of this repository."""
        owner = self._repo.partition("/")[0]
        items = await self._list(f"/repos/{self._repo}/pulls",
                                 {"head": f"{owner}:{branch}", "state": "all"})
        found = [answers.pull(item) for item in items]
        return max(found, key=lambda p: p.number) if found else None

    async def open_pull(self, *, title: str, body: str, head: str, base: str,
                        draft: bool) -> Pull:
        return answers.pull(await self._json(
            "POST", f"/repos/{self._repo}/pulls",
            json={"title": title, "body": body, "head": head, "base": base, "draft": draft}))

    async def pull(self, number: int) -> Pull:
        return answers.pull(await self._cached(f"/repos/{self._repo}/pulls/{int(number)}"))

    async def mark_ready(self, pull: Pull) -> None:
        """The draft marked ready for review: GitHub's REST API has no way to, its GraphQL
        API's ``markPullRequestReadyForReview`` has."""
        data = await self._json("POST", graphql_url(self._api),
                                json={"query": _READY, "variables": {"id": pull.node_id}})
        if not isinstance(data, dict) or data.get("errors"):
            said = str(data.get("errors") if isinstance(data, dict) else data)[:300]
            raise ForgeError("forge_invalid", f"GitHub did not mark #{pull.number} ready for "
                             f"review: {said}")

    async def checks(self, sha: str) -> list[Check]:
        """The commit's check runs and commit statuses (the newest status per context)."""
        runs = await self._cached(f"/repos/{self._repo}/commits/{sha}/check-runs",
                                  {"per_page": "100"})
        status = await self._cached(f"/repos/{self._repo}/commits/{sha}/status",
                                    {"per_page": "100"})
        try:
            found = [answers.check_run(run) for run in runs["check_runs"]]
            found += [answers.commit_status(one) for one in status["statuses"]]
        except (KeyError, TypeError) as exc:
            raise ForgeError("forge_bad_answer", f"GitHub answered a commit's checks "
                             f"without {exc}") from None
        return found

    async def reviews(self, number: int) -> list[Review]:
        return [answers.review(item) for item in await self._list(
            f"/repos/{self._repo}/pulls/{int(number)}/reviews", {})]

    async def review_comments(self, number: int, review: int) -> list[ReviewComment]:
        return [answers.review_comment(item) for item in await self._list(
            f"/repos/{self._repo}/pulls/{int(number)}/reviews/{int(review)}/comments", {})]

    async def merge(self, number: int, sha: str) -> str:
        """The pull request merged — only if its head is still ``sha``; the merge commit."""
        data = await self._json("PUT", f"/repos/{self._repo}/pulls/{int(number)}/merge",
                                json={"sha": sha, "merge_method": "merge"})
        if not isinstance(data, dict) or data.get("merged") is not True:
            raise ForgeError("forge_not_mergeable", f"GitHub did not merge #{number}")
        return str(data.get("sha") or "")

    async def _cached(self, path: str, params: dict[str, str] | None = None) -> Any:
        """One object, asked with the ETag of its last answer: a 304 is that answer kept
        (and costs nothing of the rate limit)."""
        url = str(self._client.build_request("GET", path, params=params or {}).url)
        kept = self._objects.get(url)
        response = await self._send("GET", url,
                                    headers={"If-None-Match": kept[0]} if kept else {})
        if response.status_code == 304 and kept is not None:
            return kept[1]
        data = self._decode(response)
        if etag := response.headers.get("etag"):
            self._objects.pop(url, None)
            self._objects[url] = (etag, data)
            if len(self._objects) > _KEPT:  # the oldest answer goes (a merged PR's commits)
                del self._objects[next(iter(self._objects))]
        return data

    async def _list(self, path: str, params: dict[str, str]) -> list[Any]:
        first = str(self._client.build_request(
            "GET", path, params={**params, "per_page": str(_PER_PAGE)}).url)
        kept = self._etags.get(first)
        headers = {"If-None-Match": kept[0]} if kept else {}
        response = await self._send("GET", first, headers=headers)
        if response.status_code == 304 and kept is not None:
            return kept[1]
        items = self._body(response)
        etag = response.headers.get("etag")
        url = self._next(response)
        pages = 1
        while url is not None:
            if pages >= _MAX_PAGES:
                raise ForgeError("forge_too_many", f"{path} has more than "
                                 f"{_MAX_PAGES * _PER_PAGE} items: narrow the intake label")
            response = await self._send("GET", url, headers={})
            items.extend(self._body(response))
            url = self._next(response)
            pages += 1
        if etag:
            self._etags[first] = (etag, items)
        return items

    def _next(self, response: httpx.Response) -> str | None:
        found = _LINK_NEXT.search(response.headers.get("link", ""))
        if found is None:
            return None
        url = httpx.URL(found.group(1))
        if (url.scheme, url.host, url.port) != (
                self._client.base_url.scheme, self._client.base_url.host,
                self._client.base_url.port):
            raise ForgeError("forge_bad_answer", "GitHub's next page is on another host "
                             f"({url.host}); the token is sent to {self._api} only")
        return str(url)

    def _body(self, response: httpx.Response) -> list[Any]:
        data = self._decode(response)
        if not isinstance(data, list):
            raise ForgeError("forge_bad_answer", "GitHub answered a list request with "
                             f"{type(data).__name__}")
        return data

    @staticmethod
    def _decode(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise ForgeError("forge_bad_answer", f"GitHub answered {response.status_code} "
                             "with a body that is not JSON; is [forge] github.api GitHub's "
                             "REST API?") from None

    async def _json(self, method: str, path: str, *, json: Any = None) -> Any:
        return self._decode(await self._send(method, path, headers={}, json=json))

    async def _send(self, method: str, url: str, *, headers: dict[str, str],
                    json: Any = None) -> httpx.Response:
        now = self._clock()
        if self._rate.remaining == 0 and self._rate.reset is not None and self._rate.reset > now:
            raise self._limited(self._rate.reset)
        self._requests += 1
        try:
            response = await self._client.request(method, url, headers=headers, json=json)
        except httpx.HTTPError as exc:
            raise ForgeError("forge_unreachable", f"GitHub at {self._api} did not answer "
                             f"({type(exc).__name__}); it is tried again at the next poll",
                             retryable=True) from None
        self._keep_rate(response)
        status = response.status_code
        if status < 300 or status == 304:
            return response
        raise self._refusal(response)

    def _keep_rate(self, response: httpx.Response) -> None:
        remaining = _int(response.headers.get("x-ratelimit-remaining"))
        if remaining is None:
            return
        self._rate = RateLimit(remaining=remaining,
                               limit=_int(response.headers.get("x-ratelimit-limit")),
                               reset=_float(response.headers.get("x-ratelimit-reset")))

    def _limited(self, until: float) -> ForgeError:
        return ForgeError("forge_rate_limited", "GitHub's rate limit is spent until "
                          f"{time.strftime('%H:%M:%S', time.gmtime(until))} UTC; polling "
                          "waits until then", status=429, retryable=True, until=until)

    def _refusal(self, response: httpx.Response) -> ForgeError:
        status = response.status_code
        try:
            data = response.json()
        except ValueError:
            data = {}
        said = str(data.get("message", ""))[:300] if isinstance(data, dict) else ""
        retry_after = _float(response.headers.get("retry-after"))
        if status in (403, 429) and (retry_after is not None or self._rate.remaining == 0):
            until = (self._clock() + retry_after if retry_after is not None
                     else self._rate.reset or self._clock() + 60)
            return self._limited(until)
        if status == 401:
            return ForgeError("forge_unauthorized", f"GitHub refused the token (401: {said}); "
                              "make a new token and export it in the variable [forge] "
                              "github.token_env names", status=status)
        if status == 403:
            return ForgeError("forge_forbidden", f"GitHub forbids this to the token (403: "
                              f"{said}); give it access to {self._repo} ('teamctl doctor' "
                              "lists what it has)", status=status)
        if status == 404:
            return ForgeError("forge_not_found", f"GitHub has no such thing in {self._repo} "
                              f"or hides it from the token (404: {said}); check [forge] "
                              "github.repo and the token's repositories", status=status)
        if status == 405:
            return ForgeError("forge_not_mergeable", f"GitHub cannot merge it now (405: "
                              f"{said}); it is tried again when its checks and reviews allow",
                              status=status)
        if status == 409:
            return ForgeError("forge_head_moved", f"the pull request's head moved (409: "
                              f"{said}); it is looked at again at the next poll",
                              status=status, retryable=True)
        if status == 422:
            errors = data.get("errors") if isinstance(data, dict) else None
            return ForgeError("forge_invalid", f"GitHub refused the request as invalid (422: "
                              f"{said}{'; ' + str(errors)[:300] if errors else ''})",
                              status=status)
        return ForgeError("forge_unreachable", f"GitHub answered {status} ({said}); it is "
                          "tried again at the next poll", status=status,
                          retryable=status >= 500)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
