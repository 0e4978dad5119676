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
    assert team.resolved(lead).workdir == tmp_path / "src"


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
    name, host = config.resolved(config.members[0]).ssh_host or ("", None)
    assert host is not None and (name, host.user, host.port) == (
        "gpu1", "ci", 2222)
    assert config.resolved(config.members[0]).remote_workdir == "/srv/x"
    name, host = config.resolved(config.members[1]).ssh_host or ("", None)
    assert host is not None
    assert (name, host.address, host.user) == ("dev@10.0.0.2", "10.0.0.2", "dev")
    assert config.resolved(config.members[1]).remote_workdir is None, "the remote home"


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
    assert config.resolved(a).attach_paths == ["/home/op/shots", "/srv/docs"]
    assert config.resolved(b).attach_paths == []


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


def test_a_member_is_resolved_once_with_the_teams_defaults_and_its_own_keys_winning() -> None:
    """``TeamConfig.resolved``: the team's defaults applied (a member's own key wins, ``allow``
    and ``sandbox_hide`` add up), computed once and frozen."""
    import dataclasses
    from pathlib import Path

    from orchestrator.config import TeamConfig

    config = TeamConfig.model_validate({
        "team": {"name": "web", "workdir": "/srv", "permissions": "read", "claims": True,
                 "allow": ["Read"], "sandbox": "process", "sandbox_hide": ["/a"]},
        "members": [{"name": "lead", "runtime": "claude", "permissions": "full",
                     "allow": ["Write"], "sandbox_hide": ["/b"], "workdir": "x"},
                    {"name": "dev", "runtime": "claude", "claims": False}]})
    lead, dev = (config.resolved(m) for m in config.members)
    assert (lead.permissions, dev.permissions) == ("full", "read")
    assert (lead.claims, dev.claims) == (True, False)
    assert lead.allow == ["Read", "Write"] and lead.sandbox_paths["hide"] == ["/a", "/b"]
    assert lead.sandbox_shown == "process, network on" and lead.name == "lead"
    assert (lead.workdir, lead.other_workdirs) == (Path("/srv/x"), (Path("/srv"),))
    assert config.resolved(config.members[0]) is lead, "resolved once"
    with pytest.raises(dataclasses.FrozenInstanceError):
        lead.permissions = "read"  # type: ignore[misc]


@pytest.mark.parametrize(("team", "expected"), [
    ('integrate = { mode = "octopus" }', "team.integrate.mode"),
    ('integrate = { branch = "-x" }', "team.integrate.branch"),
    ('integrate = { branch = "a..b" }', "team.integrate.branch"),
    ('integrate = { branch = "a//b" }', "team.integrate.branch"),
    ('integrate = { branch = "a/.hidden" }', "team.integrate.branch"),
    ('integrate = { branch = "main.lock" }', "team.integrate.branch"),
    ('integrate = { branch = "x; rm -rf /" }', "team.integrate.branch"),
    ('integrate = { branch = "teamctl/<team>/a/work" }', "clashes with member a"),
    ('integrate = { branch = "teamctl/w/b" }', "clashes with member b"),
    ('integrate = { check = "make \\"test" }', "balance its quotes"),
    ('integrate = { check = "" }', "team.integrate.check"),
    ('integrate = { check_timeout = 0 }', "team.integrate.check_timeout"),
    ('integrate = { check_timeout = nan }', "team.integrate.check_timeout"),
    ('integrate = { bogus = 1 }', "team.integrate.bogus: unknown key"),
    ('integrate = "make test"', "team.integrate"),
    ('integrate_retries = 0', "team.integrate_retries"),
    ('integrate_retries = "3"', "team.integrate_retries"),
    ('integrate_retries = 1000', "team.integrate_retries"),
])
def test_hostile_merge_queue_settings_are_refused_naming_the_key(
        tmp_path: Path, team: str, expected: str) -> None:
    """``[team] integrate`` and ``integrate_retries`` (docs/land.md): an unknown key, a mode
    not listed, a branch git or a shell could misread or that would be a member's own branch
    (or its directory), a check that does not split, out-of-range numbers — each refused at
    launch with the file, the line and the key."""
    path = _write(tmp_path, _TWO.format(team=team, a="", b=""))
    with pytest.raises(TeamFileError) as info:
        load_team_file(path)
    assert str(path) in info.value.message
    assert expected in info.value.message, info.value.message


def test_the_integration_branch_defaults_to_the_teams_own() -> None:
    from orchestrator.config import TeamConfig
    config = TeamConfig.model_validate({"team": {"name": "w", "integrate": {}},
                                        "members": [{"name": "a", "runtime": "claude"}]})
    assert config.team.integrate is not None
    assert config.team.integrate.branch_of("w") == "teamctl/w/main"
    assert (config.team.integrate.mode, config.team.integrate_retries) == ("merge", 3)


