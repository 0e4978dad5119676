"""Hardened git (orchestrator/git_run.py) against the real git 2.39: each thing a member can plant
so that git runs a program is planted in a worktree's repository; the operator's plain git
runs it (the plant is live), ``Git`` at the worktree's recorded place does not. Then the
bounds: a driver name git's ``-c`` would split, a deadline that kills the whole process
group, and the read-only, network-less view runtimes/hosts/sandbox/git_view.py confines it in."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from orchestrator.errors import GitFailed
from orchestrator.git_run import Git, GitPlace, driver_overrides, execute
from runtimes.hosts.sandbox.git_view import GitViewSandbox
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from pathlib import Path

_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@x"}


class Repo:
    """A repository with one linked worktree (``tree``, dirty: a tracked file edited to the
    same size, so git must read it through its filter to know) and a directory for
    canaries."""

    def __init__(self, root: Path) -> None:
        self.main, self.tree, self.out = root / "repo", root / "tree", root / "out"
        self.out.mkdir()
        self.main.mkdir()
        self.plain(self.main, "init", "-q", "-b", "main")
        (self.main / "app.txt").write_text("one\n")
        self.plain(self.main, "add", "app.txt")
        self.plain(self.main, "commit", "-q", "-m", "initial")
        self.plain(self.main, "worktree", "add", "-q", "-b", "work", str(self.tree))
        self.common = self.main / ".git"
        self.admin = self.common / "worktrees" / "tree"
        (self.tree / "app.txt").write_text("uno\n")
        os.utime(self.tree / "app.txt", (1, 1))
        (self.tree / ".gitattributes").write_text("app.txt filter=x diff=x\n")

    def program(self, tag: str) -> str:
        return f"touch {self.out}/{tag}; cat"

    def plain(self, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """The operator's own git, as it is: nothing turned off."""
        return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                              timeout=60, check=False, env={
                                  "PATH": os.environ["PATH"], "HOME": str(self.out),
                                  **_IDENTITY})

    def hardened(self) -> Git:
        return Git(GitPlace(self.admin, self.common, self.tree))

    def fired(self) -> set[str]:
        return {p.name for p in self.out.iterdir()}


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


# (what is planted, ``git config`` arguments in the worktree, the command that would run it)
PLANTS = [
    ("core.fsmonitor", ["core.fsmonitor", "{fsmonitor}"], ["status", "--porcelain"]),
    ("a clean filter", ["filter.x.clean", "{clean}"], ["status", "--porcelain"]),
    ("a long-running filter", ["filter.x.process", "{process}"], ["status", "--porcelain"]),
    ("an external diff", ["diff.external", "{external}"], ["diff"]),
    ("a diff driver's command", ["diff.x.command", "{command}"], ["diff"]),
    ("a textconv", ["diff.x.textconv", "{textconv}"], ["diff", "--no-ext-diff"]),
]


@pytest.mark.parametrize(("what", "planted", "command"), PLANTS, ids=[p[0] for p in PLANTS])
def test_a_program_planted_in_the_shared_config_never_runs_through_hardened_git(
        repo: Repo, what: str, planted: list[str], command: list[str]) -> None:
    """Set in the repository's shared ``.git/config``: the plain command runs it; the
    hardened one — the same command, no flag of its own added — does not. (Emptied, an
    external diff or a textconv makes a plain ``diff`` fail rather than run anything:
    teamctl's ``diff`` passes ``--no-ext-diff --no-textconv``.)"""
    key, value = planted
    tag = value.strip("{}")
    assert repo.plain(repo.tree, "config", key, repo.program(tag)).returncode == 0
    done = repo.hardened().run(*command, check=False)
    assert repo.fired() == set(), what
    assert done.returncode == 0 or "cannot run : No such file" in done.stderr, done.stderr
    repo.plain(repo.tree, *command)
    assert repo.fired() == {tag}, f"{what}: the plant was not live"


