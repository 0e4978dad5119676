"""What a worktree holds beyond its base — the changes ``worktrees`` counts, ``diff`` shows and
``--prune`` keeps a worktree for — read with the hardened git of ``orchestrator/git_run.py``
at the worktree's recorded place (inside the member's boundary when it is sandboxed: the
caller's ``Git``), from one NUL-separated ``git status``."""

from __future__ import annotations

import errno
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.daemon.worktrees._files import copy_beneath, same_beneath
from orchestrator.errors import WorktreeError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from orchestrator.daemon.worktrees._record import Worktree
    from orchestrator.git_run import Git

__all__ = ["Changes", "changes", "diff", "inspect"]

_INDEX_BYTES = 512 * 1024 * 1024  # a member's index copied for a diff, at most


@dataclass(frozen=True)
class Changes:
    """Tracked files changed, untracked files (each file, also inside untracked directories)
    and ignored paths that are work (an unchanged copy of the operator's ignored file, such
    as a ``.worktreeinclude`` ``.env``, is not), and untracked git repositories inside it (git
    lists one as ``dir/``; ``diff`` cannot show it as a file)."""

    changed: list[str]
    untracked: list[str]
    ignored: list[str]
    repositories: list[str]


def changes(git: Git, tree: Worktree) -> Changes:
    """The one listing both ``inspect``'s counts and ``diff``'s untracked files come from
    (submodules are not entered: their configuration is the member's)."""
    fields = iter(git.run("status", "--porcelain=v1", "-z", "--untracked-files=all",
                          "--ignored=matching", "--ignore-submodules=all", "--"
                          ).stdout.split("\0"))
    held = Changes([], [], [], [])
    for entry in fields:
        if len(entry) < 4:
            continue
        code, name = entry[:2], entry[3:]
        if code == "??":
            (held.repositories if name.endswith("/") else held.untracked).append(name)
        elif code == "!!":
            if not _copied_unchanged(tree, name):
                held.ignored.append(name)
        else:
            held.changed.append(name)
            if "R" in code or "C" in code:
                next(fields, None)  # a rename's or copy's source path follows
    return held


def _copied_unchanged(tree: Worktree, name: str) -> bool:
    """True if every file under ``name`` in the worktree is a regular file with the same bytes
    as the operator checkout's file at that path (what ``.worktreeinclude`` put there): both
    opened without following a symlink anywhere (``_files.same_beneath``)."""
    return all(same_beneath(tree.path, tree.repo, parts) for parts in _files_under(tree, name))


def _files_under(tree: Worktree, name: str) -> Iterator[tuple[str, ...]]:
    """The path parts of each file at or under ``name`` (a directory is walked, links never
    followed; lazily: the first difference ends the walk)."""
    top = tree.path / name.rstrip("/")
    if top.is_symlink() or not top.is_dir():
        yield Path(name.rstrip("/")).parts
        return
    for directory, _, names in os.walk(top):
        for file in names:
            yield (Path(directory) / file).relative_to(tree.path).parts


def inspect(git: Git, tree: Worktree, scratch: Path) -> dict[str, object]:
    """Path, branch, base, commits ahead, dirty and untracked files and the diffstat against
    the base (untracked files counted as added, as ``diff`` shows them)."""
    if not tree.path.exists():
        return {"team": tree.team, "member": tree.member, "path": str(tree.path),
                "branch": tree.branch, "base": tree.base, "missing": True, "ahead": 0,
                "dirty": 0, "untracked": 0, "diffstat": ""}
    ahead = git.run("rev-list", "--count", f"{tree.base_commit}..HEAD", "--").stdout
    held = changes(git, tree)
    stat = _diff_with_untracked(git, tree, held.untracked, "--shortstat", scratch).strip()
    return {"team": tree.team, "member": tree.member, "path": str(tree.path),
            "branch": tree.branch, "base": tree.base, "missing": False,
            "ahead": int(ahead.strip()), "dirty": len(held.changed),
            "untracked": len(held.untracked), "diffstat": stat}


def diff(git: Git, tree: Worktree, scratch: Path, *, stat: bool) -> str:
    """The member's changes against its base: commits, uncommitted edits and new untracked
    files alike, in one git diff (untracked files as added files)."""
    return _diff_with_untracked(git, tree, changes(git, tree).untracked,
                                "--stat" if stat else "--patch", scratch)


def _diff_with_untracked(git: Git, tree: Worktree, untracked: list[str], mode: str,
                         scratch: Path) -> str:
    """``git diff MODE base`` in which ``untracked`` show as new files: they are marked
    intent-to-add in a copy of the worktree's index in ``scratch`` (a directory of the
    daemon's, the only one the git of a sandboxed member's tree may write), the empty blob
    that takes written to ``scratch`` too — the member's own index and the repository's
    objects are untouched. External diff and textconv drivers are never run."""
    place = git.place
    fresh = Path(tempfile.mkdtemp(prefix="diff-", dir=scratch))
    index, objects = fresh / "index", fresh / "objects"
    try:
        copy_beneath(place.git_dir, ["index"], index, limit_bytes=_INDEX_BYTES)
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        raise WorktreeError(tree.member, f"its index cannot be read ({code})",
                            "run 'git status' in its worktree, or remove it") from exc
    objects.mkdir()
    env = {"GIT_INDEX_FILE": str(index), "GIT_LITERAL_PATHSPECS": "1",
           "GIT_OBJECT_DIRECTORY": str(objects),
           "GIT_ALTERNATE_OBJECT_DIRECTORIES": _alternate(place.common_dir / "objects")}
    for batch in _batches(untracked):
        git.run("add", "--intent-to-add", "--", *batch, env=env)
    text = git.run("diff", "--no-ext-diff", "--no-textconv", "--no-color",
                   "--ignore-submodules=all", mode, tree.base_commit, "--", env=env).stdout
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _alternate(path: Path) -> str:
    """One entry of ``GIT_ALTERNATE_OBJECT_DIRECTORIES`` (quoted where a ``:`` would split)."""
    text = str(path)
    if ":" not in text and not text.startswith('"'):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _batches(names: list[str], limit: int = 64_000) -> list[list[str]]:
    """``names`` split so that no argv gets near the system's limit."""
    batches: list[list[str]] = []
    size = limit
    for name in names:
        if size + len(name) + 1 > limit:
            batches.append([])
            size = 0
        batches[-1].append(name)
        size += len(name) + 1
    return batches
