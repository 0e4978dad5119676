"""A provider account's window for the fake CLIs (``FAKE_CLAUDE_WINDOW``,
``FAKE_CODEX_WINDOW``; fixtures/window.py): written, changed and read under its lock, and the
requests that reached it."""

from __future__ import annotations

import fcntl
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["edit_window", "requests", "statuses_after_refusal", "window"]


def window(path: Path, **settings: Any) -> Path:
    """A fresh window: ``limit``, ``warn``, ``reset_after``, ``window``, ``named``."""
    path.write_text(json.dumps(settings))
    return path


def edit_window(path: Path, **changes: Any) -> dict[str, Any]:
    """Change the window as the provider would (a larger allowance, a reset now), under the
    lock the fakes take; its state after the change."""
    with path.open("r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        state: dict[str, Any] = json.loads(handle.read() or "{}")
        state.update(changes)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(state))
    return state


def requests(path: Path) -> list[dict[str, Any]]:
    """Every request that reached the window, in order: ``at``, ``pid``, ``status``."""
    log = path.with_name(path.name + ".requests")
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def statuses_after_refusal(path: Path) -> list[str]:
    """The status of every request after the first refused one: a request sent while the
    window was spent is refused, so a second ``rejected`` is a request sent before the
    reset."""
    statuses = [r["status"] for r in requests(path)]
    assert "rejected" in statuses, statuses
    return statuses[statuses.index("rejected") + 1:]
