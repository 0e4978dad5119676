"""The terminal's progress lines (orchestrator/client/progress.py), in process: the redrawn
status line is wiped before a line that stays and at the end, nothing is written after the
end, a member's words are shown visibly, and nothing at all is written off a terminal."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from orchestrator.client.progress import LaunchProgress, Progress
from orchestrator.paths import Home


def test_the_status_line_is_redrawn_in_place_and_wiped_at_the_end() -> None:
    out = io.StringIO()
    progress = Progress(out)
    progress.status("waiting (1 s)")
    progress.status("waiting (2 s)")
    progress.line("teamctl: lead is ready")
    progress.status("waiting (3 s)")
    progress.stop()
    progress.line("after the end")
    assert out.getvalue() == ("waiting (1 s)\r\x1b[Kwaiting (2 s)\r\x1b[Kteamctl: lead is "
                              "ready\nwaiting (3 s)\r\x1b[K")


def test_a_members_words_reach_the_terminal_visibly_each_change_once() -> None:
    """A member's error in a launch line is data: its escape sequence is shown as a mark."""
    out = io.StringIO()
    watch = LaunchProgress(Home(Path("/nonexistent")), "web")
    member = {"name": "lead", "launch": "fatal", "readiness": "not_ready",
              "error": "boom \x1b]52;c;cm0gLXJm\x07"}
    watch.show(Progress(out), [member])
    watch.show(Progress(out), [member])
    assert out.getvalue().count("teamctl: lead did not start: boom ") == 1
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()


@pytest.mark.parametrize("quiet", [True, False])
def test_off_a_terminal_or_with_json_nothing_is_written(capsys: pytest.CaptureFixture[str],
                                                        quiet: bool) -> None:
    """stderr is not a terminal here (captured): ``on_terminal`` stays silent either way."""
    progress = Progress.on_terminal(quiet=quiet)
    progress.line("teamctl: lead is ready")
    progress.status("waiting")
    progress.stop()
    assert capsys.readouterr() == ("", "")
