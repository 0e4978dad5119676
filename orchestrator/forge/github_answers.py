"""GitHub's answers read into the forge's values (docs/forge.md): a pull request, a check run
or commit status, a review and its comments — each field read as GitHub's OpenAPI
description types it, and an answer without one a ``forge_bad_answer`` (never a KeyError
past the client)."""

from __future__ import annotations

from typing import Any

from orchestrator.errors import ForgeError
from orchestrator.forge.protocol import Check, Pull, Review, ReviewComment

__all__ = ["check_run", "commit_status", "pull", "review", "review_comment"]

_PASSED = ("success", "neutral", "skipped")


def _bad(what: str, exc: Exception) -> ForgeError:
    return ForgeError("forge_bad_answer", f"GitHub answered {what} without {exc}; is [forge] "
                      "github.api GitHub's REST API?")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def pull(data: Any) -> Pull:
    try:
        head = data["head"]
        return Pull(id=int(data["id"]), node_id=str(data["node_id"]),
                    number=int(data["number"]), url=str(data["html_url"]),
                    head_sha=str(head["sha"]),
                    state=str(data["state"]), merged=data.get("merged") is True,
                    draft=data.get("draft") is True,
                    mergeable=data.get("mergeable") if isinstance(data.get("mergeable"), bool)
                    else None)
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad("a pull request", exc) from None


def check_run(data: Any) -> Check:
    try:
        output = data.get("output") or {}
        conclusion = _text(data.get("conclusion"))
        state = ("pending" if data["status"] != "completed" else
                 "success" if conclusion in _PASSED else "failure")
        return Check(kind="check", id=int(data["id"]), name=str(data["name"]), state=state,
                     conclusion=conclusion or _text(data["status"]),
                     title=_text(output.get("title")), summary=_text(output.get("summary")),
                     text=_text(output.get("text")), url=_text(data.get("html_url")))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _bad("a check run", exc) from None


def commit_status(data: Any) -> Check:
    try:
        said = str(data["state"])
        state = {"success": "success", "pending": "pending"}.get(said, "failure")
        return Check(kind="status", id=int(data["id"]), name=str(data["context"]),
                     state=state, conclusion=said, title="",
                     summary=_text(data.get("description")), text="",
                     url=_text(data.get("target_url")))
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad("a commit status", exc) from None


def review(data: Any) -> Review:
    try:
        user = data.get("user") or {}
        return Review(id=int(data["id"]), state=str(data["state"]), body=_text(data.get("body")),
                      user=_text(user.get("login")), commit=data.get("commit_id"),
                      url=_text(data.get("html_url")))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _bad("a review", exc) from None


def review_comment(data: Any) -> ReviewComment:
    try:
        line = data.get("line") if data.get("line") is not None else data.get("original_line")
        return ReviewComment(id=int(data["id"]), path=str(data["path"]),
                             line=int(line) if line is not None else None,
                             body=_text(data.get("body")))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _bad("a review comment", exc) from None
