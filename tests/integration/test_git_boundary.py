"""Git is part of the boundary (docs/security.md; issue 44, attacks 7, 8, 10, 13): a real daemon,
the real bubblewrap, real git, fake Claude members on ``worktree = true``. What a member does
it does as a prompt-injected model would — ``TRY run <shell command>`` through its fake CLI
(fixtures/escape.py) — and what it plants is a program that writes a canary file; then teamctl
reads its tree (``diff``, ``diff --stat``, ``worktrees``, ``worktrees --prune``, a relaunch
that makes a worktree) and no canary exists, outside or inside, and no secret's bytes reach
any output.

``a`` is sandboxed, ``b`` is not (its plants in the shared configuration are real, as the
operator's own would be: teamctl's git overrides them), ``c`` is a sandboxed teammate of
``a``'s."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.driver import REPO
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

def _git(cwd: Path, *args: str) -> str:
    """The operator's own git, plainly (a test's: not teamctl's)."""
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=True, timeout=60, env={
                              "PATH": "/usr/bin:/bin", "HOME": str(cwd),
                              "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                              "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}).stdout


SECRET = "the operator's sekrit bytes, in no redactor's shape\n"


def _repo(teamctl: Teamctl) -> Path:
    repo = teamctl.workdir / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("the project\n")
    (repo / "app.txt").write_text("one\n")
    (repo / ".gitignore").write_text(".env\n")
    _git(repo, "add", "README.md", "app.txt", ".gitignore")
    _git(repo, "commit", "-q", "-m", "initial")
    return repo


def _secret(teamctl: Teamctl) -> Path:
    ssh = Path(teamctl.env["HOME"]) / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "id_ed25519").write_text(SECRET)
    return ssh / "id_ed25519"


def _sandboxed(name: str, **extra: object) -> dict[str, object]:
    return fake_member(name, sandbox="process", permissions="full",
                       sandbox_ro=[str(REPO / "fixtures")], **extra)


def _team(teamctl: Teamctl, *members: dict[str, object]) -> Path:
    return teamctl.write_team("web", list(members), workdir="repo", worktree=True)


def _tried(teamctl: Teamctl, member: str, *commands: str) -> list[str]:
    """Each ``TRY run`` reply line of one turn of ``member``'s, in order."""
    done = teamctl.run("send", member, "\n".join(f"TRY run {c}" for c in commands), "--wait")
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("try run ")]


def _canaries(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("CANARY*")]


def test_a_sandboxed_member_in_a_worktree_works_there_never_in_the_operators_checkout(
        teamctl: Teamctl) -> None:
    """Attack 7: a sandboxed member on ``worktree = true`` starts in its worktree (as an
    unsandboxed one does), a file it writes lands there, the operator's checkout is not
    there to see or write (only its ``.git``, read-only), and ``diff`` shows the change."""
    repo = _repo(teamctl)
    assert teamctl.run("launch", str(_team(teamctl, _sandboxed("a"), fake_member("b")))
                       ).returncode == 0
    trees = teamctl.home / "worktrees" / "web"
    for member in ("a", "b"):
        pwd, write = _tried(teamctl, member, "pwd", f"echo {member} > made.txt")
        assert pwd == f"try run pwd: ok exit 0 {trees / member}", pwd
        assert write.startswith("try run echo"), write
        assert (trees / member / "made.txt").read_text() == f"{member}\n"
    assert not (repo / "made.txt").exists(), "the operator's checkout is untouched"
    [listing, readme, config] = _tried(teamctl, "a", f"ls -A {repo}", f"cat {repo}/README.md",
                                       f"echo x >> {repo}/.git/config")
    assert listing == f"try run ls -A {repo}: ok exit 0 .git", listing
    assert "No such file or directory" in readme, readme
    assert "Read-only file system" in config, config
    assert "+a" in teamctl.run("diff", "a").stdout


