"""Effects once: a cut turn goes on where its runtime session still holds it.

A turn that reached the runtime (``sent``) and was cut — the daemon killed, the member's
process crashed, a budget hold, an interrupt — already did some of its work: files written,
commands run, teammates messaged. Handing the same message again as if it were new invites the
model to do all of it again. So when the member's process carries on the very session the cut
attempt was sent on (the same process, or one that resumed that session), the next attempt is
a short continuation prompt on that session instead: what was interrupted, why, and that what
was already done has taken effect, and the message's text as a reminder (a runtime may not
have written the cut turn to its session before it died: the real Claude CLI writes its
transcript asynchronously). Its attachments are not sent again when the turn reached the
runtime (they are in the session); they are when that is not known — a daemon that stopped
between writing the turn and journaling ``sent`` — or it did not.
Only when the session is gone (a fresh one, ``SessionLost``) is the message sent whole:
"at least once" is kept either way (docs/dev/architecture.md, "Effects once").
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from orchestrator.contracts import DocumentPart, ImagePart, TextPart, Turn

if TYPE_CHECKING:
    from collections.abc import Sequence

    from orchestrator.contracts import PreparedPart
    from orchestrator.daemon.queue import Delivery
    from orchestrator.ports import RuntimeProcess

__all__ = ["continuation", "continued_note", "continues"]

# why the last attempt was cut, as the model reads it (by the error code it left)
_WHY = {
    "daemon_restarted": "teamctl's daemon stopped",
    "runtime_exited": "your process exited",
    "runtime_stuck": "it printed nothing for too long and was interrupted",
    "budget_reached": "the budget was reached; it has been raised since",
    "rate_limited": "the account's rate limit was reached; it has reset since",
    "member_stopped": "you were stopped",
}


def continues(delivery: Delivery, process: RuntimeProcess,
              cut_on: RuntimeProcess | None) -> bool:
    """Whether ``process`` carries on the session an earlier attempt of ``delivery`` reached:
    the same session id, and either the very process that attempt was cut on (``cut_on``) or
    one that resumed that session when it started."""
    session = delivery.sent_session
    return session is not None and process.session_id == session and (
        cut_on is process or process.resumed)


def continued_note(delivery: Delivery) -> str:
    """What the message's history says of an answer given to a continuation: teamctl, not
    the operator, wrote the prompt the member answered (issue 45)."""
    return (f"teamctl: continued the cut turn ({_why(delivery)}) on the same session: the "
            "member was told what it did had taken effect, and given the message again as a "
            "reminder")


def _why(delivery: Delivery) -> str:
    code = delivery.error_code or ""
    return _WHY.get(code, f"it was cut: {code or 'unknown'}")


def continuation(delivery: Delivery, attached: Sequence[PreparedPart] = ()) -> Turn:
    """The turn that tells the member its previous turn on this message was interrupted;
    ``attached``: the message's attachments again (the parts after its text, each anchored
    where it was in the message's text, now inside the reminder), when the cut turn may not
    have reached the runtime."""
    text = (f"[teamctl] your previous turn on message {delivery.message_id} was interrupted "
            f"({_why(delivery)}) before you answered; what you already did has taken effect — "
            "check before repeating any step (a file written, a command run, a teammate "
            "messaged), then finish and answer it. The message, as a reminder (not a new "
            "request):\n\n"
            f"{delivery.text}")
    shift = len(text) - len(delivery.text)
    again = tuple(replace(part, anchor=part.anchor + shift)
                  if isinstance(part, ImagePart | DocumentPart) and part.anchor is not None
                  else part for part in attached)
    return Turn(delivery.message_id, (TextPart(text), *again), continues=True)