def test_hooks_in_the_hooks_dir_or_a_hooks_path_never_run_through_hardened_git(
        repo: Repo) -> None:
    """``post-checkout`` and ``reference-transaction`` in ``.git/hooks`` and in a
    ``core.hooksPath`` of the member's: ``worktree add`` (a branch made, files checked out)
    runs none of them hardened; plainly, both."""
    hooks = repo.tree / "hooks"
    hooks.mkdir()
    for directory, tag in ((repo.common / "hooks", "default"), (hooks, "path")):
        for hook in ("post-checkout", "reference-transaction"):
            (directory / hook).write_text(f"#!/bin/sh\n{repo.program(f'{tag}-{hook}')}\n")
            (directory / hook).chmod(0o755)
    Git(GitPlace(repo.common, repo.common)).run("worktree", "add", "-q", "-b", "one", "--",
                                                 str(repo.main.parent / "one"))
    assert repo.fired() == set()
    repo.plain(repo.main, "worktree", "add", "-q", "-b", "two", str(repo.main.parent / "two"))
    assert repo.fired() == {"default-post-checkout", "default-reference-transaction"}
    repo.plain(repo.tree, "config", "core.hooksPath", str(hooks))
    Git(GitPlace(repo.common, repo.common)).run("worktree", "add", "-q", "-b", "three", "--",
                                                 str(repo.main.parent / "three"))
    assert "path-post-checkout" not in repo.fired()


def test_a_smudge_filter_never_runs_and_a_required_one_never_stops_a_checkout(
        repo: Repo) -> None:
    """A committed ``.gitattributes`` naming a required filter whose smudge is planted: the
    hardened ``worktree add`` checks the files out as they are; plainly, the smudge runs."""
    (repo.main / ".gitattributes").write_text("app.txt filter=x\n")
    repo.plain(repo.main, "add", ".gitattributes")
    repo.plain(repo.main, "commit", "-q", "-m", "attributes")
    repo.plain(repo.main, "config", "filter.x.smudge", repo.program("smudge"))
    repo.plain(repo.main, "config", "filter.x.required", "true")
    Git(GitPlace(repo.common, repo.common)).run("worktree", "add", "-q", "-b", "one", "--",
                                                 str(repo.main.parent / "one"), "main")
    assert (repo.main.parent / "one" / "app.txt").read_text() == "one\n"
    assert repo.fired() == set()
    repo.plain(repo.main, "worktree", "add", "-q", "-b", "two", str(repo.main.parent / "two"))
    assert repo.fired() == {"smudge"}


def test_drivers_from_an_include_a_worktree_config_or_a_redirected_commondir_never_run(
        repo: Repo) -> None:
    """A filter defined in a file of the member's that the shared config includes, one in
    the worktree's ``config.worktree`` (the repository has ``extensions.worktreeConfig``),
    and a git dir of the member's that its admin dir's ``commondir`` now names, holding an
    fsmonitor: hardened ``status`` and ``diff`` run none (``GIT_COMMON_DIR`` is teamctl's);
    plainly, all three run."""
    included = repo.tree / "included.cfg"
    included.write_text(f"[filter \"x\"]\n\tclean = {repo.program('included')}\n")
    repo.plain(repo.tree, "config", "include.path", str(included))
    repo.plain(repo.tree, "config", "extensions.worktreeConfig", "true")
    (repo.tree / ".gitattributes").write_text("app.txt filter=x\nnew.txt filter=y\n")
    (repo.tree / "new.txt").write_text("new\n")
    repo.plain(repo.tree, "add", "new.txt")
    os.utime(repo.tree / "new.txt", (1, 1))
    repo.plain(repo.tree, "config", "--worktree", "filter.y.clean", repo.program("worktree"))
    evil = repo.tree / "evil.git"
    repo.plain(repo.tree, "clone", "-q", "--bare", str(repo.common), str(evil))
    repo.plain(evil, "config", "core.fsmonitor", repo.program("redirected"))
    (repo.admin / "commondir").write_text(f"{evil}\n")
    git = repo.hardened()
    git.run("status", "--porcelain")
    git.run("diff", "--no-ext-diff", "HEAD")
    assert repo.fired() == set()
    repo.plain(repo.tree, "status")
    assert repo.fired() == {"redirected"}
    (repo.admin / "commondir").write_text("../..\n")
    for name in ("app.txt", "new.txt"):  # stat-dirty again: git must read them anew
        os.utime(repo.tree / name, (2, 2))
    repo.plain(repo.tree, "diff", "HEAD")
    assert repo.fired() == {"redirected", "included", "worktree"}