def test_inside_its_sandbox_a_member_commits_on_its_own_branch_and_writes_nothing_else_of_git(
        teamctl: Teamctl) -> None:
    """Item 5's binds, with the real bubblewrap: ``git commit`` in ``a``'s worktree works and
    moves its branch (as seen from outside); the shared ``.git/config`` and ``hooks/``,
    teammate ``c``'s admin dir and ``c``'s branch are read-only to it (EROFS) — still after
    ``c`` committed in its own sandbox (which renames its ref over: a read-only mount of that
    one file in ``a``'s sandbox would have been dropped then) — and so is every other ref."""
    repo = _repo(teamctl)
    assert teamctl.run("launch", str(_team(teamctl, _sandboxed("a"), _sandboxed("c")))
                       ).returncode == 0
    before = _git(repo, "rev-parse", "teamctl/web/a/work").strip()
    commit = "git -c user.name=a -c user.email=a@x commit -qam"
    committed = _tried(teamctl, "a", "echo two >> app.txt", f"{commit} by-a")[1]
    assert committed.startswith("try run git") and ": ok exit 0" in committed, committed
    after = _git(repo, "rev-parse", "teamctl/web/a/work").strip()
    assert after != before and _git(repo, "log", "-1", "--format=%s", after) == "by-a\n"
    assert _git(repo, "rev-parse", "main").strip() == before, "the operator's branch stays"
    assert "exit 0" in _tried(teamctl, "c", "echo c >> app.txt", f"{commit} by-c")[1]
    c_tip = _git(repo, "rev-parse", "teamctl/web/c/work").strip()
    admin_c = repo / ".git" / "worktrees" / "c"
    refs = repo / ".git" / "refs" / "heads"
    attempts = [f"echo x >> {repo}/.git/config", f"touch {repo}/.git/hooks/post-commit",
                f"echo x >> {admin_c}/HEAD", f"echo {after} > {refs}/teamctl/web/c/work",
                f"echo {after} > {refs}/teamctl/web/c/new", f"echo {after} > {refs}/main",
                f"git update-ref refs/heads/teamctl/web/c/work {after}",
                f"git update-ref refs/heads/main {after}",
                f"git update-ref refs/heads/teamctl/web/a/mine {after}"]
    *refused, own = _tried(teamctl, "a", *attempts)
    assert len(refused) == len(attempts) - 1
    for reply in refused:
        assert ": ok exit 0" not in reply and "Read-only file system" in reply, reply
    assert ": ok exit 0" in own, "its own ref directory is its to write"
    assert _git(repo, "rev-parse", "teamctl/web/c/work").strip() == c_tip
    assert _git(repo, "rev-parse", "main").strip() == before
    assert not (refs / "teamctl" / "web" / "c" / "new").exists()


def _program(tag: str, out: Path, tree: Path, secret: Path) -> str:
    """A planted program: it reads the operator's key, leaves a canary outside and one in the
    member's tree, and passes its input on (a filter's and textconv's job)."""
    return f"cat {secret}; touch {out}/CANARY-{tag} {tree}/CANARY-{tag}; cat"


def _plants(tag: str, out: Path, tree: Path, secret: Path) -> list[tuple[str, str]]:
    """Every key that runs a program, each planted as ``tag``'s program: fsmonitor, external
    diff, a filter (required) and a textconv for attribute-named drivers, an include of a
    file of the member's defining more of them, a hooks path."""
    def run(what: str) -> str:
        return _program(f"{tag}-{what}", out, tree, secret)

    return [("core.fsmonitor", run("fsmonitor")), ("diff.external", run("external")),
            (f"filter.{tag}.clean", run("clean")), (f"filter.{tag}.smudge", run("smudge")),
            (f"filter.{tag}.required", "true"), (f"diff.{tag}.textconv", run("textconv")),
            (f"diff.{tag}.command", run("command")), ("core.hooksPath", f"{tree}/hooks"),
            ("include.path", f"{tree}/included.cfg")]


def _plant_commands(tag: str, where: str, out: Path, tree: Path, secret: Path) -> list[str]:
    """The shell commands that plant ``_plants`` with ``git config WHERE``, the included
    file's drivers, executable hooks, and attributes naming the drivers."""
    commands = [f"git config {where} {key} '{value}'"
                for key, value in _plants(tag, out, tree, secret)]
    commands += [f"git config -f {tree}/included.cfg filter.inc{tag}.clean "
                 f"'{_program(f'{tag}-included', out, tree, secret)}'",
                 f"mkdir -p {tree}/hooks"]
    for hook in ("post-checkout", "pre-commit", "reference-transaction", "post-index-change",
                 "fsmonitor-watchman"):
        commands.append(f"printf '#!/bin/sh\\n{_program(f'{tag}-{hook}', out, tree, secret)}"
                        f"\\n' > {tree}/hooks/{hook} && chmod +x {tree}/hooks/{hook}")
    commands += [f"printf 'app.txt filter={tag} diff={tag}\\nnew.txt filter={tag} diff={tag}"
                 f"\\nREADME.md filter=inc{tag}\\n' > .gitattributes",
                 "echo two >> app.txt", "echo more >> README.md", "echo new > new.txt"]
    return commands


