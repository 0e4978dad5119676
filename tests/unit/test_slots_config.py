"""The team file's ``[team] slots``: each kind parsed, every hostile value refused naming the
file, the line, the key and the fix; the names made for a member's ``name`` slot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.config import load_team_file
from orchestrator.errors import TeamFileError
from orchestrator.slots_config import (
    DEFAULT_PORTS,
    MAX_NAME_CHARS,
    RESERVED_NAMES,
    RESERVED_PREFIXES,
    SlotKind,
    check_slot_var,
    name_base,
    parse_slot,
)
from runtimes.kit.base import BASE_ENV_NAMES

if TYPE_CHECKING:
    from pathlib import Path


def _team(tmp_path: Path, slots: str, member: str = "") -> Path:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "web"\nslots = {slots}\n\n[[members]]\nname = "lead"\n'
                    f'runtime = "claude"\n{member}')
    return path


def test_each_kind_is_parsed_with_its_range_or_prefix() -> None:
    assert parse_slot("port") == SlotKind("port", *DEFAULT_PORTS)
    assert parse_slot("port:3000-3999") == SlotKind("port", 3000, 3999)
    assert parse_slot("port:65535-65535") == SlotKind("port", 65535, 65535)
    assert parse_slot("index:0-15") == SlotKind("index", 0, 15)
    assert parse_slot("name") == SlotKind("name")
    assert parse_slot("name:test") == SlotKind("name", prefix="test")
    assert parse_slot("index:0-15").size == 16


def test_a_team_file_with_slots_loads_them_as_written(tmp_path: Path) -> None:
    config = load_team_file(_team(
        tmp_path, '{ PORT = "port", DB_NAME = "name", REDIS_DB = "index:0-15" }'))
    assert config.team.slots == {"PORT": "port", "DB_NAME": "name", "REDIS_DB": "index:0-15"}
    assert load_team_file(_team(tmp_path, "{}")).team.slots == {}


@pytest.mark.parametrize(("slots", "expected"), [
    ('{ PORT = "bogus" }', 'team.slots.PORT: \'bogus\' is not a kind of slot; use one of '
                           '"port", "port:3000-3999", "name", "name:PREFIX", "index:0-15"'),
    ('{ PORT = "port:0-65536" }', "team.slots.PORT: ports run from 1024 to 65535; 0-65536 goes "
                                  "past them (e.g. port:3000-3999)"),
    ('{ PORT = "port:80-90" }', "ports run from 1024 to 65535"),
    ('{ PORT = "port:3999-3000" }', "team.slots.PORT: the range 3999-3000 runs backwards; "
                                    "write FIRST-LAST, e.g. 3000-3999"),
    ('{ PORT = "port:3000" }', "'3000' is not a range; write FIRST-LAST, e.g. port:3000-3999"),
    ('{ PORT = "port: 3000-3999" }', "is not a range"),
    ('{ PORT = "port:-1-5" }', "is not a range"),
    ('{ PORT = "port:+3000-3999" }', "is not a range"),
    ('{ PORT = "port:３０００-３９９９" }', "is not a range"),  # full-width digits
    ('{ REDIS_DB = "index" }', "team.slots.REDIS_DB: an index needs its range: "
                               "index:FIRST-LAST, e.g. index:0-15"),
    ('{ REDIS_DB = "index:15-0" }', "the range 15-0 runs backwards"),
    ('{ REDIS_DB = "index:0-2147483648" }', "indexes run from 0 to 2147483647"),
    ('{ REDIS_DB = "index:0-99999999999" }', "is not a range"),
    ('{ DB = "name:Test" }', "team.slots.DB: name:'Test': a prefix is a lower-case letter"),
    ('{ DB = "name:a-b" }', "a prefix is a lower-case letter"),
    ('{ DB = "name:" }', "a prefix is a lower-case letter"),
    ('{ DB = "name:' + "a" * 33 + '" }', "a prefix is a lower-case letter"),
    ('{ A = "name", B = "name" }', "team: slots: A and B would give each member the same "
                                   'name; give one a prefix, e.g. B = "name:test"'),
    ('{ A = "name:x", B = "name:x" }', "A and B would give each member the same name"),
    ('{ PORT = 8080 }', "team.slots.PORT: Input should be a valid string"),
    ('{ PORT = "' + "port:1024-2048" * 4 + '" }', "team.slots.PORT: String should have at "
                                                  "most 40 characters"),
    ('{ port = "port" }', "team.slots.port: 'port' is not a variable name for slots: "
                          "capitals, digits and '_'"),
    ('{ "1PORT" = "port" }', "'1PORT' is not a variable name for slots"),
    ('{ "MY-PORT" = "port" }', "'MY-PORT' is not a variable name for slots"),
    ('{ "" = "port" }', "'' is not a variable name for slots"),
    ('{ "P\\u0130RT" = "port" }', "is not a variable name for slots"),  # a dotted capital I
    ('{ ' + "P" * 65 + ' = "port" }', "is not a variable name for slots"),
    ('{ TEAMCTL_PORT = "port" }', "team.slots.TEAMCTL_PORT: TEAMCTL_PORT is set by teamctl or "
                                  "the member's runtime (reserved: TEAMCTL_*"),
    ('{ PATH = "port" }', "PATH is set by teamctl or the member's runtime"),
    ('{ HOME = "name" }', "HOME is set by teamctl or the member's runtime"),
    ('{ CODEX_HOME = "name" }', "CODEX_HOME is set by teamctl"),
    ('{ XDG_DATA_HOME = "name" }', "XDG_DATA_HOME is set by teamctl"),
    ('{ LD_PRELOAD = "port" }', "LD_PRELOAD is set by teamctl"),
    ('{ TMPDIR = "name" }', "TMPDIR is set by teamctl"),
    ("{ " + ", ".join(f'P{i} = "port"' for i in range(17)) + " }",
     "team.slots: Dictionary should have at most 16 items after validation, not more "
     "(remove some)"),
    ('"port"', "team.slots: Input should be a valid dictionary"),
])
def test_hostile_slots_are_refused_naming_the_file_line_key_and_fix(
        tmp_path: Path, slots: str, expected: str) -> None:
    path = _team(tmp_path, slots)
    with pytest.raises(TeamFileError) as caught:
        load_team_file(path)
    assert f"{path}:3: " in caught.value.message or f"{path}:1: " in caught.value.message
    assert expected in caught.value.message


@pytest.mark.parametrize(("member", "expected"), [
    ('env = { PORT = "3000" }', "members[0].env: PORT is a slot of the team ([team] slots "
                                "gives each member its own); remove it from env, or from slots"),
    ('pass_env = ["PORT"]', "members[0].pass_env: PORT is a slot of the team"),
])
def test_a_slot_the_members_own_env_also_sets_is_refused_never_silently_chosen(
        tmp_path: Path, member: str, expected: str) -> None:
    """A variable is the team's slot or the member's own, never both: one of the two values
    would be unused without a word."""
    with pytest.raises(TeamFileError, match="invalid team file") as caught:
        load_team_file(_team(tmp_path, '{ PORT = "port" }', member))
    assert expected in caught.value.message


def test_every_variable_teamctl_or_a_runtime_sets_is_reserved() -> None:
    """What a member inherits, and what the adapters set beside its env, can never be a
    slot: a slot would override it (or be overridden) without a word."""
    set_by_adapters = {"CODEX_HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR", "TMPDIR",
                       "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME",
                       "XDG_STATE_HOME", "OPENCODE_CONFIG_CONTENT", "OPENCODE_CONFIG_DIR",
                       "OPENCODE_SERVER_PASSWORD", "TEAMCTL_MEMBER_TOKEN", "TEAMCTL_MCP_HOME",
                       "IS_SANDBOX", "ENABLE_TOOL_SEARCH", "HOME"}
    upper = {name for name in BASE_ENV_NAMES if name.isupper()}
    for name in upper | set_by_adapters:
        with pytest.raises(ValueError, match="set by teamctl"):
            check_slot_var(name)
    assert upper <= RESERVED_NAMES
    assert check_slot_var("PORT") == "PORT"
    assert all(p.endswith("_") for p in RESERVED_PREFIXES)


def test_a_members_name_is_lower_case_sql_safe_and_at_most_63_characters() -> None:
    assert name_base(None, "web", "lead") == "web_lead"
    assert name_base("test", "Web-App", "Lead.1") == "test_web_app_lead_1"
    assert name_base(None, "9lives", "a") == "t9lives_a"
    long_a, long_b = name_base(None, "t" * 64, "a" * 64), name_base(None, "t" * 64, "a" * 63)
    assert len(long_a) == len(long_b) == MAX_NAME_CHARS
    assert long_a != long_b  # cut alike, kept apart by the hash of the whole
    assert all(c.islower() or c.isdigit() or c == "_" for c in long_a)
