"""A git worktree per member: two teammates writing the same path each change only their own
checkout, the operator's is untouched, `diff` shows each change, `--prune` keeps what has
work in it (real git, real daemon, the fake claude writing files as its Write tool would)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.support.git import git, project_repo
from tests.support.members import fake_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl


def test_two_members_edit_the_same_path_each_in_their_own_worktree(teamctl: Teamctl) -> None:
    repo = project_repo(teamctl.workdir / "repo")
    team = teamctl.write_team("web", [fake_member("a"), fake_member("b"), fake_member("c")],
                              workdir="repo", worktree=True)
    assert teamctl.run("launch", str(team)).returncode == 0
    for member in ("a", "b"):
        done = teamctl.run("send", member, f"WRITE notes.txt written by {member}", "--wait")
        assert done.returncode == 0, done.stderr
    trees = teamctl.home / "worktrees" / "web"
    assert (trees / "a" / "notes.txt").read_text() == "written by a\n"
    assert (trees / "b" / "notes.txt").read_text() == "written by b\n"
    assert not (repo / "notes.txt").exists(), "the operator's checkout is untouched"
    assert (trees / "a" / ".env").read_text() == "LOCAL=1\n", ".worktreeinclude is copied"
    assert not (trees / "a" / "node_modules").exists(), "never node_modules"
    assert git(trees / "a", "branch", "--show-current").strip() == "teamctl/web/a/work"

    diff = teamctl.run("diff", "a")
    assert diff.returncode == 0 and "+written by a" in diff.stdout
    assert "written by b" not in diff.stdout
    assert "notes.txt" in teamctl.run("diff", "b", "--stat").stdout
    doc = teamctl.json("worktrees")
    rows = {t["member"]: t for t in doc["worktrees"]}
    assert rows["a"]["untracked"] == 1 and rows["c"]["untracked"] == 0
    assert rows["a"]["base"] == "HEAD" and rows["a"]["running"] is True

    kept = teamctl.json("worktrees", "--prune")
    assert kept["pruned"] == [] and {k["reason"] for k in kept["kept"]} == {
        "its member is running"}
    assert teamctl.run("stop", "web").returncode == 0
    pruned = teamctl.json("worktrees", "--prune")
    assert pruned["pruned"] == ["web/c"], "only the clean one"
    reasons = {k["member"]: k["reason"] for k in pruned["kept"]}
    assert reasons == {"a": "1 untracked file (notes.txt)", "b": "1 untracked file (notes.txt)"}
    assert (trees / "a" / "notes.txt").exists() and not (trees / "c").exists()


def test_a_relaunch_reuses_the_worktree_and_its_work(teamctl: Teamctl) -> None:
    project_repo(teamctl.workdir / "repo")
    team = teamctl.write_team("web", [fake_member("a", worktree=True)], workdir="repo")
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "a", "WRITE work.txt kept", "--wait").returncode == 0
    assert teamctl.run("stop", "web").returncode == 0
    assert teamctl.run("launch", str(team)).returncode == 0
    tree = teamctl.home / "worktrees" / "web" / "a"
    assert (tree / "work.txt").read_text() == "kept\n"
    assert [e["member"] for e in teamctl.log_events()
            if e["event"] == "worktree_created"] == ["a"], "made once, then reused"


def test_worktree_outside_a_repository_is_an_invalid_team_file(teamctl: Teamctl) -> None:
    (teamctl.workdir / "plain").mkdir()
    team = teamctl.write_team("web", [fake_member("a")], workdir="plain", worktree=True)
    done = teamctl.run("launch", str(team))
    assert done.returncode == 2
    assert "team.worktree:" in done.stderr and "not in a git repository" in done.stderr


def test_a_branch_checked_out_elsewhere_is_a_typed_error_at_launch(teamctl: Teamctl) -> None:
    repo = project_repo(teamctl.workdir / "repo")
    git(repo, "checkout", "-q", "-b", "teamctl/web/a/work")
    team = teamctl.write_team("web", [fake_member("a", worktree=True)], workdir="repo")
    done = teamctl.run("launch", str(team))
    assert done.returncode == 1
    assert "branch teamctl/web/a/work is already checked out elsewhere" in done.stderr
    status = teamctl.run("status")  # a refused launch stops the daemon it started
    assert status.returncode == 4 or "no team is running" in status.stdout, "nothing started"


def test_a_base_that_does_not_exist_is_a_typed_error(teamctl: Teamctl) -> None:
    project_repo(teamctl.workdir / "repo")
    team = teamctl.write_team("web", [fake_member("a", worktree=True, base="nope")],
                              workdir="repo")
    done = teamctl.run("launch", str(team))
    assert done.returncode == 1 and "base 'nope' is not a commit" in done.stderr


def test_hostile_worktree_diff_and_thread_requests_are_typed_errors(teamctl: Teamctl) -> None:
    """diff of a member without a worktree, unknown names, ids that are not ids, a forged
    socket request: one line, the right exit code, the daemon still up."""
    import json
    import socket

    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("a")]))
                       ).returncode == 0
    cases = [(["diff", "a"], 1, "no member worktree named 'a'"),
             (["diff", "nobody"], 1, "no member worktree named 'nobody'"),
             (["diff", "../../etc"], 2, "is not a name"),
             (["thread", "not-an-id"], 2, "is not a message id"),
             (["thread", "01JDQ3X2K3R9W0FQ6Z5N4M8P7D"], 1, "no message named"),
             (["worktrees", "--team", "a b"], 2, "is not a name")]
    for args, code, says in cases:
        done = teamctl.run(*args)
        assert done.returncode == code and says in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(teamctl.home / "teamctl.sock"))
        sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"diff","params":{"member":"a",'
                     b'"stat":"yes","extra":1}}\n')
        answer = json.loads(sock.recv(65536))
    assert answer["error"]["data"]["code"] == "usage_error"
    assert teamctl.run("send", "a", "still fine", "--wait").returncode == 0


def test_a_worktree_recorded_before_schema_17_is_completed_and_moved_to_a_branch_of_its_own(
        tmp_path: Path) -> None:
    """A record of an earlier teamctl — no common dir, no admin dir, on branch
    ``teamctl/web/a`` — is found again at the next launch: its admin dir is the one whose
    ``gitdir`` names the worktree, its branch becomes ``teamctl/web/a/work`` (the worktree
    follows it), and its work is where it was."""
    from orchestrator.daemon import worktrees

    repo = project_repo(tmp_path / "repo")
    path = tmp_path / "trees" / "web" / "a"
    git(repo, "worktree", "add", "-q", "-b", "teamctl/web/a", str(path))
    (path / "work.txt").write_text("kept\n")
    base = git(repo, "rev-parse", "HEAD").strip()
    old = worktrees.Worktree("web", "a", path, "teamctl/web/a", "HEAD", base, repo)
    tree, refused = worktrees.create(tmp_path / "trees", "web", "a", repo, None, old)
    assert (tree.common_dir, tree.admin_dir) == (repo / ".git", repo / ".git" / "worktrees" / "a")
    assert tree.branch == "teamctl/web/a/work" and refused == []
    assert git(path, "branch", "--show-current").strip() == "teamctl/web/a/work"
    assert (path / "work.txt").read_text() == "kept\n"
    assert worktrees.create(tmp_path / "trees", "web", "a", repo, None, tree) == (tree, [])
