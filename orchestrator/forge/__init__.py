"""The forge's client side, shared by the daemon and ``teamctl doctor`` (docs/forge.md): what
a forge is to teamctl (``protocol``: the Forge a second forge — GitLab — implements as one
module, and its values), a token that does not print (``tokens``), and GitHub's REST API on
httpx (``github``, imported by ``open_forge`` only: nothing loads httpx for a team without a
forge). What the daemon does with a forge — intake, write-back, its loop — is
``orchestrator/daemon/forge``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.forge.protocol import Forge, Issue, RateLimit, RepoAccess
from orchestrator.forge.tokens import Token, read_token

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import httpx

    from orchestrator.forge_config import ForgeSection

__all__ = ["Forge", "Issue", "RateLimit", "RepoAccess", "Token", "open_forge", "read_token"]


def open_forge(section: ForgeSection, environ: Mapping[str, str], *,
               clock: Callable[[], float] | None = None,
               transport: httpx.AsyncBaseTransport | None = None) -> Forge:
    """The forge ``section`` names, its token read from ``environ`` (ForgeError
    ``forge_token_missing`` when it is not there)."""
    from orchestrator.forge.github import GitHub

    settings = section.github
    token = read_token(settings.token_env, environ)
    if clock is None:
        return GitHub(repo=settings.repo, api=settings.api, token=token, transport=transport)
    return GitHub(repo=settings.repo, api=settings.api, token=token, clock=clock,
                  transport=transport)
