"""What the merge queue tells (docs/land.md): the owner of a task that did not land — which
files conflict and how, or the integration check's command, exit and output's end — and what
to do; the task's lifetime events. Plain text, bounded by what it is given."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.daemon.land._git import Conflict
    from orchestrator.protocol.land import QueueEntryDoc

__all__ = ["conflict_note", "needs_you_text", "queued_note", "sent_back_text"]


def queued_note(entry: QueueEntryDoc, branch: str, committed: bool) -> str:
    left = " (teamctl committed what was left uncommitted, with the task's title)" \
        if committed else ""
    return (f"queued to land on {branch}: {entry.owner}'s {entry.source} at "
            f"{entry.commit[:12]}{left}; entry {entry.id}, attempt {entry.attempt}")


def conflict_note(conflict: Conflict, branch: str, onto: str) -> str:
    """The conflict as the task's event and the owner's message say it."""
    if not conflict.files:
        return (f"git could not bring it onto {branch} ({onto[:12]}): "
                f"{conflict.message or 'no reason given'}")
    more = f" and {len(conflict.files) - 20} more" if len(conflict.files) > 20 else ""
    return (f"merging onto {branch} ({onto[:12]}) conflicts in "
            f"{', '.join(conflict.files[:20])}{more}:\n{conflict.hunks}")


def sent_back_text(entry: QueueEntryDoc, branch: str, note: str, retries: int) -> str:
    """The owner's message: what failed, how to fix it, and how many attempts are left."""
    left = retries - entry.attempt
    return (f"teamctl: task T{entry.task} ({entry.title}) did not land on {branch}: {note}\n\n"
            f"It is yours again (in progress). In your worktree, bring {branch} into your "
            f"branch (git merge {branch}), fix what failed, commit, then call "
            f"task_complete(id={entry.task}, summary=...) again. "
            f"{left} more attempt{'s' if left != 1 else ''} before it goes to the operator.")


def needs_you_text(entry: QueueEntryDoc, branch: str, note: str) -> str:
    return (f"T{entry.task} ({entry.title}) by {entry.owner} could not land on {branch} "
            f"after {entry.attempt} attempt{'s' if entry.attempt != 1 else ''}: {note}")
