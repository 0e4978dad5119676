"""A local fake of GitHub's REST subset teamctl uses (docs/forge.md), over real HTTP on
localhost: issues, labels, comments, the repository's permissions; pull requests (made from
a branch of a local bare repository, ``remote``, their head read from it as GitHub reads its
own; marked ready by GraphQL's ``markPullRequestReadyForReview``; merged — refused while a
draft or not mergeable — closing the issues their body closes with ``Closes #N``, as GitHub
does), a commit's check runs and statuses, a pull request's reviews and their comments;
the token checked (401), pagination by ``per_page``/``page`` with a ``Link`` header, ETags (a
matching ``If-None-Match`` answers 304 and costs no request of the window), the primary rate
limit (``x-ratelimit-*``; spent: 403 — until its reset, then a new window, as GitHub's comes
back, when the test says so) and a secondary one (429 with ``retry-after``), 404 and
422 with GitHub's error bodies. Its answers follow the shapes of GitHub's OpenAPI description
(tests/data/github/openapi_excerpt.json; tests/unit/test_fake_github.py validates them)."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["FakeGitHub"]

_DOCS = "https://docs.github.com/rest"
_STAMP = "2026-12-06T12:00:00Z"


def _user(login: str, uid: int, base: str) -> dict[str, Any]:
    api = f"{base}/users/{login}"
    return {"login": login, "id": uid, "node_id": f"U_{uid}", "type": "User",
            "site_admin": False, "gravatar_id": "", "name": None, "email": None,
            "avatar_url": f"{base}/avatars/{login}", "url": api,
            "html_url": f"https://github.com/{login}", "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}", "starred_url": f"{api}/starred{{/o}}{{/r}}",
            "subscriptions_url": f"{api}/subscriptions", "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos", "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events"}


@dataclass
class _State:
    repo: str
    token: str
    permissions: dict[str, bool]
    limit: int = 5000
    remaining: int = 5000
    reset: int = 2_000_000_000
    renews: bool = False  # a spent window comes back at its reset (the wall clock's)
    secondary_retry_after: int | None = None  # set: the next request answers 429
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    mergeable: bool | None = True  # what a pull request's mergeable says
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status
    auth_headers: list[str] = field(default_factory=list)
    next_id: int = 1000


class FakeGitHub:
    """The fake, started on a free port of 127.0.0.1 (``url`` is its API base); tests change
    its repository through the methods below, the client sees them through HTTP only."""

    def __init__(self, *, repo: str = "octo-org/web", token: str = "ghp_fake-token-0001",
                 permissions: dict[str, bool] | None = None, remote: Path | None = None
                 ) -> None:
        self.lock = threading.Lock()
        self._asked = threading.Condition(self.lock)  # notified on each request answered
        self.remote = remote
        self.state = _State(repo=repo, token=token, permissions=permissions or {
            "admin": False, "maintain": False, "push": True, "triage": True, "pull": True})
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)  # a short poll: a quick shutdown

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- what a test does to the repository --------------------------------------------

    def _id(self) -> int:
        self.state.next_id += 1
        return self.state.next_id

    def _number(self) -> int:
        """Issues and pull requests share one sequence of numbers, as on GitHub."""
        return max([0, *self.state.issues, *self.state.pulls]) + 1

    def add_label(self, name: str) -> dict[str, Any]:
        with self.lock:
            label = {"id": self._id(), "node_id": f"LA_{name}", "name": name,
                     "url": f"{self.url}/repos/{self.state.repo}/labels/{name}",
                     "description": None, "color": "ededed", "default": False}
            self.state.labels[name] = label
            return label

    def add_issue(self, title: str, body: str | None = "", labels: tuple[str, ...] = ()
                  ) -> dict[str, Any]:
        with self.lock:
            number = self._number()
            repo_api = f"{self.url}/repos/{self.state.repo}"
            issue = {"id": self._id(), "node_id": f"I_{number}", "number": number,
                     "url": f"{repo_api}/issues/{number}", "repository_url": repo_api,
                     "labels_url": f"{repo_api}/issues/{number}/labels{{/name}}",
                     "comments_url": f"{repo_api}/issues/{number}/comments",
                     "events_url": f"{repo_api}/issues/{number}/events",
                     "html_url": f"https://github.com/{self.state.repo}/issues/{number}",
                     "title": title, "body": body, "state": "open", "locked": False,
                     "user": _user("octocat", 1, self.url), "milestone": None, "comments": 0,
                     "labels": [self.state.labels.get(n) or {"name": n} for n in labels],
                     "closed_at": None, "created_at": _STAMP, "updated_at": _STAMP}
            self.state.issues[number] = issue
            self.state.comments[number] = []
            return issue

    def edit_issue(self, number: int, **changes: Any) -> None:
        with self.lock:
            issue = self.state.issues[number]
            issue.update(changes)
            if changes.get("state") == "closed":
                issue["closed_at"] = "2026-12-06T13:00:00Z"
            issue["updated_at"] = f"2026-12-06T12:{len(self.state.requests) % 60:02d}:00Z"

    def wait_request(self, wanted: Callable[[tuple[str, str, int]], bool], *, after: int = 0,
                     count: int = 1, timeout: float = 30.0) -> list[tuple[str, str, int]]:
        """The requests (method, path, status) answered after the first ``after`` that
        ``wanted`` matches, once there are ``count`` of them; AssertionError past
        ``timeout``."""
        with self._asked:
            found: list[tuple[str, str, int]] = []

            def enough() -> bool:
                found[:] = [r for r in self.state.requests[after:] if wanted(r)]
                return len(found) >= count
            if not self._asked.wait_for(enough, timeout):
                raise AssertionError(f"{count} such requests not asked within {timeout}s; "
                                     f"asked: {self.state.requests[after:][-20:]}")
            return list(found)

    def comments_on(self, number: int) -> list[str]:
        with self.lock:
            return [c["body"] for c in self.state.comments.get(number, [])]

    def add_check_run(self, sha: str, name: str, conclusion: str | None, *,
                      summary: str = "", text: str = "") -> dict[str, Any]:
        """A check run on commit ``sha`` (``conclusion`` None: still running)."""
        with self.lock:
            rid = self._id()
            repo_api = f"{self.url}/repos/{self.state.repo}"
            run = {"id": rid, "node_id": f"CR_{rid}", "head_sha": sha, "name": name,
                   "external_id": None, "url": f"{repo_api}/check-runs/{rid}",
                   "html_url": f"https://github.com/{self.state.repo}/runs/{rid}",
                   "details_url": None, "status": "in_progress" if conclusion is None
                   else "completed", "conclusion": conclusion, "started_at": _STAMP,
                   "completed_at": None if conclusion is None else _STAMP,
                   "output": {"title": name, "summary": summary, "text": text,
                              "annotations_count": 0,
                              "annotations_url": f"{repo_api}/check-runs/{rid}/annotations"},
                   "check_suite": {"id": rid + 1}, "app": None, "pull_requests": []}
            self.state.check_runs.setdefault(sha, []).append(run)
            return run

    def add_review(self, number: int, state: str, body: str, *, commit: str = "0" * 40
                   ) -> dict[str, Any]:
        """A review of pull request ``number`` (``APPROVED``, ``CHANGES_REQUESTED``, ...)."""
        with self.lock:
            rid = self._id()
            html = f"https://github.com/{self.state.repo}/pull/{number}#pullrequestreview-{rid}"
            api = f"{self.url}/repos/{self.state.repo}/pulls/{number}"
            review = {"id": rid, "node_id": f"PRR_{rid}", "user": _user("reviewer", 3, self.url),
                      "body": body, "state": state, "html_url": html, "pull_request_url": api,
                      "_links": {"html": {"href": html}, "pull_request": {"href": api}},
                      "submitted_at": _STAMP, "commit_id": commit,
                      "author_association": "MEMBER"}
            self.state.reviews.setdefault(number, []).append(review)
            return review

    def add_status(self, sha: str, context: str, state: str, description: str = ""
                   ) -> dict[str, Any]:
        """A commit status on ``sha`` (``pending``, ``success``, ``failure``, ``error``)."""
        with self.lock:
            sid = self._id()
            status = {"id": sid, "node_id": f"SC_{sid}", "state": state, "context": context,
                      "description": description, "target_url": None, "avatar_url": None,
                      "url": f"{self.url}/repos/{self.state.repo}/statuses/{sha}",
                      "created_at": _STAMP, "updated_at": _STAMP}
            self.state.statuses.setdefault(sha, []).insert(0, status)
            return status

    def add_review_comment(self, number: int, review: int, path: str, line: int | None,
                           body: str) -> dict[str, Any]:
        """A comment of review ``review`` on ``path`` at ``line`` of pull request ``number``."""
        with self.lock:
            cid = self._id()
            api = f"{self.url}/repos/{self.state.repo}/pulls"
            html = f"https://github.com/{self.state.repo}/pull/{number}#discussion_r{cid}"
            comment = {"id": cid, "node_id": f"PRRC_{cid}", "pull_request_review_id": review,
                       "url": f"{api}/comments/{cid}", "diff_hunk": "@@ -1 +1 @@",
                       "path": path, "position": line, "original_position": line,
                       "commit_id": "0" * 40, "original_commit_id": "0" * 40,
                       "user": _user("reviewer", 3, self.url), "body": body,
                       "created_at": _STAMP, "updated_at": _STAMP, "html_url": html,
                       "pull_request_url": f"{api}/{number}", "author_association": "MEMBER",
                       "_links": {"self": {"href": f"{api}/comments/{cid}"},
                                  "html": {"href": html},
                                  "pull_request": {"href": f"{api}/{number}"}},
                       "line": line, "original_line": line, "side": "RIGHT"}
            self.state.review_comments.setdefault(review, []).append(comment)
            return comment

    def pull_of(self, branch: str) -> dict[str, Any] | None:
        """The pull request whose head is ``branch`` (None: none was opened), as GitHub shows
        it now: its head where the branch was pushed, whether or not the daemon asked since."""
        with self.lock:
            found = [p for p in self.state.pulls.values() if p["head"]["ref"] == branch]
            return self._refreshed(found[-1]) if found else None

    def _head(self, branch: str) -> str | None:
        """Where ``branch`` is on the remote (the bare repository), as GitHub sees a push."""
        if self.remote is None:
            return None
        done = subprocess.run(["git", "-C", str(self.remote), "rev-parse", "--verify",
                               "--quiet", f"refs/heads/{branch}"], capture_output=True,
                              text=True, check=False)
        return done.stdout.strip() or None

    def spend_rate_limit(self, reset: int, *, renews: bool = False, left: int = 0) -> None:
        """The primary window spent (``left``: after that many more requests that cost one):
        each request answers 403 until its ``reset`` (epoch seconds) — and then (``renews``,
        by the wall clock, as GitHub's window comes back) a new window."""
        with self.lock:
            self.state.remaining = left
            self.state.reset = reset
            self.state.renews = renews

    # -- the HTTP side -----------------------------------------------------------------

    def answer(self, method: str, target: str, headers: dict[str, str], body: bytes
               ) -> tuple[int, dict[str, str], Any]:
        with self.lock:
            status, extra, data = self._answer(method, target, headers, body)
            self.state.requests.append((method, urlsplit(target).path, status))
            self._asked.notify_all()
            return status, extra, data

    def _rate(self) -> dict[str, str]:
        s = self.state
        return {"x-ratelimit-limit": str(s.limit), "x-ratelimit-remaining": str(s.remaining),
                "x-ratelimit-reset": str(s.reset), "x-ratelimit-used": str(s.limit - s.remaining),
                "x-ratelimit-resource": "core"}

    def _answer(self, method: str, target: str, headers: dict[str, str], body: bytes
                ) -> tuple[int, dict[str, str], Any]:
        s = self.state
        auth = headers.get("authorization", "")
        s.auth_headers.append(auth)
        if auth != f"Bearer {s.token}":
            return 401, {}, {"message": "Bad credentials", "documentation_url": _DOCS,
                             "status": "401"}
        if s.secondary_retry_after is not None:
            retry, s.secondary_retry_after = s.secondary_retry_after, None
            return 429, {"retry-after": str(retry), **self._rate()}, {
                "message": "You have exceeded a secondary rate limit.",
                "documentation_url": _DOCS}
        if s.remaining <= 0 and s.renews and time.time() >= s.reset:  # a new window
            s.remaining, s.reset = s.limit, int(time.time()) + 3600
        if s.remaining <= 0:
            return 403, self._rate(), {"message": "API rate limit exceeded for user.",
                                       "documentation_url": _DOCS}
        parts = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        prefix = f"/repos/{s.repo}"
        path = parts.path
        if path == "/graphql" and method == "POST":
            s.remaining -= 1
            status, data = self._graphql(json.loads(body) if body else {})
            return status, self._rate(), data
        if not (path == prefix or path.startswith(prefix + "/")):
            return self._missing()
        rest = path[len(prefix):]
        payload = json.loads(body) if body else {}
        status, data = self._route(method, rest, payload)
        if status == 200 and isinstance(data, list):
            return self._page(path, query, data, headers)
        if method == "GET" and status == 200:  # one object: its ETag, a 304 costs nothing
            etag = f'"{hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]}"'
            if headers.get("if-none-match") == etag:
                return 304, {"etag": etag, **self._rate()}, None
            s.remaining -= 1
            return status, {"etag": etag, **self._rate()}, data
        s.remaining -= 1
        return status, self._rate(), data

    def _route(self, method: str, rest: str, payload: Any) -> tuple[int, Any]:
        s = self.state
        found = re.fullmatch(r"/issues/(\d+)(/comments)?", rest)
        if method == "GET" and rest == "":
            return 200, {"id": 42, "full_name": s.repo, "default_branch": "main",
                         "permissions": dict(s.permissions)}
        if method == "GET" and rest == "/labels":
            return 200, list(s.labels.values())
        if method == "GET" and rest == "/issues":
            return 200, list(s.issues.values())
        runs = re.fullmatch(r"/commits/([0-9a-f]{4,40})/check-runs", rest)
        if method == "GET" and runs:
            listed = s.check_runs.get(runs.group(1), [])
            return 200, {"total_count": len(listed), "check_runs": listed}
        statuses = re.fullmatch(r"/commits/([0-9a-f]{4,40})/status", rest)
        if method == "GET" and statuses:
            return 200, self._combined(statuses.group(1))
        pulled = self._pulls_route(method, rest, payload)
        if pulled is not None:
            return pulled
        reviews = re.fullmatch(r"/pulls/(\d+)/reviews", rest)
        if method == "GET" and reviews and (int(reviews.group(1)) in s.reviews
                                            or int(reviews.group(1)) in s.pulls):
            return 200, s.reviews.get(int(reviews.group(1)), [])
        if found and int(found.group(1)) in s.issues:
            number = int(found.group(1))
            if method == "GET" and not found.group(2):
                return 200, s.issues[number]
            if method == "GET":
                return 200, s.comments[number]
            if method == "POST" and found.group(2):
                return self._comment(number, payload)
        return self._missing()[0], self._missing()[2]

    def _combined(self, sha: str) -> dict[str, Any]:
        s = self.state
        listed = s.statuses.get(sha, [])
        newest = list({st["context"]: st for st in reversed(listed)}.values())
        states = {st["state"] for st in newest}
        state = ("failure" if states & {"failure", "error"} else
                 "pending" if "pending" in states or not newest else "success")
        return {"state": state, "sha": sha, "total_count": len(newest), "statuses": newest,
                "repository": {"id": 42, "full_name": s.repo},
                "commit_url": f"{self.url}/repos/{s.repo}/commits/{sha}",
                "url": f"{self.url}/repos/{s.repo}/commits/{sha}/status"}

    def _pulls_route(self, method: str, rest: str, payload: Any) -> tuple[int, Any] | None:
        s = self.state
        one = re.fullmatch(r"/pulls/(\d+)(/merge)?", rest)
        comments = re.fullmatch(r"/pulls/(\d+)/reviews/(\d+)/comments", rest)
        if rest == "/pulls" and method == "POST":
            return self._open_pull(payload)
        if rest == "/pulls" and method == "GET":
            return 200, [self._refreshed(p) for p in s.pulls.values()]
        if one and int(one.group(1)) in s.pulls:
            pull = self._refreshed(s.pulls[int(one.group(1))])
            if method == "GET" and not one.group(2):
                return 200, pull
            if method == "PUT" and one.group(2):
                return self._merge(pull, payload)
        if comments and method == "GET" and int(comments.group(1)) in s.pulls:
            return 200, s.review_comments.get(int(comments.group(2)), [])
        return None

    def _open_pull(self, payload: Any) -> tuple[int, Any]:
        s = self.state
        head, base = str(payload.get("head", "")), str(payload.get("base", ""))
        sha = self._head(head)
        taken = [p for p in s.pulls.values() if p["head"]["ref"] == head and p["state"] == "open"]
        if sha is None or taken or not payload.get("title"):
            message = (f"A pull request already exists for {s.repo.split('/')[0]}:{head}."
                       if taken else "head: invalid" if sha is None else "title: missing")
            return 422, {"message": "Validation Failed", "documentation_url": _DOCS,
                         "errors": [{"resource": "PullRequest", "code": "custom",
                                     "message": message}]}
        number, pid = self._number(), self._id()
        s.pulls[number] = _pull(self.url, s.repo, number, pid, payload, sha, base)
        return 201, self._refreshed(s.pulls[number])

    def _refreshed(self, pull: dict[str, Any]) -> dict[str, Any]:
        """The pull request as GitHub shows it now: its head where the branch is."""
        if pull["state"] == "open":
            pull["head"]["sha"] = self._head(pull["head"]["ref"]) or pull["head"]["sha"]
            pull["mergeable"] = self.state.mergeable
            pull["mergeable_state"] = {True: "clean", False: "dirty", None: "unknown"}[
                self.state.mergeable]
        return pull

    def _merge(self, pull: dict[str, Any], payload: Any) -> tuple[int, Any]:
        if pull["draft"] or pull["state"] != "open" or pull["mergeable"] is not True:
            return 405, {"message": "Pull Request is not mergeable", "documentation_url": _DOCS}
        if payload.get("sha") not in (None, pull["head"]["sha"]):
            return 409, {"message": "Head branch was modified. Review and try the merge again.",
                         "documentation_url": _DOCS}
        pull.update(state="closed", merged=True, merged_at=_STAMP, closed_at=_STAMP,
                    merge_commit_sha=pull["head"]["sha"], mergeable=None)
        for number in re.findall(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?) #(\d+)",
                                 pull["body"] or ""):
            if int(number) in self.state.issues:
                self.state.issues[int(number)].update(state="closed", closed_at=_STAMP)
        return 200, {"sha": pull["head"]["sha"], "merged": True,
                     "message": "Pull Request successfully merged"}

    def _graphql(self, payload: Any) -> tuple[int, Any]:
        node = str((payload.get("variables") or {}).get("id", ""))
        if "markPullRequestReadyForReview" not in str(payload.get("query", "")):
            return 200, {"errors": [{"message": "this fake knows one mutation"}]}
        for pull in self.state.pulls.values():
            if pull["node_id"] == node:
                pull["draft"] = False
                return 200, {"data": {"markPullRequestReadyForReview": {
                    "pullRequest": {"isDraft": False}}}}
        return 200, {"errors": [{"type": "NOT_FOUND", "message": f"no node {node}"}]}

    def _comment(self, number: int, payload: Any) -> tuple[int, Any]:
        s = self.state
        text = payload.get("body") if isinstance(payload, dict) else None
        if not isinstance(text, str) or not text:
            return 422, {"message": "Validation Failed", "documentation_url": _DOCS,
                         "errors": [{"resource": "IssueComment", "field": "body",
                                     "code": "missing_field"}]}
        cid = self._id()
        comment = {"id": cid, "node_id": f"IC_{cid}", "body": text,
                   "url": f"{self.url}/repos/{s.repo}/issues/comments/{cid}",
                   "html_url": f"https://github.com/{s.repo}/issues/{number}#issuecomment-{cid}",
                   "issue_url": f"{self.url}/repos/{s.repo}/issues/{number}",
                   "user": _user("teamctl-bot", 2, self.url), "author_association": "MEMBER",
                   "created_at": _STAMP, "updated_at": _STAMP}
        s.comments[number].append(comment)
        s.issues[number]["comments"] += 1
        return 201, comment

    def _page(self, path: str, query: dict[str, str], items: list[Any],
              headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        s = self.state
        if "labels" in query:
            wanted = set(query["labels"].split(","))
            items = [i for i in items if wanted <= {lb["name"] for lb in i.get("labels", [])}]
        if "head" in query:
            ref = query["head"].partition(":")[2]
            items = [i for i in items if i.get("head", {}).get("ref") == ref]
        if "state" in query and query["state"] != "all":
            items = [i for i in items if i.get("state") == query["state"]]
        per_page = max(1, min(100, int(query.get("per_page", "30"))))
        page = max(1, int(query.get("page", "1")))
        chunk = items[(page - 1) * per_page: page * per_page]
        digest = hashlib.sha256(json.dumps(chunk, sort_keys=True).encode()).hexdigest()
        etag = f'"{digest[:32]}"'
        extra = {"etag": etag}
        if headers.get("if-none-match") == etag:
            return 304, {**extra, **self._rate()}, None  # a 304 costs no request
        s.remaining -= 1
        links = []
        last = max(1, -(-len(items) // per_page))
        if page < last:
            links.append(f'<{self.url}{path}?{urlencode({**query, "page": page + 1})}>; '
                         'rel="next"')
            links.append(f'<{self.url}{path}?{urlencode({**query, "page": last})}>; rel="last"')
        if links:
            extra["link"] = ", ".join(links)
        return 200, {**extra, **self._rate()}, chunk

    def _missing(self) -> tuple[int, dict[str, str], Any]:
        return 404, self._rate(), {"message": "Not Found", "documentation_url": _DOCS,
                                   "status": "404"}


def _pull(base: str, repo: str, number: int, pid: int, payload: dict[str, Any], sha: str,
          ref: str) -> dict[str, Any]:
    """A new pull request as GitHub's ``pull-request`` schema has it."""
    api = f"{base}/repos/{repo}"
    html = f"https://github.com/{repo}/pull/{number}"
    owner = repo.split("/")[0]
    side = {"label": f"{owner}:{payload['head']}", "ref": payload["head"], "sha": sha,
            "user": _user(owner, 9, base), "repo": {"id": 42, "full_name": repo}}
    links = {k: {"href": v} for k, v in (
        ("self", f"{api}/pulls/{number}"), ("html", html),
        ("issue", f"{api}/issues/{number}"), ("comments", f"{api}/issues/{number}/comments"),
        ("review_comments", f"{api}/pulls/{number}/comments"),
        ("review_comment", f"{api}/pulls/comments{{/number}}"),
        ("commits", f"{api}/pulls/{number}/commits"), ("statuses", f"{api}/statuses/{sha}"))}
    return {"url": f"{api}/pulls/{number}", "id": pid, "node_id": f"PR_{pid}",
            "html_url": html, "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
            "issue_url": f"{api}/issues/{number}", "commits_url": f"{api}/pulls/{number}/commits",
            "review_comments_url": f"{api}/pulls/{number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{number}/comments",
            "statuses_url": f"{api}/statuses/{sha}", "number": number, "state": "open",
            "locked": False, "title": payload["title"], "user": _user("teamctl-bot", 2, base),
            "body": payload.get("body"), "labels": [], "milestone": None,
            "active_lock_reason": None, "created_at": _STAMP, "updated_at": _STAMP,
            "closed_at": None, "merged_at": None, "merge_commit_sha": None, "assignee": None,
            "assignees": [], "requested_reviewers": [], "requested_teams": [],
            "head": side, "base": {**side, "label": f"{owner}:{ref}", "ref": ref, "sha": "0" * 40},
            "_links": links, "author_association": "MEMBER", "auto_merge": None,
            "draft": bool(payload.get("draft")), "merged": False, "mergeable": None,
            "rebaseable": None, "mergeable_state": "unknown", "merged_by": None, "comments": 0,
            "review_comments": 0, "maintainer_can_modify": False, "commits": 1,
            "additions": 1, "deletions": 0, "changed_files": 1}


class _Handler(http.server.BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"
    # the headers and the body go out as two writes on a kept-alive connection: with Nagle's
    # algorithm the body waited for the client's delayed ACK of the headers, ~40 ms an answer
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size) if size else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, extra, data = self.fake.answer(self.command, self.path, headers, body)
        raw = b"" if data is None else json.dumps(data).encode()
        self.send_response(status)
        for key, value in extra.items():
            self.send_header(key, value)
        if data is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_PATCH = do_PUT = _serve

    def log_message(self, *_args: object) -> None:
        pass
