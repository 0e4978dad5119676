"""A real git repository for the worktree tests: ``git`` run with a fixed identity and no user
configuration, and ``project_repo``, a small project with ignored files a worktree copies."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


# the operator's git, minus the housekeeping it would start after a commit (``git maintenance
# run --auto``: one more process per commit, nothing to keep in a repository of a few commits)
_QUIET = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "maintenance.auto",
          "GIT_CONFIG_VALUE_0": "false", "GIT_CONFIG_KEY_1": "gc.auto", "GIT_CONFIG_VALUE_1": "0"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                          "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                          "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
                          "HOME": str(cwd), **_QUIET}).stdout


def project_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("the project\n")
    (path / ".gitignore").write_text(".env\nnode_modules/\n")
    (path / ".env").write_text("LOCAL=1\n")
    (path / "node_modules").mkdir()
    (path / "node_modules" / "big.js").write_text("x")
    (path / ".worktreeinclude").write_text(".env\nnode_modules/**\n")
    git(path, "add", "README.md", ".gitignore", ".worktreeinclude")
    git(path, "commit", "-q", "-m", "initial")
    return path
