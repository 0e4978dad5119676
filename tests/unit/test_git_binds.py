"""What a sandboxed member in a worktree sees of git (orchestrator/daemon/worktrees/_sandbox.py)
and where those binds go in its bubblewrap command line (runtimes/hosts/sandbox/plan.py), without
starting a sandbox (tests/integration/test_git_boundary.py runs the real one)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from orchestrator.daemon.worktrees import Worktree, sandbox_view
from runtimes.hosts.sandbox.plan import SandboxPolicy, bwrap_argv

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def _at(argv: Sequence[str], *words: str) -> int:
    """Where the run ``words`` starts in ``argv`` (ValueError if it is not there)."""
    for index in range(len(argv) - len(words) + 1):
        if tuple(argv[index:index + len(words)]) == words:
            return index
    raise ValueError(words)


def _tree(tmp_path: Path, *, branch: str = "teamctl/web/a/work") -> Worktree:
    repo, state = tmp_path / "work" / "repo", tmp_path / "state"
    common = repo / ".git"
    for path in (repo / "src", common / "worktrees" / "a", common / "objects",
                 common / "refs" / "heads" / "teamctl" / "web" / "a",
                 common / "logs" / "refs" / "heads" / "teamctl" / "web" / "a",
                 state / "worktrees" / "web" / "a" / "src", state / "members" / "web" / "a"):
        path.mkdir(parents=True, exist_ok=True)
    return Worktree("web", "a", state / "worktrees" / "web" / "a", branch, "HEAD", "0" * 40,
                    repo, common, common / "worktrees" / "a")


def test_a_worktree_member_writes_its_tree_objects_admin_dir_and_own_refs_only(
        tmp_path: Path) -> None:
    """Its workdir is the same place in its worktree as in the operator's checkout, which is
    concealed; the common dir is read-only, then its objects, its admin dir and its own ref
    and reflog directories (one branch each) read-write over it — in that order."""
    tree = _tree(tmp_path)
    common = tree.repo / ".git"
    view = sandbox_view(tree, tree.repo / "src", writable=True)
    assert view.workdir == tree.path / "src"
    assert view.conceal == (tree.repo,)
    assert view.binds == (
        (tree.path, True), (common, False), (common / "objects", True),
        (common / "worktrees" / "a", True),
        (common / "refs" / "heads" / "teamctl" / "web" / "a", True),
        (common / "logs" / "refs" / "heads" / "teamctl" / "web" / "a", True))


def test_a_read_only_member_or_a_branch_of_before_writes_nothing_of_git(tmp_path: Path) -> None:
    """``permissions = "read"``: the worktree and the git dir read-only, nothing more; a
    worktree still on a branch whose ref shares its directory with its teammates' (before
    the rename at its next launch) gets no ref directory to write either."""
    tree = _tree(tmp_path)
    common = tree.repo / ".git"
    assert sandbox_view(tree, tree.repo, writable=False).binds == (
        (tree.path, False), (common, False))
    legacy = replace(tree, branch="teamctl/web/a")
    assert sandbox_view(legacy, tree.repo, writable=True).binds == (
        (tree.path, True), (common, False))


def test_git_binds_come_after_the_concealment_and_before_the_hidden_paths(
        tmp_path: Path) -> None:
    """The operator's checkout and teamctl's state are covered first, the member's own
    workdir bound, then git's binds in the view's order (each showing through the
    concealment), then the credential paths hidden; the checkout's tmpfs is made read-only
    last, which leaves the binds inside it as they are (not recursive)."""
    tree = _tree(tmp_path)
    home = tmp_path / "operator"
    (home / ".ssh").mkdir(parents=True)
    view = sandbox_view(tree, tree.repo / "src", writable=True)
    policy = SandboxPolicy(workdir=view.workdir, home=home,
                           runtime_home=tmp_path / "state" / "members" / "web" / "a",
                           conceal=(tmp_path / "state", *view.conceal), git=view.binds)
    argv = bwrap_argv("bwrap", policy, ["claude"])
    common = str(tree.repo / ".git")
    checkout = _at(argv, "--tmpfs", str(tree.repo))
    own = _at(argv, "--bind", str(view.workdir), str(view.workdir))
    first, *rest = [_at(argv, "--bind-try" if writable else "--ro-bind-try", str(path),
                        str(path)) for path, writable in view.binds]
    assert checkout < own < first
    assert [first, *rest] == sorted([first, *rest])
    assert _at(argv, "--ro-bind-try", common, common) < _at(
        argv, "--bind-try", f"{common}/objects", f"{common}/objects")
    assert rest[-1] < _at(argv, "--tmpfs", str(home / ".ssh"))
    assert rest[-1] < _at(argv, "--remount-ro", str(tree.repo))
    assert argv[_at(argv, "--chdir"):_at(argv, "--chdir") + 2] == ["--chdir", str(view.workdir)]
