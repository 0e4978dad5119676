"""The team file: defaults, paths relative to the file, and errors naming file, line and key."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.config import load_team_file
from orchestrator.errors import TeamFileError

if TYPE_CHECKING:
    from pathlib import Path


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(text)
    return path


def test_defaults_and_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    path = _write(tmp_path, '[team]\nname = "web"\nworkdir = "src"\n\n[[members]]\n'
                  'name = "lead"\nruntime = "claude"\ncommand = "bin/claude"\n')
    team = load_team_file(path)
    [lead] = team.members
    assert team.team.workdir == str(tmp_path / "src")
    assert lead.command == str(tmp_path / "bin" / "claude")
    assert (lead.restart, lead.backoff, lead.max_restarts) == ("on-failure", (1.0, 60.0), 5)
    assert (lead.start_timeout, lead.turn_idle_timeout, lead.restart_window) == (60.0, 600.0,
                                                                                 300.0)
    assert team.member_workdir(lead) == tmp_path / "src"


def test_command_on_path_is_left_alone(tmp_path: Path) -> None:
    path = _write(tmp_path, '[team]\nname = "w"\n[[members]]\nname = "a"\nruntime = "codex"\n'
                  'command = "codex"\n')
    assert load_team_file(path).members[0].command == "codex"


@pytest.mark.parametrize(("text", "expected"), [
    ('[team]\nname = "w"\n[[members]]\nname = "a"\nruntime = "claude"\nbogus = 1\n',
     ":6: members[0].bogus: unknown key"),
    ('[team]\nname = "bad name"\n[[members]]\nname = "a"\nruntime = "claude"\n',
     ":2: team.name:"),
    ('[team]\nname = "w"\ncolour = "red"\n[[members]]\nname = "a"\nruntime = "claude"\n',
     ":3: team.colour: unknown key"),
    ('[team]\nname = "w"\n[[members]]\nname = "a"\nruntime = "claude"\n'
     'backoff = [60.0, 1.0]\n', "members[0]"),
    ('[team]\nname = "w"\n', "members: Field required"),
    ('[team]\nname = "w"\n[[members]]\nname = "a"\nruntime = "claude"\n'
     'restart = "sometimes"\n', ":6: members[0].restart"),
    ('[team]\nname = "w"\n[[members]]\nname = "a"\nruntime = "claude"\n'
     '[members.config]\nx = 1\n[[members]]\nname = "b"\nruntime = "gpt"\n',
     ":10: members[1].runtime"),
])
def test_errors_name_file_line_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(TeamFileError) as info:
        load_team_file(path)
    assert str(path) in info.value.message
    assert expected in info.value.message
    assert info.value.exit_code == 2


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TeamFileError, match="cannot read it"):
        load_team_file(tmp_path / "nope.toml")


_REMOTE = '[team]\nname = "w"\n[[members]]\nname = "a"\nruntime = "claude"\n'


@pytest.mark.parametrize(("extra", "expected"), [
    ('host = "-oProxyCommand=touch /tmp/x"\n', "members[0].host"),
    ('host = "dev@box; rm"\n', "members[0].host"),
    ('host = "gpu1"\n[hosts.gpu1]\naddress = "10.0.0.1"\nssh_options = ["ProxyCommand sh"]\n',
     "hosts.gpu1.ssh_options[0]"),
    ('host = "gpu1"\n[hosts.gpu1]\naddress = "-x"\n', "hosts.gpu1.address"),
    ('host = "gpu1"\n[hosts.gpu1]\naddress = "10.0.0.1"\nport = 0\n', "hosts.gpu1.port"),
    ('host = "gpu1"\nworktree = true\n[hosts.gpu1]\naddress = "10.0.0.1"\n',
     "set worktree = false for it"),
])
def test_hostile_host_settings_are_refused(tmp_path: Path, extra: str, expected: str) -> None:
    path = _write(tmp_path, _REMOTE + extra)
    with pytest.raises(TeamFileError) as info:
        load_team_file(path)
    assert expected in info.value.message, info.value.message


def test_hosts_resolve_to_their_settings(tmp_path: Path) -> None:
    path = _write(tmp_path, _REMOTE + 'host = "gpu1"\nworkdir = "/srv/x"\n[[members]]\n'
                  'name = "b"\nruntime = "codex"\nhost = "dev@10.0.0.2"\n[hosts.gpu1]\n'
                  'address = "10.0.0.1"\nuser = "ci"\nport = 2222\nworkdir = "/srv"\n')
    config = load_team_file(path)
    name, host = config.member_host(config.members[0]) or ("", None)
    assert host is not None and (name, host.user, host.port) == (
        "gpu1", "ci", 2222)
    assert config.remote_workdir(config.members[0]) == "/srv/x"
    name, host = config.member_host(config.members[1]) or ("", None)
    assert host is not None
    assert (name, host.address, host.user) == ("dev@10.0.0.2", "10.0.0.2", "dev")
    assert config.remote_workdir(config.members[1]) is None, "the remote home"


@pytest.mark.parametrize(("extra", "expected"), [
    # the board's member keys (docs/board.md)
    ('role = "back end"\n', "members[0].role"),
    ('role = "' + "r" * 65 + '"\n', "members[0].role"),
    ('lead = "maybe"\n', "members[0].lead"),
    ('claims = 1.5\n', "members[0].claims"),
    ('max_tasks = 0\n', "members[0].max_tasks"),
    ('max_tasks = 101\n', "members[0].max_tasks"),
    ('max_tasks = "1; rm -rf /"\n', "members[0].max_tasks"),
    # ACP
    ('acp_agent = "../../bin/sh"\n', "members[0].acp_agent"),
    ('acp_agent = "qwen"\n', "members[0]"),  # a preset on a runtime that takes none
    # documents (docs/documents.md)
    ('documents = "all"\n', "members[0].documents"),
    ('document_pages = { native = 0 }\n', "members[0].document_pages.native"),
    ('document_pages = { rendered = 1000 }\n', "members[0].document_pages.rendered"),
    ('document_pages = { native = 10, pages = 5 }\n', "members[0].document_pages.pages"),
    # [board]
    ('[board]\ntask_grace = -1\n', "board.task_grace"),
    ('[board]\ntask_grace = nan\n', "board.task_grace"),
    ('[board]\ncheck = "make \\"test"\n', "balance its quotes"),
    ('[board]\ncheck = ""\n', "board.check"),
    ('[board]\ncheck_timeout = 0\n', "board.check_timeout"),
    ('[board]\nreview_by = "a b"\n', "board.review_by"),
    ('[board]\noffer_cooldown = inf\n', "board.offer_cooldown"),
    ('[board]\nbogus = 1\n', "board.bogus: unknown key"),
])
def test_hostile_board_acp_and_document_settings_are_refused_naming_the_key(
        tmp_path: Path, extra: str, expected: str) -> None:
    """Every key the third round added refuses a bad value with the file, line and key — a
    string where a number goes, out of range, NaN and infinity, a shell line, a path."""
    text = _REMOTE + extra if not extra.startswith("[board]") else (
        '[team]\nname = "w"\n' + extra + '[[members]]\nname = "a"\nruntime = "claude"\n')
    path = _write(tmp_path, text)
    with pytest.raises(TeamFileError) as info:
        load_team_file(path)
    assert str(path) in info.value.message
    assert expected in info.value.message, info.value.message


_TWO = ('[team]\nname = "w"\n{team}\n[[members]]\nname = "a"\nruntime = "claude"\n{a}\n'
        '[[members]]\nname = "b"\nruntime = "claude"\n{b}\n')


def test_attach_paths_are_absolute_or_home_and_a_members_own_wins(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    """``attach_paths`` (docs/attachments.md): ``~`` is the operator's home, ``..`` folded; a
    member's key replaces the team's (``[]``: none)."""
    monkeypatch.setenv("HOME", "/home/op")
    config = load_team_file(_write(tmp_path, _TWO.format(
        team='attach_paths = ["~/shots", "/srv/x/../docs"]', a="", b="attach_paths = []")))
    a, b = config.members
    assert config.member_attach_paths(a) == ["/home/op/shots", "/srv/docs"]
    assert config.member_attach_paths(b) == []


@pytest.mark.parametrize(("team", "a", "expected"), [
    ("", 'attach_paths = ["shots"]', "members[0].attach_paths[0]"),
    ("", 'attach_paths = ["~other/x"]', "is not absolute"),
    ("", 'sandbox = "process"\nattach_paths = ["/srv"]',
     "members[0].attach_paths: a sandboxed member attaches what its sandbox shows it"),
    ('attach_paths = ["/srv"]', 'sandbox = "process"',
     "members[0].attach_paths (the team's): a sandboxed member"),
    ("", 'host = "dev@box"\nattach_paths = ["/srv"]',
     "members[0].attach_paths: a member on another host"),
])
def test_attach_paths_that_would_grant_nothing_or_are_not_absolute_are_refused(
        tmp_path: Path, team: str, a: str, expected: str) -> None:
    """A grant a sandboxed member or a member elsewhere could never use is an error, not a
    setting silently ignored; a relative path would be the daemon's cwd's."""
    with pytest.raises(TeamFileError) as info:
        load_team_file(_write(tmp_path, _TWO.format(team=team, a=a, b="")))
    assert expected in info.value.message, info.value.message