def test_nothing_a_member_plants_for_git_runs_when_teamctl_reads_or_makes_a_worktree(
        teamctl: Teamctl) -> None:
    """Attack 8. ``b`` (unsandboxed: the operator's rights) plants in the shared
    ``.git/config`` and ``.git/hooks``, ``.git/info/attributes``, and switches on
    ``extensions.worktreeConfig``; ``a`` (sandboxed: the shared ones are read-only to it)
    plants the same in its ``config.worktree``, and points its admin dir's ``commondir`` at a
    git dir of its own holding them all. Each plant reads the operator's key and writes a
    canary. ``diff`` and ``diff --stat`` of both, ``worktrees``, ``worktrees --prune`` (team
    stopped) and a relaunch that makes ``d``'s worktree (``git worktree add``: checkout,
    hooks, smudge) run; then no canary exists, outside or in any tree, no byte of the key is
    in any output — and the plants were live: the operator's plain ``git status`` in each
    tree runs them."""
    repo = _repo(teamctl)
    secret = _secret(teamctl)
    out = teamctl.workdir / "out"
    out.mkdir()
    team = _team(teamctl, _sandboxed("a"), fake_member("b"))
    assert teamctl.run("launch", str(team)).returncode == 0
    trees = teamctl.home / "worktrees" / "web"
    shared = [*_plant_commands("b", "", out, trees / "b", secret),
              f"cp {trees / 'b'}/hooks/* {repo}/.git/hooks/",
              f"printf 'app.txt filter=b diff=b\\n' > {repo}/.git/info/attributes",
              "git config extensions.worktreeConfig true"]
    assert all(": ok exit 0" in r for r in _tried(teamctl, "b", *shared))
    refused = _tried(teamctl, "a", "git config core.fsmonitor 'touch x'",
                     f"touch {repo}/.git/hooks/pre-commit",
                     f"echo 'x filter=a' >> {repo}/.git/info/attributes")
    assert all("exit 0" not in r and ("Read-only" in r or "read-only" in r) for r in refused)
    admin = repo / ".git" / "worktrees" / "a"
    evil = trees / "a" / "evil.git"
    own = [*_plant_commands("a", "--worktree", out, trees / "a", secret),
           f"git clone -q --bare {repo}/.git {evil}",
           *[f"git config -f {evil}/config {key} '{value}'"
             for key, value in _plants("r", out, trees / "a", secret)],
           f"echo {evil} > {admin}/commondir"]
    assert all(": ok exit 0" in r for r in _tried(teamctl, "a", *own))

    outputs = [teamctl.run("diff", "a"), teamctl.run("diff", "a", "--stat"),
               teamctl.run("diff", "b"), teamctl.run("diff", "b", "--stat"),
               teamctl.run("worktrees")]
    assert all(done.returncode == 0 for done in outputs), [d.stderr for d in outputs]
    assert "+two" in outputs[0].stdout and "+new" in outputs[0].stdout
    assert "new.txt" in outputs[1].stdout and "+two" in outputs[2].stdout
    assert teamctl.run("stop", "web").returncode == 0
    outputs.append(teamctl.run("worktrees", "--prune"))
    assert "kept web/a" in outputs[-1].stdout and "kept web/b" in outputs[-1].stdout
    relaunched = _team(teamctl, _sandboxed("a"), fake_member("b"), fake_member("d"))
    outputs.append(teamctl.run("launch", str(relaunched)))
    assert outputs[-1].returncode == 0, outputs[-1].stderr
    assert (trees / "d" / "app.txt").read_text() == "one\n", "checked out, no smudge"

    assert _canaries(teamctl.workdir, teamctl.home, Path(teamctl.env["HOME"])) == []
    for done in outputs:
        assert "sekrit" not in done.stdout + done.stderr
    assert "sekrit" not in (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    for tree, args in ((trees / "b", ["diff", "HEAD"]), (trees / "b", ["diff", "--no-ext-diff"]),
                       (trees / "a", ["status"])):  # the operator's own git, plainly
        subprocess.run(["git", "-C", str(tree), *args], capture_output=True, timeout=60,
                       env={"PATH": os.environ["PATH"], "HOME": teamctl.env["HOME"]})
    fired = {p.name for p in out.iterdir()}
    assert {"CANARY-b-fsmonitor", "CANARY-b-external", "CANARY-b-clean", "CANARY-b-textconv",
            "CANARY-r-fsmonitor"} <= fired, fired


def test_prune_shows_a_lock_reason_only_from_a_regular_file_and_escaped(
        teamctl: Teamctl) -> None:
    """Attack 13: ``a`` links its admin dir's ``locked`` to the operator's key; ``--prune``
    keeps the worktree as locked and reads nothing through the link. ``c``'s lock is a
    regular file holding terminal escapes: each shown as its mark (orchestrator/visible.py).
    A clean worktree is still pruned."""
    repo = _repo(teamctl)
    secret = _secret(teamctl)
    team = _team(teamctl, _sandboxed("a"), _sandboxed("c"), fake_member("d"))
    assert teamctl.run("launch", str(team)).returncode == 0
    admin = repo / ".git" / "worktrees"
    assert "exit 0" in _tried(teamctl, "a", f"ln -s {secret} {admin}/a/locked")[0]
    assert "exit 0" in _tried(teamctl, "c", f"printf 'why\\033]0;owned\\007' > {admin}/c/locked")[0]
    assert teamctl.run("stop", "web").returncode == 0
    done = teamctl.run("worktrees", "--prune")
    assert done.returncode == 0, done.stderr
    assert "kept web/a: locked (its reason is not a regular file: not read)" in done.stdout
    assert "kept web/c: locked (why\u241b]0;owned\u2407)" in done.stdout
    assert "pruned web/d" in done.stdout
    assert "sekrit" not in done.stdout + done.stderr and "\x1b" not in done.stdout
    assert (admin / "a" / "locked").is_symlink() and secret.read_text() == SECRET


def test_worktreeinclude_never_copies_through_a_symlink_out_of_the_repository(
        teamctl: Teamctl) -> None:
    """Attack 10: ``c`` (sandboxed, working in the operator's checkout: no worktree) links
    ``lnk`` to the operator's ``~/.ssh`` and names ``lnk/*`` in ``.worktreeinclude``; the
    next worktree teamctl makes (``d``'s, at a relaunch) gets ``.env`` and nothing of
    ``~/.ssh``, and the refusal is logged, naming ``lnk``."""
    repo = _repo(teamctl)
    secret = _secret(teamctl)
    (repo / ".env").write_text("LOCAL=1\n")
    team = _team(teamctl, _sandboxed("c", worktree=False))
    assert teamctl.run("launch", str(team)).returncode == 0
    planted = _tried(teamctl, "c", f"ln -s {secret.parent} lnk",
                     "printf 'lnk/*\\n.env\\n' > .worktreeinclude")
    assert all(": ok exit 0" in r for r in planted), planted
    assert teamctl.run("stop", "web").returncode == 0
    assert teamctl.run("launch", str(_team(teamctl, _sandboxed("c", worktree=False),
                                           fake_member("d")))).returncode == 0
    tree = teamctl.home / "worktrees" / "web" / "d"
    assert (tree / ".env").read_text() == "LOCAL=1\n"
    assert not (tree / "lnk").exists() and not list(tree.rglob("id_ed25519"))
    refused = [e for e in teamctl.log_events() if e["event"] == "worktree_include_refused"]
    assert [(e["member"], e["path"], e["reason"]) for e in refused] == [
        ("d", "lnk", "a symlink (never followed)")]


def test_without_bubblewrap_git_on_a_sandboxed_members_tree_is_refused_never_run_bare(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """Bubblewrap not found: the sandboxed member does not start (its worktree was made),
    and teamctl's git on its tree is refused — ``git_sandbox_unavailable``, the install
    command in the message — never run without the boundary; the unsandboxed member's tree
    is read as usual."""
    _repo(teamctl)
    teamctl.env["TEAMCTL_BWRAP"] = str(tmp_path / "no" / "bwrap")
    teamctl.run("launch", str(_team(teamctl, _sandboxed("a"), fake_member("b"))))
    (teamctl.home / "worktrees" / "web" / "a" / "app.txt").write_text("changed\n")
    done = teamctl.run("diff", "a", "--json")
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 1 and error["code"] == "git_sandbox_unavailable"
    assert "apt-get install bubblewrap" in error["message"]
    assert teamctl.run("diff", "b").returncode == 0
