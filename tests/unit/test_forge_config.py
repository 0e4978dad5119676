"""The team file's ``[forge]`` keys (docs/forge.md): what is taken, and every hostile value
refused at load, naming the file, the key and the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.config import load_team_file
from orchestrator.errors import TeamFileError

if TYPE_CHECKING:
    from pathlib import Path

_MEMBERS = '\n[[members]]\nname = "dev"\nruntime = "claude"\n'


def _write(tmp_path: Path, forge: str) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "web"\n\n[forge]\n{forge}\n{_MEMBERS}', encoding="utf-8")
    return path


def test_a_forge_section_is_read_with_its_defaults(tmp_path: Path) -> None:
    config = load_team_file(_write(tmp_path, 'github = { repo = "octo-org/web.site" }\n'
                                   'intake = { label = "teamctl" }\nwrite_back = true'))
    assert config.forge is not None
    assert config.forge.github.repo == "octo-org/web.site"
    assert config.forge.github.token_env == "GITHUB_TOKEN"
    assert config.forge.github.api == "https://api.github.com"
    assert config.forge.intake is not None and config.forge.intake.state == "open"
    assert config.forge.write_back is True and config.forge.pull_requests is False
    assert config.forge.ci_retries == 3


def test_an_enterprise_api_url_is_taken_without_its_trailing_slash(tmp_path: Path) -> None:
    config = load_team_file(_write(tmp_path, 'github = { repo = "a/b", api = '
                                   '"https://ghe.example.com/api/v3/" }'))
    assert config.forge is not None
    assert config.forge.github.api == "https://ghe.example.com/api/v3"


@pytest.mark.parametrize(("forge", "key", "fix"), [
    ('github = { repo = "octo-org" }', "forge.github.repo", '"owner/name"'),
    ('github = { repo = "-bad/web" }', "forge.github.repo", '"owner/name"'),
    ('github = { repo = "a/../etc" }', "forge.github.repo", '"owner/name"'),
    ('github = { repo = "a/web.git" }', "forge.github.repo", "without"),
    ('github = { repo = "a/b c" }', "forge.github.repo", '"owner/name"'),
    ('github = { repo = "a/b", token_env = "X;rm -rf" }', "forge.github.token_env", ""),
    ('github = { repo = "a/b", token_env = "ghp_abc-literal-token" }',
     "forge.github.token_env", ""),
    ('github = { repo = "a/b", api = "file:///etc/passwd" }', "forge.github.api", "http(s)"),
    ('github = { repo = "a/b", api = "https://user:pw@ghe.example.com" }', "forge.github.api",
     "without credentials"),
    ('github = { repo = "a/b", api = "https://x.example?token=1" }', "forge.github.api",
     "query"),
    ('github = { repo = "a/b", token = "ghp_x" }', "forge.github.token", "unknown key"),
    ('github = { repo = "a/b" }\nintake = { label = "a\\u0007b" }', "forge.intake.label",
     "control characters"),
    ('github = { repo = "a/b" }\nintake = { label = "a,b" }', "forge.intake.label", "commas"),
    ('github = { repo = "a/b" }\nintake = { state = "closed" }', "forge.intake.state", ""),
    ('github = { repo = "a/b" }\nwrite_back = "yes"', "forge.write_back", ""),
    ('github = { repo = "a/b" }\nci_retries = -1', "forge.ci_retries", ""),
    ('github = { repo = "a/b" }\nci_retries = 1000', "forge.ci_retries", ""),
    ('github = { repo = "a/b" }\npoll_interval = 0.1', "forge.poll_interval", ""),
    ('github = { repo = "a/b" }\ngitlab = { repo = "a/b" }', "forge.gitlab", "unknown key"),
    ('intake = { label = "x" }', "forge.github", ""),
    # where a task's branch is pushed (pull requests): never an option git would read
    ('github = { repo = "a/b" }\nremote = "--upload-pack=touch /tmp/x"', "forge.remote",
     "not starting with '-'"),
    ('github = { repo = "a/b" }\nremote = "a b"', "forge.remote", "one word"),
    ('github = { repo = "a/b" }\nremote = "x\\u001b[2J"', "forge.remote", "one word"),
    ('github = { repo = "a/b" }\nremote = ""', "forge.remote", "one word"),
])
def test_a_hostile_forge_value_is_refused_naming_file_key_and_fix(
        tmp_path: Path, forge: str, key: str, fix: str) -> None:
    path = _write(tmp_path, forge)
    with pytest.raises(TeamFileError) as caught:
        load_team_file(path)
    text = str(caught.value)
    assert str(path) in text
    assert f"{key}:" in text
    assert fix in text


@pytest.mark.parametrize("member", ['pass_env = ["GH_TOKEN_X"]', 'env = { GH_TOKEN_X = "x" }'])
def test_no_member_may_be_handed_the_forges_token(tmp_path: Path, member: str) -> None:
    path = tmp_path / "team.toml"
    path.write_text('[team]\nname = "web"\n\n[forge]\ngithub = { repo = "a/b", token_env = '
                    f'"GH_TOKEN_X" }}\n{_MEMBERS}{member}\n', encoding="utf-8")
    with pytest.raises(TeamFileError) as caught:
        load_team_file(path)
    assert "GH_TOKEN_X holds the forge's token" in str(caught.value)
    assert "remove it from" in str(caught.value)
