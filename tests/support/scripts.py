"""Executable scripts a test writes (a fake ``ssh``, a fake clipboard reader, a fake browser),
run by this interpreter wherever the checkout lives.

A ``#!`` line cannot name every path: Linux splits it at the first space and cuts it at 255
bytes, so a checkout under ``~/teamctl test`` made every ``#!/…/teamctl test/.venv/bin/python``
fake "No such file or directory". The first line here is ``#!/bin/sh``; the second is both a
shell ``exec`` of the interpreter, quoted, and a Python string the script then ignores (the
lines pip writes at the top of a console script for the same reason). Every fake takes this one
path, so a test behaves the same from any checkout, not only from one with an awkward path."""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["python_script", "shebang"]


def shebang(python: str = sys.executable) -> str:
    """The first two lines of a Python script that ``python`` runs, whatever its path holds."""
    return f"#!/bin/sh\n'''exec' {shlex.quote(python)} \"$0\" \"$@\"\n' '''\n"


def python_script(path: Path, body: str, *, python: str = sys.executable,
                  mode: int = 0o700) -> Path:
    """``path``: an executable script of ``body`` (Python), run by ``python``."""
    path.write_text(shebang(python) + body + ("" if body.endswith("\n") else "\n"))
    path.chmod(mode)
    return path
