"""The scripts tests write (tests/support/scripts.py) run wherever the checkout lives: a checkout
under ``~/teamctl test`` gave the interpreter a path with a space, and every fake that named it on
its ``#!`` line was "No such file or directory"."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support.scripts import python_script

if TYPE_CHECKING:
    from pathlib import Path

BODY = "import sys\nprint('ran', *sys.argv[1:])\n"


def _interpreter_at(directory: Path) -> str:
    """This interpreter, reached through ``directory`` (a checkout's awkward path)."""
    directory.mkdir(parents=True)
    python = directory / "python"
    python.symlink_to(sys.executable)
    return str(python)


@pytest.mark.parametrize("where", ["teamctl test/.venv/bin", "deep/" + "d" * 250 + "/bin"])
def test_a_fake_script_runs_from_a_checkout_with_a_space_or_a_long_path(
        tmp_path: Path, where: str) -> None:
    """A space in the path (a clone under ``~/teamctl test``) or a path past the kernel's
    ``#!`` limit: the script runs, with its arguments whole."""
    python = _interpreter_at(tmp_path / where)
    script = python_script(tmp_path / "fake", BODY, python=python)
    done = subprocess.run([str(script), "a b", "c"], capture_output=True, text=True, timeout=30,
                          check=False)
    assert (done.returncode, done.stdout) == (0, "ran a b c\n"), done.stderr


def test_a_bare_hash_bang_line_fails_where_the_interpreter_path_has_a_space(
        tmp_path: Path) -> None:
    """Why the helper exists: ``#!`` + the interpreter's path is cut at the space."""
    python = _interpreter_at(tmp_path / "teamctl test" / "bin")
    script = tmp_path / "bare"
    script.write_text(f"#!{python}\n{BODY}")
    script.chmod(0o700)
    with pytest.raises(FileNotFoundError):
        subprocess.run([str(script)], capture_output=True, timeout=30, check=False)
