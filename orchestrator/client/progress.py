"""What a long wait is doing, on a terminal: ``launch`` says who is starting and who is
ready, ``send --wait`` since when it waits for whose reply (issue 45: both sat silent for up
to minutes).

Only on a terminal: progress goes to stderr when stderr is one and the command prints no
``--json`` — piped, redirected or read by a program, a command prints exactly what it printed
before. A follower thread reads the daemon's change feed (a long poll: nothing is asked while
nothing changes, and once a second at most) and the status it needs; the command's own call
runs as before in the main thread, and ``stop`` ends the follower's output before the
command prints its result. Whatever a member wrote is shown visibly (orchestrator/visible.py).
Standard library and the socket client only.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from orchestrator import client, protocol
from orchestrator.errors import TeamctlError
from orchestrator.visible import visible_line

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from orchestrator.paths import Home

__all__ = ["LaunchProgress", "Progress", "reply_progress"]

TICK = 1.0  # seconds between two redraws of a waiting line (the change feed's long poll)
_LEAST_INTERVAL = 0.25  # seconds between two reads of the status, however busy the team
_RETRY_DELAY = 0.5  # the daemon did not answer the follower: try again after this
_CALL_TIMEOUT = 5.0


class Progress:
    """Lines and one redrawn status line on ``out``; nothing at all when ``out`` is None."""

    def __init__(self, out: TextIO | None) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._drawn = False  # a status line is on the screen, without its newline

    @classmethod
    def on_terminal(cls, *, quiet: bool = False) -> Progress:
        """Shown on stderr when it is a terminal (and not ``quiet``: ``--json``)."""
        quiet = quiet or not sys.stderr.isatty()
        return cls(None if quiet else sys.stderr)

    def line(self, text: str) -> None:
        """A line that stays (``teamctl: lead is ready``)."""
        self._write(visible_line(text) + "\n")

    def status(self, text: str) -> None:
        """The one line redrawn in place (``waiting for lead's reply since …``), cut to the
        terminal's width so that ``\\r`` reaches its start."""
        width = shutil.get_terminal_size((80, 24)).columns - 1
        self._write(visible_line(text)[:width], drawn=True)

    def _write(self, text: str, *, drawn: bool = False) -> None:
        with self._lock:
            if self._out is None or self._stopped.is_set():
                return
            self._out.write(("\r\x1b[K" if self._drawn else "") + text)
            self._out.flush()
            self._drawn = drawn

    def run(self, follow: Callable[[Progress, threading.Event], None]) -> Progress:
        """Start ``follow`` in a thread of its own (none when nothing is shown)."""
        if self._out is not None:
            threading.Thread(target=follow, args=(self, self._stopped), daemon=True,
                             name="progress follower").start()
        return self

    def stop(self) -> None:
        """No more output; the status line is wiped, so the result prints on a clean line."""
        with self._lock:
            self._stopped.set()
            if self._out is not None and self._drawn:
                self._out.write("\r\x1b[K")
                self._out.flush()
            self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _changes(home: Home, stopped: threading.Event) -> Iterator[int]:
    """Each version of the daemon's change feed, at most ``TICK`` apart and at least
    ``_LEAST_INTERVAL`` (a busy team changes many times a second: the status is read at most
    a few times), until stopped."""
    version = 0
    while not stopped.is_set():
        read_at = time.monotonic()
        yield version
        if stopped.wait(max(0.0, read_at + _LEAST_INTERVAL - time.monotonic())):
            return
        try:
            version = client.call(home, protocol.CHANGES, {"after": version, "wait": TICK},
                                  timeout=TICK + _CALL_TIMEOUT)["version"]
        except TeamctlError:
            stopped.wait(_RETRY_DELAY)


def _members(home: Home, team: str | None) -> list[tuple[str, dict[str, Any]]]:
    """(team, member) of the running teams (``team``'s only); none while it is not there."""
    try:
        doc = client.call(home, protocol.STATUS, {"team": team}, timeout=_CALL_TIMEOUT)
    except TeamctlError:
        return []
    return [(t["name"], m) for t in doc["teams"] for m in t["members"]]


class LaunchProgress:
    """Who is starting, who is ready (and how long it took), who failed and why: each
    member's change said once, from the follower and — when the launch returns — from the
    members it answered with (the follower may not have seen the last change yet)."""

    def __init__(self, home: Home, team: str) -> None:
        self._home, self._team = home, team
        self._started = time.monotonic()
        self._said: dict[str, str] = {}
        self._lock = threading.Lock()

    def follow(self, progress: Progress, stopped: threading.Event) -> None:
        for _ in _changes(self._home, stopped):
            self.show(progress, [m for _t, m in _members(self._home, self._team)])

    def show(self, progress: Progress, members: list[dict[str, Any]]) -> None:
        with self._lock:
            for member in members:
                what = _launch_state(member)
                if what is None or self._said.get(member["name"]) == what:
                    continue
                self._said[member["name"]] = what
                took = f" ({time.monotonic() - self._started:.1f} s)" if what == "ready" \
                    else ""
                progress.line(f"teamctl: {member['name']} {_LAUNCH_SAID[what]}{took}"
                              + _why(member, what))


_LAUNCH_SAID = {"starting": "is starting", "ready": "is ready", "backoff": "failed to start, "
                "trying again", "fatal": "did not start", "stopped": "stopped",
                "asleep": "is asleep", "waiting": "is"}


def _launch_state(member: dict[str, Any]) -> str | None:
    if member["launch"] in ("backoff", "fatal", "stopped", "asleep", "waiting"):
        return str(member["launch"])
    if member["readiness"] in ("ready", "busy"):
        return "ready"
    return "starting" if member["launch"] in ("pending", "starting", "running") else None


def _why(member: dict[str, Any], what: str) -> str:
    if what in ("backoff", "fatal") and member.get("error"):
        return f": {member['error']}"
    if what == "asleep" and member.get("note"):  # past max_running: not started
        return f" ({str(member['note']).removeprefix('asleep: ')})"
    if what == "waiting":  # "teamctl: dev is waiting for memory (needs ~…; …)"
        return f" {member.get('waiting') or 'waiting for memory'}"
    return ""


def reply_progress(home: Home, team: str | None, member: str
                   ) -> Callable[[Progress, threading.Event], None]:
    """``waiting for lead's reply since 14:02:11 (12 s; lead busy, 2 more in its queue)``,
    redrawn (its queue counts every message not answered yet: this one too)."""
    since_wall, since = time.localtime(), time.monotonic()

    def follow(progress: Progress, stopped: threading.Event) -> None:
        for _ in _changes(home, stopped):
            found = [m for _t, m in _members(home, team) if m["name"] == member][:1]
            state = ""
            if found:
                more = (found[0].get("queued") or 1) - 1
                state = f"; {member} {found[0]['readiness']}" + (
                    f", {more} more in its queue" if more > 0 else "")
            progress.status(f"teamctl: waiting for {member}'s reply since "
                            f"{time.strftime('%H:%M:%S', since_wall)} "
                            f"({time.monotonic() - since:.0f} s{state})")
    return follow
