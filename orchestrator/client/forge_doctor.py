"""``teamctl doctor TEAMFILE``'s forge check (docs/forge.md): the token's access to the
repository — which permissions GitHub's ``permissions`` object gives it, and which of those
the team file's ``[forge]`` needs are missing — never the token. Read from the operator's
environment here, the one the daemon is started from."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ForgeError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from orchestrator.config import TeamConfig
    from orchestrator.forge_config import ForgeSection

__all__ = ["inspect_forge", "needed_permissions"]


def needed_permissions(section: ForgeSection) -> tuple[str, ...]:
    """What the team's forge keys need: reading issues (``pull``) always; pushing branches
    and merging (``push``) for pull requests or auto-merge."""
    return ("pull", "push") if section.pull_requests or section.auto_merge else ("pull",)


def inspect_forge(config: TeamConfig, environ: Mapping[str, str] | None = None
                  ) -> dict[str, Any] | None:
    """The forge's report (None: the team file has no ``[forge]``): ``ok``, the repository,
    the permissions the token has, those missing, or the failure's code, message and fix."""
    section = config.forge
    if section is None:
        return None
    report: dict[str, Any] = {"repo": section.github.repo, "api": section.github.api,
                              "token_env": section.github.token_env,
                              "needed": list(needed_permissions(section))}
    try:
        permissions = asyncio.run(_permissions(section, os.environ if environ is None
                                               else environ))
    except ForgeError as exc:
        return {**report, "ok": False, "permissions": None, "missing": None,
                "problem": f"{exc.code}: {exc.message}"}
    missing = [name for name in report["needed"] if not permissions.get(name, False)]
    problem = None if not missing else (
        f"the token lacks {', '.join(missing)} on {section.github.repo}: give it "
        + " and ".join(f"'{_GRANT[m]}'" for m in missing) + " access to the repository")
    return {**report, "ok": not missing, "permissions": permissions, "missing": missing,
            "problem": problem}


_GRANT = {"pull": "read", "push": "write"}


async def _permissions(section: ForgeSection, environ: Mapping[str, str]) -> dict[str, bool]:
    from orchestrator.forge import open_forge  # httpx only for a team with a forge

    forge = open_forge(section, environ)
    try:
        return dict((await forge.repo_access()).permissions)
    finally:
        await forge.aclose()