@pytest.mark.parametrize(("value", "expected"), [
    ("2", "team.memory_reserve: 2 is not a size: write a size in quotes with its unit"),
    ("inf", "inf is not a size"), ("-1", "-1 is not a size"), ("true", "True is not a size"),
    ('"2"', "'2' is not a size"), ('"0"', "'0' is not a size"),
    ('"1073741824"', "is not a size"), ('"-1G"', "'-1G' is not a size"),
    ('"1e3G"', "'1e3G' is not a size"), ('"nan"', "'nan' is not a size"),
    ('"inf"', "'inf' is not a size"), ('""', "'' is not a size"), ('"0x10G"', "is not a size"),
    ('"\u0662G"', "is not a size"), ('"2iB"', "is not a size"), ('"2 GB B"', "is not a size"),
    ('"' + "9" * 40 + 'G"', "is not a size"), ('"2000T"', "is outside 0 B … 1 PiB"),
    ('["2G"]', "is not a size"), ('{ size = "2G" }', "is not a size"),
])
def test_hostile_memory_reserves_are_refused_naming_the_key_and_the_fix(
        tmp_path: Path, value: str, expected: str) -> None:
    """A ceiling's sizes (orchestrator/ceilings.py), 0 allowed: memory kept free."""
    path = _write(tmp_path, f'[team]\nname = "w"\nmemory_reserve = {value}\n[[members]]\n'
                  'name = "a"\nruntime = "claude"\n')
    with pytest.raises(TeamFileError) as info:
        load_team_file(path)
    assert f"{path}:3: team.memory_reserve: " in info.value.message
    assert expected in info.value.message, info.value.message


@pytest.mark.parametrize(("value", "size"), [
    (None, 2**30), ('"2G"', 2 * 2**30), ('"512M"', 512 * 2**20), ('"1.5G"', 3 * 2**29),
    ('"2GiB"', 2 * 2**30), ('"2GB"', 2 * 2**30), ('"2 g"', 2 * 2**30), ('"64K"', 65536),
    ('"0M"', 0), ('"1T"', 2**40)])
def test_a_memory_reserve_is_a_size_in_powers_of_1024_one_gib_by_default(
        tmp_path: Path, value: str | None, size: int) -> None:
    line = "" if value is None else f"memory_reserve = {value}\n"
    team = load_team_file(_write(tmp_path, f'[team]\nname = "w"\n{line}[[members]]\n'
                                 'name = "a"\nruntime = "claude"\n'))
    assert team.team.memory_reserve_bytes == size


@pytest.mark.parametrize(("team", "a", "expected"), [
    # pause_after (docs/scaling.md, "Idle members asleep"): a number of seconds, 0 to 30 days
    ('pause_after = "900"', "", "team.pause_after"),
    ('pause_after = -1', "", "team.pause_after"),
    ('pause_after = nan', "", "team.pause_after"),
    ('pause_after = inf', "", "team.pause_after"),
    ('pause_after = 1e12', "", "team.pause_after"),
    ('pause_after = true', "", "team.pause_after"),
    ("", 'pause_after = "soon"', "members[0].pause_after"),
    ("", 'pause_after = -0.5', "members[0].pause_after"),
    ("", 'pause_after = [1]', "members[0].pause_after"),
    # max_running: a whole number of members' processes, 1 to 10000
    ('max_running = 0', "", "team.max_running"),
    ('max_running = -3', "", "team.max_running"),
    ('max_running = 2.5', "", "team.max_running"),
    ('max_running = "10"', "", "team.max_running"),
    ('max_running = true', "", "team.max_running"),
    ('max_running = 100001', "", "team.max_running"),
    ("", "max_running = 2", "members[0].max_running: unknown key"),  # a team's key only
])
def test_hostile_sleep_settings_are_refused_naming_file_line_key_and_fix(
        tmp_path: Path, team: str, a: str, expected: str) -> None:
    """``pause_after`` and ``max_running`` refuse a string, a negative, NaN, infinity, a bool,
    a fraction where a count goes, past their bound — naming the file, the line, the key and
    what the key takes."""
    path = _write(tmp_path, _TWO.format(team=team, a=a, b=""))
    with pytest.raises(TeamFileError) as info:
        load_team_file(path)
    message = info.value.message
    assert f"{path}:" in message and expected in message, message
    if "unknown key" not in expected:
        key = expected.rpartition(".")[2]
        assert f"e.g. {key} = " in message, "the fix says what the key takes"


def test_pause_after_is_the_members_own_else_its_pod_hosts_else_its_teams(
        tmp_path: Path) -> None:
    """A member's ``pause_after`` wins (0: never), then its Kubernetes host's (that host's
    default for its members), then the team's; none anywhere: never."""
    from orchestrator.config import TeamConfig

    pod = {"kind": "kubernetes", "image": "img:1", "pause_after": 60}
    member = {"runtime": "claude", "login": "isolated"}
    config = TeamConfig.model_validate({
        "team": {"name": "w", "workdir": str(tmp_path), "pause_after": 900,
                 "max_running": 3},
        "hosts": {"k8s": pod},
        "members": [{"name": "own", "pause_after": 5, **member},
                    {"name": "never", "pause_after": 0, **member},
                    {"name": "pod", "host": "k8s", **member},
                    {"name": "pod_own", "host": "k8s", "pause_after": 0, **member},
                    {"name": "team", **member}]})
    assert [config.resolved(m).pause_after for m in config.members] == [5, None, 60, None, 900]
    assert config.team.max_running == 3
    alone = TeamConfig.model_validate({"team": {"name": "w", "workdir": str(tmp_path)},
                                       "members": [{"name": "a", "runtime": "claude"}]})
    assert alone.resolved(alone.members[0]).pause_after is None
    assert alone.team.max_running is None
