"""The fake GitHub's answers (tests/support/fake_github.py) against GitHub's published
OpenAPI description — the excerpt kept with its provenance in
tests/data/github/openapi_excerpt.json — so the client is tested against GitHub's shapes,
not the fake's own idea of them."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support.fake_github import FakeGitHub

_EXCERPT = Path(__file__).parent.parent / "data" / "github" / "openapi_excerpt.json"
_TOKEN = "ghp_fake-token-0001"


def _schema(name: str) -> dict[str, Any]:
    doc = json.loads(_EXCERPT.read_text(encoding="utf-8"))
    return {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}


def _get(fake: FakeGitHub, path: str, method: str = "GET", body: Any = None,
         token: str = _TOKEN) -> tuple[int, Any]:
    request = urllib.request.Request(
        fake.url + path, method=method, headers={"Authorization": f"Bearer {token}"},
        data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_the_excerpt_says_where_it_comes_from() -> None:
    doc = json.loads(_EXCERPT.read_text(encoding="utf-8"))
    assert "github/rest-api-description" in doc["provenance"]["source"]
    for name in ("issue", "label", "issue-comment", "simple-user", "validation-error",
                 "check-run", "pull-request-review", "pull-request", "review-comment",
                 "combined-commit-status", "pull-request-merge-result"):
        jsonschema.Draft202012Validator.check_schema(doc["components"]["schemas"][name])


@pytest.mark.parametrize("body", ["", None, "<script>x</script>\x1b[31m" + "x" * 100_000])
def test_the_fakes_issues_labels_and_comments_match_githubs_schemas(body: str | None) -> None:
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_label("teamctl")
        fake.add_issue("a title", body=body, labels=("teamctl",))
        checks = [("/repos/octo-org/web/issues/1", "GET", None, 200, "issue", False),
                  ("/repos/octo-org/web/issues?labels=teamctl", "GET", None, 200, "issue", True),
                  ("/repos/octo-org/web/labels", "GET", None, 200, "label", True),
                  ("/repos/octo-org/web/issues/1/comments", "POST", {"body": "hi"}, 201,
                   "issue-comment", False),
                  ("/repos/octo-org/web/issues/1/comments", "GET", None, 200,
                   "issue-comment", True),
                  ("/repos/octo-org/web/issues/1/comments", "POST", {"body": ""}, 422,
                   "validation-error", False),
                  ("/repos/octo-org/web/issues/9", "GET", None, 404, "basic-error", False),
                  ("/repos/octo-org/web", "GET", None, 200, "full-repository", False)]
        for path, method, payload, status, name, many in checks:
            got, data = _get(fake, path, method, payload)
            assert got == status, path
            items = data if many else [data]
            assert items, path
            for item in items:
                jsonschema.validate(item, _schema(name))
        status, data = _get(fake, "/repos/octo-org/web", token="wrong")
        assert status == 401
        jsonschema.validate(data, _schema("basic-error"))


def test_the_fakes_check_runs_and_reviews_match_githubs_schemas() -> None:
    sha = "3dca65fa3e8d4b3da3f3d056c59aee1c50f41390"
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_check_run(sha, "test", "failure", summary="2 failed", text="E   assert 1 == 2")
        fake.add_check_run(sha, "lint", None)
        fake.add_review(7, "CHANGES_REQUESTED", "see the two comments")
        status, runs = _get(fake, f"/repos/octo-org/web/commits/{sha}/check-runs")
        assert status == 200 and runs["total_count"] == 2
        jsonschema.validate(runs, _schema("check-run-list"))
        status, reviews = _get(fake, "/repos/octo-org/web/pulls/7/reviews")
        assert status == 200 and [r["state"] for r in reviews] == ["CHANGES_REQUESTED"]
        for review in reviews:
            jsonschema.validate(review, _schema("pull-request-review"))
    runs["check_runs"][0]["conclusion"] = "exploded"  # not one of GitHub's conclusions
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(runs, _schema("check-run-list"))


def test_a_fake_answer_off_the_schema_is_caught() -> None:
    with FakeGitHub(token=_TOKEN) as fake:
        fake.add_issue("a title")
        _, issue = _get(fake, "/repos/octo-org/web/issues/1")
    del issue["node_id"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(issue, _schema("issue"))


def test_the_fakes_pull_requests_statuses_and_review_comments_match_githubs_schemas(
        tmp_path: Path) -> None:
    """A pull request opened from a branch of the bare remote, read, marked ready and merged;
    a commit's combined status; a review's comments — each answer against GitHub's schema;
    the merge closes the issue the body closes."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    subprocess.run(["git", "-C", str(work), "push", "-q", str(remote), "HEAD:refs/heads/b"],
                   check=True)
    with FakeGitHub(token=_TOKEN, remote=remote) as fake:
        fake.add_issue("fix it")
        status, pull = _get(fake, "/repos/octo-org/web/pulls", "POST",
                            {"title": "T1", "body": "Closes #1", "head": "b", "base": "main",
                             "draft": True})
        assert status == 201 and pull["draft"] is True
        jsonschema.validate(pull, _schema("pull-request"))
        number, sha = pull["number"], pull["head"]["sha"]
        status, again = _get(fake, "/repos/octo-org/web/pulls", "POST",
                             {"title": "T1", "head": "b", "base": "main"})
        assert status == 422
        jsonschema.validate(again, _schema("validation-error"))
        fake.add_status(sha, "ci/build", "failure", "2 tests failed")
        review = fake.add_review(number, "CHANGES_REQUESTED", "two things")
        fake.add_review_comment(number, review["id"], "a.py", 3, "this breaks")
        checks = [(f"/repos/octo-org/web/pulls/{number}", "pull-request", False),
                  (f"/repos/octo-org/web/commits/{sha}/status", "combined-commit-status", False),
                  (f"/repos/octo-org/web/pulls/{number}/reviews/{review['id']}/comments",
                   "review-comment", True),
                  ("/repos/octo-org/web/pulls?head=octo-org:b&state=all", "pull-request", True)]
        for path, name, many in checks:
            status, data = _get(fake, path)
            assert status == 200, path
            for item in data if many else [data]:
                jsonschema.validate(item, _schema(name))
        status, _ = _get(fake, f"/repos/octo-org/web/pulls/{number}/merge", "PUT",
                               {"sha": sha})
        assert status == 405  # a draft is never merged
        _get(fake, "/graphql", "POST", {"query": "mutation { markPullRequestReadyForReview }",
                                        "variables": {"id": pull["node_id"]}})
        status, merged = _get(fake, f"/repos/octo-org/web/pulls/{number}/merge", "PUT",
                              {"sha": sha})
        assert status == 200
        jsonschema.validate(merged, _schema("pull-request-merge-result"))
        _, issue = _get(fake, "/repos/octo-org/web/issues/1")
    assert issue["state"] == "closed"
