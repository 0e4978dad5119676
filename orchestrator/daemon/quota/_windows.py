"""One account's window as teamctl knows it (docs/costs.md, "Quota windows"): the last report
a runtime made of it, the hold a refusal put on it, the member that probes a reset nobody
named — and the words ``status``, receipts and ``teamctl accounts`` show for each pause."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Account", "Held", "Key", "Pause", "Report", "held_text", "probe_text", "reserve_text",
           "until_text", "window_words"]

Key = tuple[str, str]  # (team, member)


@dataclass(frozen=True)
class Report:
    """The last thing a runtime said of the window: ``used`` 0-1 (None: not said)."""

    status: Literal["allowed", "warning", "rejected"]
    window: str | None
    used: float | None
    resets_at: float | None
    at: float
    by: Key

    def fresh(self, now: float) -> bool:
        """Whether it still speaks of the window now (its reset not passed)."""
        return self.resets_at is None or self.resets_at > now


@dataclass(frozen=True)
class Held:
    """A refused window: every member held until ``until``. ``named``: the runtime named that
    reset (then all resume at it); else ``until`` is teamctl's wait, after which one member
    probes (``probing``) and the others wait for its answer."""

    window: str | None
    until: float
    reason: str
    named: bool
    probing: bool
    held_at: float


@dataclass(frozen=True)
class Pause:
    """Why a member takes no new turn: its account's window is held (``window``), another
    member probes it (``probe``), or the window is past the reserve kept for the top priority
    (``reserve``: the operator's own messages still go)."""

    kind: Literal["window", "probe", "reserve"]
    text: str
    until: float | None


@dataclass(eq=False)
class Account:
    """An account: its members (by priority, highest first), its window, its hold."""

    name: str
    members: list[Key] = field(default_factory=list)
    report: Report | None = None
    held: Held | None = None
    probe: Key | None = None  # the member probing a reset nobody named
    passed: set[Key] = field(default_factory=set)  # probes given back: nothing to send
    reserve_noted: float | None = None  # the reset whose reserve pause was logged
    reserve_wake: float | None = None  # when its paused members are woken (one task waits)


def window_words(window: str | None) -> str:
    """``five_hour`` → ``five-hour window``; None → ``usage limit``."""
    return f"{window.replace('_', '-')} window" if window else "usage limit"


def until_text(until: float) -> str:
    return time.strftime("%H:%M", time.localtime(until))


def held_text(name: str, held: Held) -> str:
    if held.named:
        return f"held: {name} {window_words(held.window)} until {until_text(held.until)}"
    return (f"held: {name} {window_words(held.window)} until {until_text(held.until)} "
            "(no reset named: then one member tries it)")


def probe_text(name: str, held: Held, probe: Key | None) -> str:
    who = f"{probe[1]} tries it" if probe else "the first member with work tries it"
    return f"held: {name} {window_words(held.window)}: {who} first (its reset was not named)"


def reserve_text(name: str, report: Report, reserve: float, top: int) -> str:
    used = round((report.used or 0.0) * 100)
    until = f" until {until_text(report.resets_at)}" if report.resets_at else ""
    return (f"paused: {name} {window_words(report.window)} {used}% used, the last "
            f"{round(reserve * 100)}% kept for priority {top}{until}")
