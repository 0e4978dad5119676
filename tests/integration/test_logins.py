"""Logins with the real daemon and the fake CLIs: the operator's own login by default, an
isolated member with its env credentials, and a member that is not logged in failing at launch
with the fix — never a failed first message, never a restart loop, never a copied token."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.members import FAKE_CLAUDE, codex_member, fake_member, opencode_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

OPERATOR_TOKENS = ["sk-ant-oat01-FAKE-OPERATOR-ACCESS", "sk-ant-ort01-FAKE-OPERATOR-REFRESH",
                   "sk-proj-FAKE-OPERATOR-CODEX-KEY", "sk-FAKE-OPERATOR-OPENROUTER"]


def test_every_runtime_uses_the_operators_login_without_a_copy(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [
        fake_member("lead"), codex_member("rev"),
        opencode_member("des", model="openrouter/z-ai/glm-4.5v")])
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stdout + done.stderr
    for member in ("lead", "rev", "des"):
        assert teamctl.run("send", member, "hello", "--wait").returncode == 0, member
    for directory, _dirs, files in os.walk(teamctl.home):
        for name in files:
            path = Path(directory) / name
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                assert not [t for t in OPERATOR_TOKENS if t.encode() in data], path


def test_a_member_that_is_not_logged_in_fails_at_launch_with_the_fix(teamctl: Teamctl) -> None:
    shutil.rmtree(Path(teamctl.env["HOME"]) / ".claude")
    team = teamctl.write_team("web", [fake_member("lead"), fake_member(
        "solo", login="isolated", env={"ANTHROPIC_API_KEY": "sk-ant-api03-solo-member-key"})])
    done = teamctl.run("launch", str(team))
    assert done.returncode == 1
    assert "lead: member 'lead' did not start: claude is not logged in for this member: " \
           "log in with 'claude /login'" in done.stdout
    rows = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    assert rows["lead"]["launch"] == "fatal" and rows["lead"]["restarts"] == 0
    assert rows["solo"]["readiness"] == "ready", "an isolated member with its own key runs"
    failed = [e for e in teamctl.log_events() if e["event"] == "member_start_failed"]
    assert [e["code"] for e in failed] == ["runtime_not_logged_in"]


def test_a_codex_login_in_the_os_keyring_is_explained(teamctl: Teamctl) -> None:
    codex_dir = Path(teamctl.env["HOME"]) / ".codex"
    (codex_dir / "auth.json").unlink()
    (codex_dir / "config.toml").write_text('cli_auth_credentials_store = "keyring"\n')
    done = teamctl.run("launch", str(teamctl.write_team("web", [codex_member("rev")])))
    assert done.returncode == 1
    assert "kept in the OS keyring" in done.stdout and "CODEX_API_KEY" in done.stdout


def test_a_read_profile_refusal_shows_in_history_and_the_logs(teamctl: Teamctl) -> None:
    """Headless Claude's refusals ended the turn "success" and vanished: now each is a
    `permission_denied` event and a line in that message's history."""
    team = teamctl.write_team("web", [fake_member("reader", permissions="read"),
                                      fake_member("editor")])
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "reader", "WRITE notes.txt not allowed", "--wait").returncode == 0
    assert teamctl.run("send", "editor", "WRITE notes.txt allowed", "--wait").returncode == 0
    assert (teamctl.workdir / "notes.txt").read_text() == "allowed\n", "only the editor wrote"
    [message] = teamctl.json("history", "reader")["messages"]
    assert message["state"] == "answered"
    [note] = message["notes"]
    assert note.startswith(f"permission denied: Write {teamctl.workdir / 'notes.txt'}: ")
    assert "~ permission denied: Write" in teamctl.run("history", "reader").stdout
    [event] = [e for e in teamctl.log_events() if e["event"] == "permission_denied"]
    assert (event["member"], event["tool"]) == ("reader", "Write")
    assert teamctl.json("history", "editor")["messages"][0]["notes"] == []


def test_doctor_shows_which_credential_each_member_will_use(teamctl: Teamctl) -> None:
    secret = "sk-ant-api03-DOCTOR-NEVER-SHOWS-THIS"
    team = teamctl.write_team("web", [
        fake_member("lead"), fake_member("solo", login="isolated",
                                         env={"ANTHROPIC_API_KEY": secret}),
        codex_member("rev"), opencode_member("des", model="openrouter/z-ai/glm-4.5v"),
        codex_member("nobody", login="isolated")])
    done = teamctl.run("doctor", str(team), "--json")
    assert done.returncode == 1, "a member that cannot start (nobody: no login) fails doctor"
    assert secret not in done.stdout
    rows = {r["member"]: r for r in json.loads(done.stdout)["members"]}
    assert rows["lead"]["credential"] == "subscription login (max)"
    assert rows["lead"]["source"].endswith(".claude/.credentials.json")
    assert (rows["solo"]["credential"], rows["solo"]["source"]) == (
        "API key", "the member's env ANTHROPIC_API_KEY")
    assert rows["rev"]["credential"] == "apikey login"
    assert "linked, never copied" in rows["rev"]["source"]
    assert rows["des"]["credential"] == "api login (openrouter)"
    assert rows["nobody"]["credential"] == "none"
    assert [r["member"] for r in rows.values() if r["problem"]] == ["nobody"]
    assert "codex login" in rows["nobody"]["fix"]
    text = teamctl.run("doctor", str(team)).stdout
    assert "lead" in text and "subscription login (max)" in text


def test_doctor_uses_each_members_command_and_fails_when_one_cannot_start(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """doctor TEAMFILE runs each member's own ``command`` (not the default name on PATH),
    prints its version, and exits 1 naming a member whose command is missing, with the fix."""
    team = teamctl.write_team("web", [
        fake_member("lead"), fake_member("ghost", command=str(tmp_path / "no-such-claude"))])
    done = teamctl.run("doctor", str(team), "--json")
    assert done.returncode == 1
    rows = {r["member"]: r for r in json.loads(done.stdout)["members"]}
    assert rows["lead"]["path"] == str(FAKE_CLAUDE) and rows["lead"]["problem"] is None
    assert rows["lead"]["version"] == "2.1.332 (Claude Code)"
    assert rows["ghost"]["path"] is None and "is not found" in rows["ghost"]["problem"]
    text = teamctl.run("doctor", str(team))
    assert text.returncode == 1
    assert "member ghost cannot start" in text.stderr and "set command" in text.stderr
    ok = teamctl.run("doctor", str(teamctl.write_team("web", [fake_member("lead")])))
    assert ok.returncode == 0, ok.stderr
