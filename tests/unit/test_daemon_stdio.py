"""The daemon's stdout/stderr (``logs/daemon.out``) stay bounded, and a repeating standard-library
error (asyncio's EMFILE accept loop) is written once per window with a count (issue 25)."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

from orchestrator.daemon.stdio import RepeatFilter

REPO_ROOT = Path(__file__).resolve().parents[2]


def _record(message: str) -> logging.LogRecord:
    try:
        raise OSError(24, "Too many open files")
    except OSError:
        exc_info = sys.exc_info()
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, None, exc_info)


def test_a_repeating_error_is_written_once_per_window_with_its_count() -> None:
    """asyncio's "socket.accept() out of system resource" traceback, written on every retry,
    filled daemon.out. The promise: within a window one line (with its traceback) passes; the
    first one after the window says how many were held back."""
    now = [0.0]
    gate = RepeatFilter(window=60.0, clock=lambda: now[0])
    first = _record("socket.accept() out of system resource")
    assert gate.filter(first) and first.exc_info is not None
    held = [gate.filter(_record("socket.accept() out of system resource"))
            for _ in range(999)]
    assert not any(held)
    assert gate.filter(_record("another error")), "a different message is not held back"
    now[0] = 61.0
    later = _record("socket.accept() out of system resource")
    assert gate.filter(later)
    assert "repeated 999 more times" in str(later.msg) and later.exc_info is None


def test_daemon_out_stays_under_its_bound_whatever_the_daemon_prints(tmp_path: Path) -> None:
    """daemon.out was never rotated (214 MB in 90 s). The promise: while the daemon's fds 1
    and 2 are daemon.out, it is rotated once past its bound (at most twice the bound on disk),
    and the newest lines are kept."""
    out = tmp_path / "daemon.out"
    bound = 64 * 1024
    child = textwrap.dedent(f"""
        import logging, sys
        from pathlib import Path
        from orchestrator.daemon.stdio import bounded_stdio
        with bounded_stdio(Path({str(out)!r}), {bound}) as bounded:
            assert bounded is not None
            for i in range(3000):  # ~330 KB: rotated five times over
                print(f"line {{i}} " + "x" * 100)
                logging.getLogger("asyncio").error("socket.accept() out of system resource")
            sys.stderr.write("the last line\\n")
    """)
    with out.open("ab") as sink:
        done = subprocess.run([sys.executable, "-c", child], stdout=sink, stderr=sink,
                              cwd=REPO_ROOT, timeout=120, check=False)
    assert done.returncode == 0
    rotated = tmp_path / "daemon.out.1"
    assert out.stat().st_size <= bound and rotated.stat().st_size <= bound
    text = out.read_text()
    assert text.endswith("the last line\n") and "line 2999 " in text
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    everything = rotated.read_text() + text
    assert everything.count("out of system resource") <= 1, "written once in the window"
