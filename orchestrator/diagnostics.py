"""Diagnostics: structlog → one redaction processor → JSON lines under ``TEAMCTL_HOME/logs``.

The daemon configures structlog once (``configure``); every event passes through
``redact_event`` before it is rendered. ``teamctl logs`` reads the same files back
(``read_new``, ``format_event``) and follows them with watchfiles (``follow``).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from orchestrator.redaction import redact_value

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, MutableMapping
    from pathlib import Path

__all__ = [
    "LOG_FILE_NAME",
    "configure",
    "configure_stderr",
    "follow",
    "format_event",
    "matches",
    "read_history",
    "read_new",
    "redact_event",
]

LOG_FILE_NAME = "teamctl.jsonl"
_FIELD_ORDER = ("team", "member", "message_id", "code", "pid", "exit", "state")


def redact_event(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """The structlog processor every event passes through (DESIGN §7)."""
    return redact_value(dict(event))


class RotatingWriter:
    """The structlog logger: one line per event, appended to ``teamctl.jsonl``; past
    ``max_bytes`` the file becomes ``teamctl.1.jsonl`` (… up to ``backups``) and a new one
    starts, so a daemon that runs for months keeps a bounded history."""

    def __init__(self, path: Path, *, max_bytes: int = 64 << 20, backups: int = 3) -> None:
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self.dropped = 0  # lines lost since the last write that worked
        self.reported_drops = 0
        self._stream = self._open()

    def _open(self) -> TextIO:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return os.fdopen(fd, "a", buffering=1, encoding="utf-8")

    def msg(self, message: str) -> None:
        """Write one event; a full or broken disk drops the line (counted in ``dropped``)
        rather than failing whatever was being logged — diagnostics never take a delivery or
        the daemon down. The first write that works again is preceded by a
        ``log_lines_dropped`` event with the count."""
        try:
            if self.dropped:
                self._stream.write(json.dumps({
                    "ts": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                    "level": "warning", "event": "log_lines_dropped",
                    "count": self.dropped}) + "\n")
                self._stream.flush()
                self.reported_drops += self.dropped
                self.dropped = 0
            self._stream.write(message + "\n")
            self._stream.flush()
            if self._stream.tell() > self.max_bytes:
                self._rotate()
        except (OSError, ValueError):
            self.dropped += 1

    log = debug = info = warn = warning = error = critical = exception = fatal = msg

    def _rotate(self) -> None:
        self._stream.close()
        for index in range(self.backups - 1, 0, -1):
            older = rotated(self.path, index)
            if older.exists():
                os.replace(older, rotated(self.path, index + 1))
        os.replace(self.path, rotated(self.path, 1))
        self._stream = self._open()

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> RotatingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rotated(path: Path, index: int) -> Path:
    return path.with_name(f"{path.stem}.{index}{path.suffix}")


def configure(logs_dir: Path, *, max_bytes: int = 64 << 20) -> RotatingWriter:
    """Send every structlog event, redacted, as one JSON line to ``logs_dir/teamctl.jsonl``."""
    import structlog

    writer = RotatingWriter(logs_dir / LOG_FILE_NAME, max_bytes=max_bytes)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            structlog.processors.format_exc_info,
            redact_event,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=lambda *args: writer,
        cache_logger_on_first_use=True,
    )
    return writer


def configure_stderr() -> None:
    """A CLI process's own events (``doctor --host`` runs the hosts' code here), redacted,
    as text on stderr: stdout is the command's output (a ``--json`` document), and
    structlog's default printer writes to stdout."""
    import sys

    import structlog

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            redact_event,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def read_history(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Every event still kept (rotated files oldest first, then the current one); the offset
    in the current file to follow from."""
    events: list[dict[str, Any]] = []
    for index in range(9, 0, -1):
        older = rotated(path, index)
        if older.exists():
            events += read_new(older, 0)[0]
    current, offset = read_new(path, 0)
    return events + current, offset


def read_new(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Complete JSON lines written after ``offset``; the offset to continue from."""
    try:
        with path.open("rb") as f:
            if os.fstat(f.fileno()).st_size < offset:
                offset = 0  # the file was replaced
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], 0
    end = data.rfind(b"\n") + 1
    events = []
    for line in data[:end].splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events, offset + end


def matches(event: dict[str, Any], *, team: str | None, member: str | None) -> bool:
    return (team is None or event.get("team") == team) and (
        member is None or event.get("member") == member
    )


def format_event(event: dict[str, Any]) -> str:
    """One readable line: time, level, event, then the known fields, then the rest."""
    ts = str(event.get("ts", ""))[11:23]
    level = str(event.get("level", "info")).upper()
    fields = [f"{k}={event[k]}" for k in _FIELD_ORDER if k in event]
    rest = sorted(k for k in event if k not in {"ts", "level", "event", *_FIELD_ORDER})
    fields += [f"{k}={_short(event[k])}" for k in rest]
    return f"{ts} {level:<7} {event.get('event', '?'):<24} {' '.join(fields)}".rstrip()


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 300 else text[:297] + "..."


def follow(path: Path, offset: int, stop: Callable[[], bool] | None = None
           ) -> Iterator[list[dict[str, Any]]]:
    """Yield batches of new events as the file grows (watchfiles; no polling loop)."""
    import watchfiles

    path.parent.mkdir(parents=True, exist_ok=True)
    for _changes in watchfiles.watch(path.parent, yield_on_timeout=True, rust_timeout=1000,
                                     debounce=50, step=20):
        events, offset = read_new(path, offset)
        if events:
            yield events
        if stop is not None and stop():
            return