def test_a_driver_name_holding_dots_and_an_equals_sign_is_still_emptied(repo: Repo) -> None:
    """``-c filter.a=b.c.clean=`` would set ``filter.a`` to ``b.c.clean=``; the settings
    travel as ``GIT_CONFIG_KEY_n``/``VALUE_n``, so the driver ``a=b.c`` is emptied."""
    assert driver_overrides(["filter.a=b.c.clean", "diff.x.y.textconv", "core.bare",
                             "filter..clean"])[:5] == [
        ("filter.a=b.c.clean", ""), ("filter.a=b.c.smudge", ""), ("filter.a=b.c.process", ""),
        ("filter.a=b.c.required", "false"), ("diff.x.y.command", "")]
    repo.plain(repo.tree, "config", "filter.a=b.c.clean", repo.program("odd"))
    (repo.tree / ".gitattributes").write_text("app.txt filter=a=b.c\n")
    repo.hardened().run("status", "--porcelain")
    assert repo.fired() == set()
    repo.plain(repo.tree, "status")
    assert repo.fired() == {"odd"}


def test_past_its_deadline_the_whole_process_group_is_killed(tmp_path: Path) -> None:
    """A command that outlives its deadline is ``git_timeout`` (retryable), and the process
    it started in the background is gone with it (the group is killed, not just the child)."""
    marker = tmp_path / "child.pid"
    with pytest.raises(GitFailed) as caught:
        execute(["sh", "-c", f"sleep 60 & echo $! > {marker}; wait"], {"PATH": os.defpath},
                cwd=tmp_path, timeout=0.5, check=True, shown=["sleep"])
    assert caught.value.code == "git_timeout" and caught.value.retryable
    assert wait_pid_exit(int(marker.read_text()), 30.0), "the background child outlived it"


def test_the_git_view_reads_the_tree_writes_only_its_scratch_and_has_no_network(
        repo: Repo, tmp_path: Path) -> None:
    """With the real bubblewrap: inside the view the worktree and the git dir are read-only
    (EROFS), the scratch dir is written, the operator's home is empty (its key not there),
    another directory of the operator's is not there, and there is no network but the
    sandbox's own loopback."""
    scratch, elsewhere = tmp_path / "scratch", tmp_path / "elsewhere"
    scratch.mkdir()
    elsewhere.mkdir()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("sekrit")
    script = (f"touch {repo.tree}/x 2>&1; touch {repo.common}/x 2>&1; touch {scratch}/y; "
              f"cat {home}/.ssh/id_ed25519 2>&1; ls {elsewhere} 2>&1; "
              "echo interfaces=$(grep -c : /proc/net/dev)")
    confine = GitViewSandbox().confine(reads=(repo.common,), scratch=scratch,
                                       workdir=repo.tree)
    confined = confine(["sh", "-c", script], {"PATH": os.defpath, "HOME": str(home)})
    done = execute(confined.argv, confined.env, cwd=tmp_path, timeout=60, check=True,
                   shown=["sh"])
    assert done.stdout.count("Read-only file system") == 2, done.stdout
    assert (scratch / "y").exists() and not (repo.tree / "x").exists()
    assert "sekrit" not in done.stdout and "No such file" in done.stdout
    assert done.stdout.split()[-1] == "interfaces=1", done.stdout  # its loopback alone
