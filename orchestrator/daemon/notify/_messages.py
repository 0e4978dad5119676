"""What a team's notifications say (docs/notify.md): an item's ntfy message with its signed
Approve / Deny buttons, the digest of what the rate limit held back, and the live view's link
for the alert channels. Pure composition: ``TeamNotifier`` decides what is sent and when.
A phone shows text as it comes, bidi controls included: every title and body is shown visibly
(orchestrator/visible.py), as on the terminal and the page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.daemon.notify._needs_you import NeedsYou
from orchestrator.redaction import redact
from orchestrator.visible import visible, visible_line

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.daemon.notify._ntfy import Ntfy
    from orchestrator.daemon.notify._tokens import Signer
    from orchestrator.notify_config import NotifySection

__all__ = ["Channel", "Composer"]

_TAGS = {"approval": "lock", "question": "question", "fatal": "rotating_light",
         "budget": "moneybag", "review": "mag", "integrate": "construction",
         "quota": "hourglass", "digest": "inbox_tray"}
_LABELS = {"approve": "Approve", "deny": "Deny", "answer": "Answer"}


@dataclass(frozen=True)
class Channel:
    """A team's ntfy: the server, where items go, where the buttons post, the key."""

    ntfy: Ntfy
    topic: str
    response_topic: str
    signer: Signer


class Composer:
    """One team's messages, as its ``[notify]`` section and channel say."""

    def __init__(self, team: str, section: NotifySection, channel: Channel | None,
                 clock: Callable[[], float]) -> None:
        self.team, self.section, self.channel = team, section, channel
        self._clock = clock

    def message(self, item: NeedsYou, quiet: bool) -> dict[str, Any]:
        body = item.detail
        if item.private and self.section.include_text:
            body += f"\n{item.private}"
        elif item.private:
            body += "\n(its text is not sent: include_text = false)"
        body = redact(body)  # the token after it is the daemon's own (the redactor would
        if "answer" in item.decisions and self.channel is not None:  # cut its base64)
            token = self.sign(item.item, "answer")
            body += f"\nTo answer, post to the response topic: {token} YOUR ANSWER"
        message = {"title": visible_line(redact(f"teamctl {self.team}: {item.title}")),
                   "message": visible(body),
                   "tags": [_TAGS[item.kind]],
                   "priority": 1 if quiet else (4 if item.decisions else 3),
                   "actions": self._actions(item)}
        if self.section.live_view_url:
            message["click"] = self.section.live_view_url
        return message

    def digest(self, items: list[NeedsYou], quiet: bool) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for item in items:
            counts[item.kind] = counts.get(item.kind, 0) + 1
        what = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        message = {"title": f"teamctl {self.team}: {len(items)} more need you",
                   "message": f"{what}. Over {self.section.max_per_minute} a minute: see "
                              "'teamctl approvals' or the live view",
                   "tags": [_TAGS["digest"]], "priority": 1 if quiet else 3,
                   "actions": self._actions(NeedsYou("", "approval", self.team, "", ""))}
        if self.section.live_view_url:
            message["click"] = self.section.live_view_url
        return message

    def link(self, body: str) -> str:
        link = self.section.live_view_url or "'teamctl ui --open'"
        return f"{body}\nThe live view: {link}"

    def sign(self, item: str, decision: Any) -> str:
        assert self.channel is not None
        return self.channel.signer.sign(item, decision, self._clock() + self.section.action_ttl)

    def _actions(self, item: NeedsYou) -> list[dict[str, Any]]:
        actions: list[dict[str, Any]] = []
        if self.channel is not None:
            url = self.channel.ntfy.topic_url(self.channel.response_topic)
            actions = [{"action": "http", "label": _LABELS[d], "url": url, "method": "POST",
                        "body": self.sign(item.item, d), "clear": True}
                       for d in item.decisions if d != "answer"]
        if self.section.live_view_url:
            actions.append({"action": "view", "label": "Open",
                            "url": self.section.live_view_url})
        return actions[:3]  # ntfy shows at most three
