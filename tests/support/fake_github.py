"""A local fake of GitHub's REST subset teamctl uses (docs/forge.md), over real HTTP on
localhost: issues, labels, comments, the repository's permissions, a commit's check runs and
a pull request's reviews (pulls themselves, statuses and review comments are not here yet);
the token checked (401), pagination by ``per_page``/``page`` with a ``Link`` header, ETags (a
matching ``If-None-Match`` answers 304 and costs no request of the window), the primary rate
limit (``x-ratelimit-*``; spent: 403) and a secondary one (429 with ``retry-after``), 404 and
422 with GitHub's error bodies. Its answers follow the shapes of GitHub's OpenAPI description
(tests/data/github/openapi_excerpt.json; tests/unit/test_fake_github.py validates them)."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

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
    secondary_retry_after: int | None = None  # set: the next request answers 429
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status
    auth_headers: list[str] = field(default_factory=list)
    next_id: int = 1000


class FakeGitHub:
    """The fake, started on a free port of 127.0.0.1 (``url`` is its API base); tests change
    its repository through the methods below, the client sees them through HTTP only."""

    def __init__(self, *, repo: str = "octo-org/web", token: str = "ghp_fake-token-0001",
                 permissions: dict[str, bool] | None = None) -> None:
        self.lock = threading.Lock()
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
            number = len(self.state.issues) + 1
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

    def spend_rate_limit(self, reset: int) -> None:
        with self.lock:
            self.state.remaining = 0
            self.state.reset = reset

    # -- the HTTP side -----------------------------------------------------------------

    def answer(self, method: str, target: str, headers: dict[str, str], body: bytes
               ) -> tuple[int, dict[str, str], Any]:
        with self.lock:
            status, extra, data = self._answer(method, target, headers, body)
            self.state.requests.append((method, urlsplit(target).path, status))
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
        if s.remaining <= 0:
            return 403, self._rate(), {"message": "API rate limit exceeded for user.",
                                       "documentation_url": _DOCS}
        parts = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        prefix = f"/repos/{s.repo}"
        path = parts.path
        if not (path == prefix or path.startswith(prefix + "/")):
            return self._missing()
        rest = path[len(prefix):]
        payload = json.loads(body) if body else {}
        status, data = self._route(method, rest, payload)
        if status == 200 and isinstance(data, list):
            return self._page(path, query, data, headers)
        s.remaining -= 1
        return status, self._rate(), data

    def _route(self, method: str, rest: str, payload: Any) -> tuple[int, Any]:
        s = self.state
        found = re.fullmatch(r"/issues/(\d+)(/comments)?", rest)
        if method == "GET" and rest == "":
            return 200, {"id": 42, "full_name": s.repo, "permissions": dict(s.permissions)}
        if method == "GET" and rest == "/labels":
            return 200, list(s.labels.values())
        if method == "GET" and rest == "/issues":
            return 200, list(s.issues.values())
        runs = re.fullmatch(r"/commits/([0-9a-f]{4,40})/check-runs", rest)
        if method == "GET" and runs:
            listed = s.check_runs.get(runs.group(1), [])
            return 200, {"total_count": len(listed), "check_runs": listed}
        reviews = re.fullmatch(r"/pulls/(\d+)/reviews", rest)
        if method == "GET" and reviews and int(reviews.group(1)) in s.reviews:
            return 200, s.reviews[int(reviews.group(1))]
        if found and int(found.group(1)) in s.issues:
            number = int(found.group(1))
            if method == "GET" and not found.group(2):
                return 200, s.issues[number]
            if method == "GET":
                return 200, s.comments[number]
            if method == "POST" and found.group(2):
                return self._comment(number, payload)
        return self._missing()[0], self._missing()[2]

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


class _Handler(http.server.BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"

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
