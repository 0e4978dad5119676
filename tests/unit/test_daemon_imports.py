"""What the daemon holds in memory before anyone asks for it."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_the_daemon_imports_no_web_stack_until_the_live_view_is_asked_for() -> None:
    """uvicorn, Starlette and the page's routes cost ~3-10 MiB of a daemon's ~60: they are
    imported on the first ``teamctl ui`` (LazyLiveView), not when the daemon starts."""
    probe = ("import sys; import orchestrator.daemon.main; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & "
             "{'uvicorn', 'starlette', 'h11', 'multipart', 'python_multipart'}))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout
