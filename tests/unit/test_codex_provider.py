"""The provider a Codex member runs with, as codex layers it: config file, profile, -c."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.contracts import LaunchSpec
from orchestrator.errors import RuntimeNotLoggedIn
from runtimes.codex import _shared as codex
from runtimes.codex.provider import apply_overrides, resolve_provider
from runtimes.hosts.local.host import LocalHost
from tests.support.driver import operator_home

if TYPE_CHECKING:
    from pathlib import Path

AZURE = {"model_provider": "azure",
         "model_providers": {"azure": {"base_url": "https://x.example/openai",
                                       "env_key": "AZURE_OPENAI_API_KEY"}}}


def _spec(tmp_path: Path, **fields: object) -> LaunchSpec:
    (tmp_path / "state").mkdir(exist_ok=True)
    base: dict[str, object] = {"team": "t", "member": "m", "executable": "/bin/x", "model": None,
                               "prompt": None, "workdir": tmp_path,
                               "state_dir": tmp_path / "state", "login": "isolated",
                               "host": LocalHost()}
    return LaunchSpec(**(base | fields))  # type: ignore[arg-type]


def test_codex_custom_provider_given_with_args_c_is_not_refused_at_launch(tmp_path: Path) -> None:
    """A provider chosen on the command line (``args = ["-c", 'model_provider="azure"', ...]``)
    with its ``env_key`` in the member's env starts: the preflight reads ``-c`` as codex does
    (it used to demand auth.json or CODEX_API_KEY)."""
    args = ("-c", 'model_provider="azure"',
            "-c", 'model_providers.azure.base_url="https://x.example/openai"',
            "--config", "model_providers.azure.env_key=AZURE_OPENAI_API_KEY")
    spec = _spec(tmp_path, args=args, env={"AZURE_OPENAI_API_KEY": "k"})
    codex.check_login(spec, codex.codex_member_home(spec))
    keyless = _spec(tmp_path, args=args)
    with pytest.raises(RuntimeNotLoggedIn, match="reads AZURE_OPENAI_API_KEY"):
        codex.check_login(keyless, codex.codex_member_home(keyless))


def test_codex_provider_from_the_operators_config_toml_is_honoured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``login = "operator"`` a provider in the operator's own ~/.codex/config.toml (with
    no auth.json at all) is the one checked."""
    home = operator_home(tmp_path / "op", logins=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    (home / ".codex").mkdir(exist_ok=True)
    (home / ".codex" / "config.toml").write_text(
        'model_provider = "gw"\n[model_providers.gw]\nenv_key = "GW_KEY"\n')
    spec = _spec(tmp_path, login="operator", env={"GW_KEY": "k"})
    codex.check_login(spec, codex.codex_member_home(spec))


def test_codex_profile_selects_the_provider() -> None:
    config = {"profile": "work", "profiles": {"work": {"model_provider": "azure"}},
              "model_providers": AZURE["model_providers"]}
    assert resolve_provider(config).env_key == "AZURE_OPENAI_API_KEY"
    assert resolve_provider({**config, "profile": None}, ("-p", "none")).id == "openai"
    assert resolve_provider(AZURE, ("--profile=x",)).id == "azure"


def test_codex_requires_openai_auth_provider_needs_the_login() -> None:
    provider = resolve_provider({}, ("-c", "model_provider=proxy",
                                     "-c", "model_providers.proxy.requires_openai_auth=true"))
    assert (provider.id, provider.env_key, provider.needs_openai_auth) == ("proxy", None, True)
    local = resolve_provider({}, ("-c", "model_provider=local"))
    assert not local.needs_openai_auth


def test_codex_overrides_keep_the_rest_of_a_table() -> None:
    """``-c model_providers.azure.env_key=X`` changes one key, not the whole table."""
    merged = apply_overrides(AZURE, ("-c", "model_providers.azure.env_key=OTHER", "-c", "=x",
                                     "-c"))
    assert merged["model_providers"]["azure"] == {"base_url": "https://x.example/openai",
                                                   "env_key": "OTHER"}
    assert AZURE["model_providers"]["azure"]["env_key"] == "AZURE_OPENAI_API_KEY"  # not mutated
