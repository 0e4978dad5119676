"""The forge in a real daemon (docs/forge.md): a team file with ``[forge]`` launched against
the local fake of GitHub's REST API over HTTP on localhost (no real GitHub is reachable
here): a labelled issue — its title hostile — becomes a task on the board, ``teamctl status``
shows the forge's rounds and rate limit, and the token, in the daemon's environment only, is
in no answer and no log line."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.support.driver import LogFollower
from tests.support.fake_github import FakeGitHub
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

TOKEN = "ghp_integration-secret-7f3a"


def test_a_labelled_issue_becomes_a_task_in_a_real_daemon_and_the_token_stays_there(
        teamctl: Teamctl) -> None:
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_label("teamctl")
        fake.add_issue("\x1b]0;owned\x07Fix <b>the</b> form", body="steps\x1b[2J",
                       labels=("teamctl",))
        team = teamctl.write_team("web", [fake_member("dev")])
        team.write_text(team.read_text(encoding="utf-8") + (
            f'\n[forge]\ngithub = {{ repo = "octo-org/web", token_env = "TEAMCTL_T_GH", '
            f'api = "{fake.url}" }}\nintake = {{ label = "teamctl" }}\n'), encoding="utf-8")
        teamctl.env["TEAMCTL_T_GH"] = TOKEN  # the daemon started below inherits it
        follower = LogFollower(teamctl)
        try:
            done = teamctl.run("launch", str(team))
            assert done.returncode == 0, done.stdout + done.stderr
            follower.wait_for(lambda e: e["event"] == "forge_round" and e.get("created") == 1)
        finally:
            follower.close()
        listed = teamctl.json("task", "list", "--json")
        status = teamctl.run("status", "--json")
        shown = teamctl.run("task", "show", "T1")
        logs = "\n".join(json.dumps(e) for e in teamctl.log_events())
    [task] = listed["tasks"]
    assert task["title"] == "#1: \u241b]0;owned\u2407Fix <b>the</b> form"
    forge = json.loads(status.stdout)["teams"][0]["forge"]
    assert forge["repo"] == "octo-org/web" and forge["rounds"] >= 1 and forge["error"] is None
    assert forge["remaining"] is not None
    assert "\x1b" not in shown.stdout and "steps\u241b[2J" in shown.stdout
    for text in (status.stdout, shown.stdout, json.dumps(listed), logs):
        assert TOKEN not in text
    assert set(fake.state.auth_headers) == {f"Bearer {TOKEN}"}
