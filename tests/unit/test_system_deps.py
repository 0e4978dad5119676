"""What the suite needs of the machine: `make test` runs on Python, git and what
.ci/system-deps installs for it (bubblewrap, the OpenSSH client — tests/conftest.py installs
them as root); a real sshd, a browser and an X server are `make e2e`'s. On a machine without
openssh-server `make test` exited 2 (five errors of tests/integration/test_sandbox_ssh.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from tests.support.driver import REPO, SYSTEM_DEPS
from tests.support.import_graph import names_imported

if TYPE_CHECKING:
    from pathlib import Path

# what only `make e2e` may start: a system sshd and its users, an X server, a browser
E2E_ONLY = {"tests.support.sshd", "tests.support.xserver", "selenium"}


def _missing(path: str, *runs: str) -> list[str]:
    done = subprocess.run(["bash", str(SYSTEM_DEPS), "--missing", *runs], capture_output=True,
                          text=True, timeout=60, check=True, env={**os.environ, "PATH": path})
    return done.stdout.split()


def _bin_with(tmp_path: Path, **programs: str) -> str:
    directory = tmp_path / "bin"
    directory.mkdir()
    for name, target in programs.items():
        (directory / name).symlink_to(target)
    return str(directory)


def test_make_test_needs_bubblewrap_the_ssh_client_and_openssl_beyond_python_and_git(
        tmp_path: Path) -> None:
    """A machine with Python and git only: the test run asks for bubblewrap, the OpenSSH
    client and openssl (a TLS test collector's certificate), nothing that starts a service;
    the e2e run asks for node, Chromium and Xvfb too."""
    found = {name: shutil.which(name) for name in ("bash", "git")}
    assert all(found.values()), found
    path = _bin_with(tmp_path, python3=sys.executable, **found)  # type: ignore[arg-type]
    assert _missing(path, "test") == ["bubblewrap", "openssh-client", "openssl"]
    e2e = _missing(path, "e2e")
    assert {"nodejs", "chromium", "xvfb", "xclip"} <= set(e2e), e2e
    assert _missing(os.environ["PATH"], "test") == [], "this machine has what make test runs"


def _imports(path: Path) -> set[str]:
    return {name for name, _line in names_imported(path)}


def test_no_test_outside_e2e_starts_an_sshd_an_x_server_or_a_browser() -> None:
    """``make test`` runs every layer but e2e: none of its modules may need a program only
    ``make e2e`` installs (the sandbox-over-SSH tests imported tests/support/sshd.py)."""
    tests = REPO / "tests"
    wrong = {str(path.relative_to(REPO)): sorted(found)
             for path in sorted(tests.rglob("test_*.py"))
             if "e2e" not in path.relative_to(tests).parts[:1]
             and (found := _imports(path) & E2E_ONLY)}
    assert wrong == {}
