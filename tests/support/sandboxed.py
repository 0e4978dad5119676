"""What the sandbox e2e tests share: a sandboxed member's settings, a message sent and waited
for with the real CLIs' generous bounds, and the one-line command that makes an escape attempt
(fixtures/escape.py) and prints its answer."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

REPO = Path(__file__).resolve().parents[2]
SANDBOXED = {"sandbox": "process", "permissions": "full"}


def send_waited(teamctl: Teamctl, member: str, text: str) -> str:
    done = teamctl.run("send", member, text, "--wait", "--timeout", "120", timeout=180)
    assert done.returncode == 0, done.stderr
    return done.stdout


def escape_command(step: str) -> str:
    """A command that makes one escape attempt (fixtures/escape.py) and prints its answer."""
    code = (f"import sys; sys.path.insert(0, {str(REPO / 'fixtures')!r}); import escape; "
            f"print(escape.attempt({step!r}))")
    return shlex.join([sys.executable, "-c", code])
