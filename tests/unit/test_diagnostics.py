"""Diagnostics files: bounded by rotation, read back oldest first, formatted readably."""

from __future__ import annotations

import json
import stat
from typing import TYPE_CHECKING

from orchestrator.diagnostics import RotatingWriter, format_event, read_history, read_new

if TYPE_CHECKING:
    from pathlib import Path


def test_rotation_keeps_a_bounded_history_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "teamctl.jsonl"
    with RotatingWriter(path, max_bytes=200, backups=2) as writer:
        for n in range(40):
            writer.msg(json.dumps({"event": "e", "n": n}))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["teamctl.1.jsonl", "teamctl.2.jsonl", "teamctl.jsonl"]
    assert all(p.stat().st_size <= 200 + 30 for p in tmp_path.iterdir())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    events, offset = read_history(path)
    numbers = [e["n"] for e in events]
    assert numbers == sorted(numbers) and numbers[-1] == 39, "oldest first, nothing reordered"
    assert numbers[0] > 0, "the oldest beyond the backups were dropped"
    assert offset == path.stat().st_size


def test_read_new_skips_partial_and_corrupt_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"event": "a"}\nnot json\n{"event": "b"}\n{"event": "parti')
    events, offset = read_new(path, 0)
    assert [e["event"] for e in events] == ["a", "b"]
    path.write_text(path.read_text() + 'al"}\n')
    more, _ = read_new(path, offset)
    assert [e["event"] for e in more] == ["partial"]


def test_format_event_puts_the_known_fields_first() -> None:
    line = format_event({"ts": "2026-11-29T20:15:06.244123Z", "level": "warning",
                         "event": "member_exited", "zeta": 1, "member": "lead", "exit": -9})
    assert line.startswith("20:15:06.244 WARNING member_exited")
    assert line.index("member=lead") < line.index("exit=-9") < line.index("zeta=1")


def test_a_failing_log_write_drops_the_line_instead_of_raising(tmp_path: Path) -> None:
    writer = RotatingWriter(tmp_path / "teamctl.jsonl")
    writer.close()  # every later write fails, as on a full or vanished disk
    writer.msg('{"event": "lost"}')
    assert writer.dropped == 1


class _FlakyStream:
    """A log file on a disk that is full until ``full`` is cleared."""

    def __init__(self) -> None:
        self.full = True
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        if self.full:
            raise OSError(28, "No space left on device")
        self.lines.append(text)
        return len(text)

    def flush(self) -> None:
        if self.full:
            raise OSError(28, "No space left on device")

    def tell(self) -> int:
        return 0

    def close(self) -> None:
        pass


def test_dropped_log_lines_are_counted_and_reported_once_writing_works(tmp_path: Path) -> None:
    writer = RotatingWriter(tmp_path / "teamctl.jsonl")
    writer.close()
    flaky = _FlakyStream()
    writer._stream = flaky  # type: ignore[assignment]
    for n in range(5):
        writer.msg(json.dumps({"event": "lost", "n": n}))
    assert writer.dropped == 5 and not flaky.lines
    flaky.full = False
    writer.msg(json.dumps({"event": "kept"}))
    first, second = (json.loads(line) for line in flaky.lines)
    assert first["event"] == "log_lines_dropped" and first["count"] == 5
    assert first["level"] == "warning" and first["ts"].endswith("Z")
    assert second == {"event": "kept"}
    assert writer.dropped == 0 and writer.reported_drops == 5
    writer.msg(json.dumps({"event": "again"}))
    assert len(flaky.lines) == 3, "reported once"
