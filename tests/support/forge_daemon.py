"""A real daemon's team on the local fake of GitHub (docs/forge.md, "Pull requests"): the
team's repository and a local bare repository as its remote, the fake with issue #1 labelled,
a team ``web`` of one fake Claude member ``dev`` in a worktree whose tasks land through the
merge queue and get pull requests (a 5 s poll), and issue #1 taken to its pull request by
``dev`` through the CLI — for tests/integration/test_forge_pulls.py and bench/bench_forge.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.support.driver import toml_value
from tests.support.fake_github import FakeGitHub
from tests.support.git import git
from tests.support.land import complete, land_repo, work
from tests.support.members import fake_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl

__all__ = ["BRANCH", "ENV", "TOKEN", "github", "landed_pull", "launch", "remote"]

TOKEN = "ghp_pulls-integration-5e1d"
ENV = "TEAMCTL_T_GH"
BRANCH = "teamctl/web/T1"


def remote(teamctl: Teamctl) -> tuple[Path, Path]:
    """The team's repository and its bare remote (GitHub's side of the push)."""
    repo = land_repo(teamctl.workdir / "repo")
    bare = teamctl.workdir / "remote.git"
    git(teamctl.workdir, "clone", "-q", "--bare", str(repo), str(bare))
    return repo, bare


def launch(teamctl: Teamctl, fake: FakeGitHub, bare: Path, *,
           member: dict[str, Any] | None = None, **forge: Any) -> None:
    """The team ``web``: one fake Claude ``dev`` in a worktree of the repository, its tasks
    landing through the merge queue, ``[forge]`` with intake, pull requests and a 5 s poll."""
    team = teamctl.write_team("web", [fake_member("dev", permissions="full", **(member or {}))],
                              workdir="repo", worktree=True, integrate={"check": "true"})
    keys = {"intake": {"label": "teamctl"}, "pull_requests": True, "remote": str(bare),
            "poll_interval": 5, **forge}
    table = "\n".join(f"{k} = {toml_value(v)}" for k, v in keys.items())
    team.write_text(team.read_text(encoding="utf-8") + (
        f'\n[forge]\ngithub = {{ repo = "octo-org/web", token_env = "{ENV}", '
        f'api = "{fake.url}" }}\n{table}\n'), encoding="utf-8")
    teamctl.env[ENV] = TOKEN  # the daemon started below inherits it
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stdout + done.stderr


def github(bare: Path) -> FakeGitHub:
    """The fake (not started: ``with`` it), the bare repository its remote, issue #1
    labelled."""
    fake = FakeGitHub(token=TOKEN, remote=bare)
    fake.add_label("teamctl")
    fake.add_issue("Fix the form", body="The form drops the error.", labels=("teamctl",))
    return fake


def landed_pull(teamctl: Teamctl, follow_logs: LogFollower, fake: FakeGitHub, *,
                written_back: bool = False) -> dict[str, Any]:
    """Issue #1 taken as T1, handed to dev (``written_back``: the claim commented on the
    issue before dev works), written, committed, completed, landed and opened as a pull
    request: the pull request as the fake holds it."""
    follow_logs.wait_for(lambda e: e["event"] == "forge_round" and e.get("created") == 1)
    asked = len(fake.state.requests)
    assert teamctl.run("task", "assign", "T1", "dev").returncode == 0
    if written_back:
        fake.wait_request(lambda r: r == ("POST", "/repos/octo-org/web/issues/1/comments", 201),
                          after=asked)
    work(teamctl, "dev", "form.txt", "the form")
    assert "mcp: " in complete(teamctl, "dev", 1, "the form keeps its error")
    opened = follow_logs.wait_for(lambda e: e["event"] == "forge_pull_opened"
                                  and e.get("task") == 1)
    pull = fake.pull_of(BRANCH)
    assert pull is not None and pull["number"] == opened["number"]
    return pull
