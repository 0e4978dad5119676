"""An OpenCode member's provider key as OpenCode reads it: literal, or ``{env:VAR}``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.contracts import LaunchSpec
from orchestrator.errors import RuntimeNotLoggedIn
from runtimes.hosts.local.host import LocalHost
from runtimes.opencode import runtime as opencode
from runtimes.opencode.provider import api_key_source, env_reference

if TYPE_CHECKING:
    from pathlib import Path


def _spec(tmp_path: Path, **fields: object) -> LaunchSpec:
    (tmp_path / "state").mkdir(exist_ok=True)
    base: dict[str, object] = {"team": "t", "member": "m", "executable": "/bin/x",
                               "model": "openrouter/z-ai/glm-4.5v", "prompt": None,
                               "workdir": tmp_path, "state_dir": tmp_path / "state",
                               "login": "isolated", "host": LocalHost()}
    return LaunchSpec(**(base | fields))  # type: ignore[arg-type]


def _provider(provider: str, key: str) -> dict[str, object]:
    return {"provider": {provider: {"options": {"apiKey": key}}}}


def test_opencode_env_reference_to_a_missing_variable_is_refused_at_launch(
        tmp_path: Path) -> None:
    """``apiKey = "{env:ROUTER_KEY}"`` is no credential when the member's env lacks ROUTER_KEY
    (OpenCode substitutes an empty string): refused with the variable named, not a 401 later."""
    spec = _spec(tmp_path, config=_provider("openrouter", "{env:ROUTER_KEY}"))
    with pytest.raises(RuntimeNotLoggedIn, match=r"\{env:ROUTER_KEY\}: set ROUTER_KEY"):
        opencode.check_login(spec)
    opencode.check_login(_spec(tmp_path, config=_provider("openrouter", "{env:ROUTER_KEY}"),
                               env={"ROUTER_KEY": "k"}))


def test_opencode_custom_provider_with_a_literal_or_present_key_starts(tmp_path: Path) -> None:
    opencode.check_login(_spec(tmp_path, config=_provider("openrouter", "sk-literal")))
    opencode.check_login(_spec(tmp_path, model="gateway/m",
                               config=_provider("gateway", "{env:GW}"), env={"GW": "k"}))
    with pytest.raises(RuntimeNotLoggedIn, match="set GW"):
        opencode.check_login(_spec(tmp_path, model="gateway/m",
                                   config=_provider("gateway", "{env:GW}")))


def test_api_key_source_says_where_the_key_comes_from() -> None:
    assert api_key_source({"apiKey": "sk"}, {}) == ""
    assert api_key_source({"apiKey": "{env:K}"}, {"K": "v"}) == ", from {env:K}"
    assert api_key_source({"apiKey": "{env:K}"}, {"K": ""}) is None
    assert api_key_source({}, {}) is None and api_key_source({"apiKey": 5}, {}) is None
    assert env_reference({"apiKey": "x{env:K}"}) is None
