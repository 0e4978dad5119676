"""Which model provider a Codex member really runs with, and the credential it reads.

Codex layers its configuration: the config file (the operator's ``config.toml`` under an
operator login, the member's ``config`` table over it), then a ``--profile``/``-p`` profile's
keys, then every ``-c``/``--config key=value`` override on the command line (the value parsed as
TOML, else taken as a string — codex's own rule). A provider of ``model_providers.X`` names the
variable it reads in ``env_key`` (Azure, a gateway, a local model), or needs the OpenAI login
(``requires_openai_auth``); the built-in ``openai`` provider reads the login or
``CODEX_API_KEY``. The preflight and ``teamctl doctor`` both ask this module, so they agree with
each other and with codex. Standard library only.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Provider", "apply_overrides", "merged_config", "resolve_provider"]


@dataclass(frozen=True)
class Provider:
    """The provider codex will use: its id, the variable it reads (if any), and whether it
    needs the OpenAI login (``auth.json`` or ``CODEX_API_KEY``)."""

    id: str
    env_key: str | None
    needs_openai_auth: bool


def _override(arg: str) -> tuple[list[str], Any] | None:
    key, sep, raw = arg.partition("=")
    if not sep or not key.strip():
        return None
    try:
        value: Any = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # codex takes a value that is not TOML as a literal string
    return [part.strip() for part in key.split(".")], value


def _overrides_and_profile(args: Sequence[str]) -> tuple[list[tuple[list[str], Any]], str | None]:
    overrides: list[tuple[list[str], Any]] = []
    profile: str | None = None
    items = iter(args)
    for arg in items:
        if arg in ("-c", "--config", "-p", "--profile"):
            value = next(items, "")
        elif arg.startswith(("--config=", "--profile=")):
            arg, _, value = arg.partition("=")
        else:
            continue
        if arg in ("-p", "--profile"):
            profile = value or profile
        elif (parsed := _override(value)) is not None:
            overrides.append(parsed)
    return overrides, profile


def apply_overrides(config: Mapping[str, Any], args: Sequence[str]) -> dict[str, Any]:
    """``config`` as codex sees it once ``args`` are applied: the selected profile's keys over
    the top level, then each ``-c key=value`` in order (dotted keys make nested tables)."""
    merged: dict[str, Any] = dict(config)
    overrides, profile = _overrides_and_profile(args)
    profile = profile or (merged.get("profile") if isinstance(merged.get("profile"), str)
                          else None)
    profiles = merged.get("profiles")
    chosen = profiles.get(profile) if isinstance(profiles, dict) and profile else None
    if isinstance(chosen, dict):
        merged.update(chosen)
    for path, value in overrides:
        table = merged
        for part in path[:-1]:
            table[part] = dict(table[part]) if isinstance(table.get(part), dict) else {}
            table = table[part]
        table[path[-1]] = value
    return merged


def resolve_provider(config: Mapping[str, Any], args: Sequence[str] = ()) -> Provider:
    """The provider codex will run with under ``config`` and the member's ``args``."""
    effective = apply_overrides(config, args)
    provider_id = str(effective.get("model_provider") or "openai")
    providers = effective.get("model_providers")
    table = providers.get(provider_id) if isinstance(providers, dict) else None
    table = table if isinstance(table, dict) else {}
    env_key = table.get("env_key")
    needs_openai = provider_id == "openai" or bool(table.get("requires_openai_auth"))
    return Provider(provider_id, str(env_key) if env_key else None, needs_openai)


def merged_config(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base`` table by table, as codex merges the member's ``config`` over
    the operator's ``config.toml``."""
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        merged[key] = merged_config(old, value) \
            if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return merged
