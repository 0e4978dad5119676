"""What the pull requests say (docs/forge.md): the pull request's title and body on GitHub
(the task's title and summary, redacted, and ``Closes #N``), and what the task's owner is
told of a failing check or a change request — the check's name, conclusion, summary and the
output text GitHub gives, or the review's comments with their file and line. A check's output
and a review's words are anyone's: every character that acts on a terminal is shown as its
mark (``orchestrator.visible``), each text is cut to a bound with what was cut said, and the
owner reads them as data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.redaction import redact
from orchestrator.visible import visible, visible_line

if TYPE_CHECKING:
    from orchestrator.daemon.forge._pull_journal import PullRow
    from orchestrator.forge.protocol import Check, Pull, Review, ReviewComment
    from orchestrator.protocol.board import TaskDoc

__all__ = ["OUTPUT_CHARS", "check_text", "needs_you_text", "pull_body", "pull_title",
           "review_text"]

OUTPUT_CHARS = 8000  # of a check's output text told to the owner
_SUMMARY_CHARS = 2000
_COMMENT_CHARS = 2000
_COMMENTS = 50  # a review's comments told, at most
_BODY_CHARS = 60_000  # GitHub takes 65536 in a pull request's body


def _cut(text: str, limit: int) -> str:
    text = visible(text.replace("\r\n", "\n"))
    return text if len(text) <= limit else (
        f"{text[:limit]}\n… {len(text) - limit} more characters (see it on GitHub)")


def pull_title(task: TaskDoc) -> str:
    return task.title[:256]


def pull_body(task: TaskDoc, issue: int | None) -> str:
    """The task's summary (secrets redacted, cut to fit), who did it, and the issue it
    closes."""
    summary = redact(task.summary or "").strip() or "(no summary)"
    if len(summary) > _BODY_CHARS:
        summary = summary[:_BODY_CHARS] + f"\n\n… {len(summary) - _BODY_CHARS} more characters"
    closes = f"\n\nIssue #{issue}. Closes #{issue}" if issue is not None else ""
    return (f"{summary}\n\n---\nteamctl task T{task.id} of team {task.team}"
            f"{', by ' + task.owner if task.owner else ''}.{closes}\n")


def check_text(row: PullRow, pull: Pull, check: Check) -> str:
    """The owner's message of one failing check."""
    kind = "check" if check.kind == "check" else "status"
    parts = [f"teamctl: the {kind} {visible_line(check.name)[:200]!r} failed "
             f"({visible_line(check.conclusion)[:50]}) on pull request #{pull.number} of task "
             f"T{row.task} ({pull.url}), head {pull.head_sha[:12]}."]
    if check.title:
        parts.append(f"Title: {visible_line(check.title)[:300]}")
    if check.summary:
        parts.append(f"Summary:\n{_cut(check.summary, _SUMMARY_CHARS)}")
    if check.text:
        parts.append(f"Output:\n{_cut(check.text, OUTPUT_CHARS)}")
    if check.url:
        parts.append(f"Details: {visible_line(check.url)[:500]}")
    parts.append(_fix(row))
    return "\n\n".join(parts)


def review_text(row: PullRow, pull: Pull, review: Review,
                comments: list[ReviewComment]) -> str:
    """The owner's message of one change request: the review's words and each comment with
    its file and line."""
    parts = [f"teamctl: {visible_line(review.user)[:64] or 'a reviewer'} requested changes on "
             f"pull request #{pull.number} of task T{row.task} ({pull.url})."]
    if review.body.strip():
        parts.append(_cut(review.body, _COMMENT_CHARS))
    for comment in comments[:_COMMENTS]:
        where = visible_line(comment.path)[:300] + (
            f":{comment.line}" if comment.line is not None else "")
        parts.append(f"{where}:\n{_cut(comment.body, _COMMENT_CHARS)}")
    if len(comments) > _COMMENTS:
        parts.append(f"… {len(comments) - _COMMENTS} more comments on GitHub")
    parts.append(_fix(row))
    return "\n\n".join(parts)


def _fix(row: PullRow) -> str:
    return (f"It is yours again (in progress). Fix it in your worktree, commit, then call "
            f"task_complete(id={row.task}, summary=...) again: teamctl pushes your work to "
            f"the same pull request (branch {row.branch}).")


def needs_you_text(row: PullRow, failed: int, retries: int) -> str:
    return (f"pull request #{row.number} of T{row.task} failed CI on {failed} heads "
            f"(ci_retries = {retries}): look at {row.url}; 'teamctl task assign T{row.task} "
            f"MEMBER' sends it back, 'teamctl task cancel T{row.task}' drops it")
