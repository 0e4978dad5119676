"""What a worktree holds is never lost and never misread: ``--prune`` keeps work in ignored
files and a locked worktree (saying why, pruning the others), ``diff`` shows every untracked
name — spaces, newlines, leading dashes — and never hands one to git as an option, and
``worktrees`` counts the same untracked files ``diff`` shows (real git, real daemon)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tests.support.git import git
from tests.support.members import fake_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl

HOSTILE_NAMES = ("sp ace.txt", "new\nline.txt", "-dash.txt", "--output=X", "sub/deep/q.txt",
                 "sub/y.txt", "dir with space/-z.txt", "sub/--stat")


def _team(teamctl: Teamctl, members: tuple[str, ...]) -> Path:
    """A repository whose ignored ``.env`` is copied into each member's worktree, the team
    launched (making the worktrees) and stopped; the worktrees' directory."""
    repo = teamctl.workdir / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("the project\n")
    (repo / ".gitignore").write_text(".env\nbuild/\nnotes.md\n")
    (repo / ".env").write_text("LOCAL=1\n")
    (repo / ".worktreeinclude").write_text(".env\n")
    git(repo, "add", "README.md", ".gitignore", ".worktreeinclude")
    git(repo, "commit", "-q", "-m", "initial")
    team = teamctl.write_team("web", [fake_member(m) for m in members], workdir="repo",
                              worktree=True)
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("stop", "web").returncode == 0
    return teamctl.home / "worktrees" / "web"


def test_prune_keeps_a_worktree_whose_work_is_in_ignored_files(teamctl: Teamctl) -> None:
    """An edited ignored file (.env copied by .worktreeinclude), a build output and a notes file
    are work: --prune keeps their worktrees and says which files; an untouched copy of .env is
    not work, so that worktree goes."""
    trees = _team(teamctl, ("a", "b", "c"))
    (trees / "a" / ".env").write_text("LOCAL=1\nTOKEN=edited-by-a\n")
    (trees / "b" / "build").mkdir()
    (trees / "b" / "build" / "out.o").write_bytes(b"\x7fELF")
    (trees / "b" / "notes.md").write_text("what I found\n")

    doc = teamctl.json("worktrees", "--prune")
    assert doc["pruned"] == ["web/c"]
    assert {k["member"]: k["reason"] for k in doc["kept"]} == {
        "a": "1 ignored file (.env)", "b": "2 ignored files (build/, notes.md)"}
    assert (trees / "a" / ".env").read_text().endswith("edited-by-a\n")
    assert (trees / "b" / "build" / "out.o").exists() and (trees / "b" / "notes.md").exists()
    assert not (trees / "c").exists()

    again = teamctl.run("worktrees", "--prune")
    assert again.returncode == 0, again.stderr
    assert "kept web/a: 1 ignored file (.env)" in again.stdout
    assert "kept web/b: 2 ignored files (build/, notes.md)" in again.stdout


def test_prune_with_a_locked_worktree_keeps_it_and_prunes_the_others(
        teamctl: Teamctl) -> None:
    """A locked worktree is kept with the reason "locked" — not a raw git error that stops the
    prune — the clean ones are still pruned, and the output lists both."""
    trees = _team(teamctl, ("a", "b"))
    git(trees / "a", "worktree", "lock", str(trees / "a"))
    done = teamctl.run("worktrees", "--prune")
    assert done.returncode == 0, done.stderr
    assert "pruned web/b" in done.stdout
    assert "kept web/a: locked" in done.stdout
    assert (trees / "a" / "README.md").exists() and not (trees / "b").exists()
    doc = teamctl.json("worktrees", "--prune")
    assert doc["pruned"] == [] and doc["kept"] == [
        {"team": "web", "member": "a", "reason": "locked"}]


def _hostile_tree(teamctl: Teamctl) -> Path:
    tree = _team(teamctl, ("a",)) / "a"
    for name in HOSTILE_NAMES:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(f"content of {name!r}\n")
    return tree


def test_diff_shows_every_untracked_name_and_never_passes_one_as_an_option(
        teamctl: Teamctl) -> None:
    """Untracked names with spaces, newlines and leading dashes all appear in the diff as new
    files; a file named --output=X is a name, not git's --output (no X is written)."""
    tree = _hostile_tree(teamctl)
    done = teamctl.run("diff", "--team", "web", "a")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("new file mode") == len(HOSTILE_NAMES)
    for name in HOSTILE_NAMES:
        assert f"+++ b/{name}" in done.stdout.replace('"b/new\\nline', "b/new\nline"), name
        assert f"+content of {name!r}\n" in done.stdout, name
    assert not (tree / "X").exists() and not (teamctl.workdir / "X").exists()
    assert not list(teamctl.home.rglob("X"))


def test_diff_stat_lists_untracked_files_as_added_not_dev_null_renames(
        teamctl: Teamctl) -> None:
    """`diff --stat` shows each untracked file as one added file (``path | 1 +``) in one
    summary, never a ``/dev/null => path`` block per file."""
    _hostile_tree(teamctl)
    done = teamctl.run("diff", "--team", "web", "a", "--stat")
    assert done.returncode == 0, done.stderr
    assert "/dev/null" not in done.stdout
    assert re.search(r"^ sp ace\.txt\s+\| 1 \+$", done.stdout, re.M), done.stdout
    assert re.search(r"^ sub/--stat\s+\| 1 \+$", done.stdout, re.M), done.stdout
    assert done.stdout.count("files changed") == 1
    assert f" {len(HOSTILE_NAMES)} files changed, {len(HOSTILE_NAMES)} insertions(+)" in \
        done.stdout


def test_worktrees_counts_the_untracked_files_diff_shows(teamctl: Teamctl) -> None:
    """`worktrees` and `diff` count untracked files from one listing: files in untracked
    subdirectories count one each, as diff shows them, and so do hostile names."""
    _hostile_tree(teamctl)
    [row] = teamctl.json("worktrees")["worktrees"]
    shown = teamctl.run("diff", "--team", "web", "a").stdout.count("new file mode")
    assert row["untracked"] == shown == len(HOSTILE_NAMES)
    assert row["diffstat"] == (f"{len(HOSTILE_NAMES)} files changed, "
                               f"{len(HOSTILE_NAMES)} insertions(+)")


def test_worktreeinclude_never_copies_from_or_to_outside_the_worktree(
        teamctl: Teamctl) -> None:
    """.worktreeinclude globs stay inside the repository: a ``..`` or absolute pattern and a
    symlink leaving the repository copy nothing (the launch goes on), a plain one still
    copies."""
    repo = teamctl.workdir / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (teamctl.workdir / "outside.txt").write_text("not the repo's\n")
    (repo / ".gitignore").write_text(".env\nlink\n")
    (repo / ".env").write_text("LOCAL=1\n")
    (repo / "link").symlink_to(teamctl.workdir / "outside.txt")
    (repo / ".worktreeinclude").write_text("../outside.txt\n/etc/hostname\nlink\n.env\n")
    git(repo, "add", ".gitignore", ".worktreeinclude")
    git(repo, "commit", "-q", "-m", "initial")
    team = teamctl.write_team("web", [fake_member("a")], workdir="repo", worktree=True)
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stderr
    trees = teamctl.home / "worktrees" / "web"
    assert (trees / "a" / ".env").read_text() == "LOCAL=1\n"
    assert not (trees / "outside.txt").exists() and not (trees / "a" / "link").exists()
    assert not (trees / "a" / "etc").exists()
