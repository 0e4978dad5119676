"""Where an OpenCode member's provider key comes from, as OpenCode reads it: an ``auth.json``
entry, the provider's variable, or ``provider.<id>.options.apiKey`` in the config — a literal
key, or ``"{env:VAR}"``, which OpenCode substitutes with the variable's value (empty when it is
unset). The preflight and ``teamctl doctor`` both ask this module. Standard library only."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["PROVIDER_ENV", "api_key_source", "env_reference"]

# The variable each catalog provider reads when no auth.json entry is there (the preflight
# only judges these: a provider of the member's own config may need no key at all).
PROVIDER_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
                "openrouter": "OPENROUTER_API_KEY", "google": "GOOGLE_GENERATIVE_AI_API_KEY",
                "groq": "GROQ_API_KEY", "mistral": "MISTRAL_API_KEY",
                "deepseek": "DEEPSEEK_API_KEY", "xai": "XAI_API_KEY"}

_ENV_REFERENCE = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def env_reference(options: Mapping[str, Any]) -> str | None:
    """The variable ``options.apiKey`` names as ``"{env:VAR}"``, if it is such a reference."""
    key = options.get("apiKey")
    reference = _ENV_REFERENCE.fullmatch(key) if isinstance(key, str) else None
    return reference[1] if reference is not None else None


def api_key_source(options: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Where a configured ``options.apiKey`` comes from: "" for a literal key, ", from
    {env:VAR}" for a reference to a variable the member's env has; None when there is no key,
    or it names a variable the member's env lacks."""
    key = options.get("apiKey")
    if not isinstance(key, str) or not key:
        return None
    variable = env_reference(options)
    if variable is None:
        return ""
    return f", from {{env:{variable}}}" if env.get(variable) else None
