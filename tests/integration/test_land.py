"""The merge queue in a real daemon (docs/land.md): fake Claude members in worktrees write,
commit (the fake's ``GIT`` lines, as a model's shell tool would) and complete their tasks
through their MCP tools; the tasks land on ``teamctl/web/main``, ``teamctl queue`` shows it, a
conflict goes back to its owner's stdin naming the file and is fixed by a scripted commit; and
a member that plants a hook, an fsmonitor and a filter in the repository's configuration never
has them run by teamctl (the attack test)."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.driver import REPO
from tests.support.git import git
from tests.support.land import add_task, complete, land_repo, say, settled, tip, work
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl

BRANCH = "teamctl/web/main"
KEY = "fake-operator-ssh-key-4b1d7e"  # not in a key's shape: the redactor would not hide it


def _launch(teamctl: Teamctl, *members: str, **integrate: object) -> Path:
    repo = land_repo(teamctl.workdir / "repo")
    team = teamctl.write_team("web", [fake_member(m, permissions="full") for m in members],
                              workdir="repo", worktree=True, integrate=integrate)
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stdout + done.stderr
    return repo


def _told(teamctl: Teamctl, follow_logs: LogFollower, member: str,
          task: int) -> dict[str, object]:
    """teamctl's message to ``member`` that ``task`` did not land, once it was answered (its
    notice names the message: ``task show``)."""
    follow_logs.wait_for(lambda e: e["event"] == "task_owner_told" and e.get("task") == task,
                         timeout=60)
    notices = teamctl.json("task", "show", f"T{task}")["notices"]
    [notice] = [n for n in notices if n["kind"] == "integration"][-1:]
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == notice["message_id"], timeout=60)
    [message] = [m for m in teamctl.json("history", member)["messages"]
                 if m["id"] == notice["message_id"]]
    assert notice["member"] == member
    return dict(message)


def test_two_members_tasks_land_and_the_queue_shows_them(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """Two members' tasks, done through their MCP tools, land in order on the integration
    branch (the check 'true' run inside each owner's boundary); ``teamctl queue --json`` lists
    both as landed, the operator's branch is where it was."""
    repo = _launch(teamctl, "a", "b", check="true")
    main = git(repo, "rev-parse", "main").strip()
    t1, t2 = add_task(teamctl, "a", "add a"), add_task(teamctl, "b", "add b")
    work(teamctl, "a", "a.txt", "from a")
    work(teamctl, "b", "b.txt", "from b")
    assert "mcp: " in complete(teamctl, "a", t1)
    assert "mcp: " in complete(teamctl, "b", t2)
    assert settled(follow_logs, t1)["event"] == "task_landed"
    assert settled(follow_logs, t2)["event"] == "task_landed"
    doc = teamctl.json("queue")
    assert (doc["branch"], doc["paused"], doc["waiting"], doc["running"]) == (
        BRANCH, False, [], None)
    assert [(e["task"], e["state"]) for e in doc["recent"]] == [
        (f"T{t2}", "landed"), (f"T{t1}", "landed")]
    assert tip(repo, BRANCH) == doc["recent"][0]["result"]
    assert git(repo, "show", f"{BRANCH}:a.txt") == "from a\n"
    assert git(repo, "rev-parse", "main").strip() == main
    shown = teamctl.run("queue")
    assert shown.returncode == 0 and f"web → {BRANCH} (merge, check 'true')" in shown.stdout

    # the operator's levers: pause, integrate by hand, resume; refusals typed
    assert teamctl.json("queue", "--pause")["paused"] is True
    again = teamctl.json("integrate", f"T{t1}")
    assert (again["task"], again["state"]) == (f"T{t1}", "queued")
    assert teamctl.json("queue")["waiting"][0]["id"] == again["id"]
    assert teamctl.json("queue", "--resume")["paused"] is False
    assert settled(follow_logs, t1)["event"] == "task_landed"
    follow_logs.wait_for(lambda e: e["event"] == "task_landed" and e.get("entry") == again["id"])
    [entry] = [e for e in teamctl.json("queue")["recent"] if e["id"] == again["id"]]
    assert entry["state"] == "landed" and "nothing new" in entry["note"]
    assert tip(repo, BRANCH) == doc["recent"][0]["result"], "landed twice"
    t3 = add_task(teamctl, "a", "not done")
    refused = teamctl.run("integrate", f"T{t3}", "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "integrate_refused"
    assert "in_progress, not done" in teamctl.run("integrate", f"T{t3}").stderr
    assert teamctl.run("integrate", "T999").returncode == 1
    assert teamctl.run("integrate", "x; rm").returncode == 2
    assert teamctl.run("queue", "--pause", "--resume").returncode == 2


def test_a_conflict_reaches_the_owner_and_its_scripted_fix_lands(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """b's task conflicts with a's landed one: b's next turn is teamctl's message naming
    README.md; b merges the branch, resolves, commits and completes again; it lands."""
    repo = _launch(teamctl, "a", "b")
    t1, t2 = add_task(teamctl, "a", "edit a"), add_task(teamctl, "b", "edit b")
    work(teamctl, "a", "README.md", "the project by a")
    work(teamctl, "b", "README.md", "the project by b")
    complete(teamctl, "a", t1)
    assert settled(follow_logs, t1)["event"] == "task_landed"
    complete(teamctl, "b", t2)
    back = settled(follow_logs, t2)
    assert back["event"] == "task_not_landed" and back["to"] == "sent_back"
    message = _told(teamctl, follow_logs, "b", t2)
    assert "did not land" in message["text"] and "README.md" in message["text"]
    assert "the project by b" in message["reply"]  # its stdin carried the hunk
    assert teamctl.json("task", "show", f"T{t2}")["task"]["state"] == "in_progress"
    merged = say(teamctl, "b", f"GIT merge {BRANCH}")
    assert "exit 1" in merged, merged  # the conflict, in b's own worktree
    say(teamctl, "b", "WRITE README.md the project by a and b")
    assert "exit 0" in say(teamctl, "b", "GIT add -A\nGIT commit -q -m resolve")
    complete(teamctl, "b", t2)
    assert settled(follow_logs, t2, attempt=2)["event"] == "task_landed"
    assert git(repo, "show", f"{BRANCH}:README.md") == "the project by a and b\n"
    entries = teamctl.json("queue")["recent"]
    assert [(e["task"], e["state"], e["attempt"]) for e in entries][:2] == [
        (f"T{t2}", "landed", 2), (f"T{t2}", "sent_back", 1)]


def test_a_hook_fsmonitor_or_filter_a_member_plants_never_runs_as_the_operator(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path) -> None:
    """The attack: a member commits a .gitattributes naming a filter, then (with its own git,
    in its worktree) sets core.fsmonitor, core.hooksPath to hooks it wrote and the filter's
    programs in the repository's configuration, and leaves a file uncommitted; it completes
    its task. teamctl commits what was left, checks out, merges and moves the branch — and
    not one of those programs ran (each would have left a canary)."""
    canary = tmp_path / f"canary-{uuid.uuid4().hex[:8]}"
    repo = _launch(teamctl, "a")
    t1 = add_task(teamctl, "a", "plant")
    say(teamctl, "a", "WRITE .gitattributes * filter=evil")
    work(teamctl, "a", "a.txt", "from a")
    hooks = ["post-checkout", "post-merge", "pre-commit", "commit-msg", "post-commit",
             "reference-transaction", "pre-merge-commit"]
    for hook in hooks:
        say(teamctl, "a", f"WRITE hooks/{hook} #!/bin/sh\necho {hook} >> {canary}")
    monitor = shlex.quote(f"echo fsmonitor >> {canary}; false")
    clean = shlex.quote(f"sh -c 'echo clean >> {canary}; cat'")
    smudge = shlex.quote(f"sh -c 'echo smudge >> {canary}; cat'")
    planted = "\n".join([
        "GIT add -A", "GIT commit -q -m hooks", f"GIT config core.fsmonitor {monitor}",
        "GIT config core.hooksPath hooks", f"GIT config filter.evil.clean {clean}",
        f"GIT config filter.evil.smudge {smudge}", "GIT config filter.evil.required true"])
    reply = say(teamctl, "a", planted)
    assert reply.count("exit 0") == 7, reply
    say(teamctl, "a", "TRY run chmod +x hooks/" + " hooks/".join(hooks))
    say(teamctl, "a", "WRITE left.txt left uncommitted")
    canary.unlink(missing_ok=True)  # what the member's own git ran is the member's doing
    complete(teamctl, "a", t1)
    assert settled(follow_logs, t1)["event"] == "task_landed"
    assert "left.txt" in git(repo, "ls-tree", "--name-only", BRANCH)
    assert not canary.exists(), canary.read_text()
    assert re.search(r"core\.fsmonitor", git(repo, "config", "--list")), "the attack was set"


def test_a_sandboxed_owners_integration_check_runs_inside_its_sandbox(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path) -> None:
    """The sandboxed owner commits a Makefile whose recipe writes canaries to the operator's
    home, a directory outside and teamctl's home, reads the operator's ~/.ssh key and fails;
    the team's integration check 'make test' runs it on the merged result in teamctl's scratch
    worktree — inside the owner's sandbox (the scratch tree its read-write workdir there): the
    recipe ran (its output goes back to the owner), no canary reached the disk, the key is not
    in the output, the branch did not move."""
    home = teamctl.env["HOME"]
    os.makedirs(os.path.join(home, ".ssh"), exist_ok=True)
    Path(home, ".ssh", "id_ed25519").write_text(KEY + "\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = land_repo(teamctl.workdir / "repo")
    main = git(repo, "rev-parse", "main").strip()
    team = teamctl.write_team("web", [fake_member("a", permissions="full", sandbox="process",
                                                  sandbox_ro=[str(REPO / "fixtures")])],
                              workdir="repo", worktree=True, integrate={"check": "make test"})
    assert teamctl.run("launch", str(team)).returncode == 0
    t1 = add_task(teamctl, "a", "a recipe")
    canary = f"canary-{uuid.uuid4().hex[:8]}"
    recipe = ["@pwd", "echo check-ran > check-ran.txt", f"-echo x > {home}/{canary}",
              f"-echo x > {outside}/{canary}", f"-echo x > {teamctl.home}/{canary}",
              f"-cat {home}/.ssh/id_ed25519", "@echo RECIPE-END; exit 4"]
    body = base64.b64encode(("test:\n" + "".join(f"\t{line}\n" for line in recipe)).encode())
    reply = say(teamctl, "a", f"TRY run echo {body.decode()} | base64 -d > Makefile")
    assert ": ok exit 0" in reply, reply
    assert "exit 0" in say(teamctl, "a", "GIT add -A\nGIT commit -q -m recipe")
    say(teamctl, "a", "WRITE left.txt left uncommitted")  # committed by its own git, inside
    complete(teamctl, "a", t1)
    back = settled(follow_logs, t1)
    assert back["event"] == "task_not_landed" and back["to"] == "sent_back"
    text = _told(teamctl, follow_logs, "a", t1)["text"]
    assert "the integration check 'make test' failed (exit 2)" in text, text
    assert "RECIPE-END" in text and str(teamctl.home / "land" / "web") in text
    assert KEY not in text, "the check read the operator's key"
    for place in (home, str(outside), str(teamctl.home)):
        assert not os.path.exists(os.path.join(place, canary)), f"a canary in {place}"
    assert tip(repo, BRANCH) == main
    [entry] = teamctl.json("queue")["recent"]
    assert "left.txt" in git(repo, "ls-tree", "--name-only", entry["commit"])
    assert git(repo, "log", "-1", "--format=%s", entry["commit"]).strip() == f"T{t1}: a recipe"
