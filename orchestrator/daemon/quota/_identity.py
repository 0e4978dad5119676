"""Which account a member's runtime spends (docs/costs.md, "Quota windows"): members whose
runtime uses the same credential share one rate-limit window, so they are one account.

- a key or token in the member's env (its ``env``, or a ``pass_env`` variable as the daemon has
  it): the runtime table's ``credentials`` in the CLI's order, an ACP preset's keys, then any
  ``*_API_KEY`` — the account ``anthropic:key…3f2a``, named by the last four hex digits of the
  value's SHA-256, never by the value;
- else, in a pod: the Secret its credential comes from (``claude:secret/ns/name``);
- else an isolated login: the member's own (``claude:isolated/web/rev``);
- else the operator's login of the CLI, on this machine (``claude:operator``) or on its SSH
  host (``claude:operator@box``: that host's login).

The name is the only thing kept of a credential: safe to show, log and journal.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.acp_agents import acp_agent
from orchestrator.runtime_table import runtime_info

if TYPE_CHECKING:
    from collections.abc import Mapping

    from orchestrator.config import MemberConfig, TeamConfig

__all__ = ["account_of", "fingerprint"]

_KEY = re.compile(r"^([A-Z][A-Z0-9_]*?)_API_KEY$")


def fingerprint(secret: str) -> str:
    """What an account name keeps of a credential: four hex digits of its SHA-256."""
    return hashlib.sha256(secret.encode()).hexdigest()[-4:]


def _label(member: MemberConfig) -> str:
    """The CLI whose login it is: the runtime, or for an ACP member the agent it runs."""
    if member.acp_agent is not None:
        return member.acp_agent
    executable, _ = member.command_line()
    if runtime_info(member.runtime).agent_presets and executable:
        name = re.sub(r"[^a-z0-9-]+", "-", Path(executable).name.lower()).strip("-")
        return name or member.runtime
    return member.runtime


def _env(member: MemberConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables the member's CLI gets from the team file: ``pass_env`` as the daemon has
    them, ``env`` over them."""
    passed = {name: environ[name] for name in member.pass_env if name in environ}
    return {**passed, **member.env}


def _keyed(member: MemberConfig, env: Mapping[str, str]) -> str | None:
    """The account of the first credential variable set, in the CLI's order."""
    preset = acp_agent(member.acp_agent)
    named = list(runtime_info(member.runtime).credentials)
    named += [(var, _key_prefix(var)) for var in (preset.keys if preset else ())]
    named += [(var, _key_prefix(var)) for var in sorted(env) if _KEY.match(var)]
    for var, prefix in named:
        value = env.get(var)
        if value:
            return f"{prefix}…{fingerprint(value)}"
    return None


def _key_prefix(var: str) -> str:
    found = _KEY.match(var)
    provider = found.group(1) if found else var
    return f"{provider.lower().replace('_', '-')}:key"


def account_of(team: TeamConfig, member: MemberConfig, environ: Mapping[str, str]) -> str:
    """The safe name of the account ``member`` spends."""
    keyed = _keyed(member, _env(member, environ))
    if keyed is not None:
        return keyed
    label = _label(member)
    resolved = team.resolved(member)
    if resolved.kubernetes is not None:
        _, pod = resolved.kubernetes
        if pod.secret is not None:
            return f"{label}:secret/{pod.namespace}/{pod.secret}"
    if resolved.login == "isolated" or resolved.kubernetes is not None:
        return f"{label}:isolated/{team.name}/{member.name}"
    if resolved.ssh_host is not None:
        return f"{label}:operator@{resolved.ssh_host[0]}"
    return f"{label}:operator"
