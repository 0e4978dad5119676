"""The teams this daemon runs, by name: where ``--team`` is resolved (it may be omitted when
one team runs) for every operation of the control API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import AmbiguousTeam, NotFound

if TYPE_CHECKING:
    from orchestrator.config import TeamConfig
    from orchestrator.daemon.store import AsyncStore

__all__ = ["Roster"]


class Roster:
    """The running teams (``teams``, in launch order) and those resumed from the journal."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store
        self.teams: dict[str, TeamConfig] = {}
        self.resumed: set[str] = set()  # teams this daemon resumed from the journal

    def resolve(self, team: str | None) -> TeamConfig:
        """The running team named ``team``, or the only running team."""
        if team is None:
            if len(self.teams) == 1:
                return next(iter(self.teams.values()))
            if not self.teams:
                raise NotFound("running team", "(any)", [])
            raise AmbiguousTeam(list(self.teams))
        if team not in self.teams:
            raise NotFound("running team", team, list(self.teams))
        return self.teams[team]

    def resolve_member(self, team: str | None, member: str) -> tuple[TeamConfig, str]:
        config = self.resolve(team)
        if config.member(member) is None:
            raise NotFound("member", member, [m.name for m in config.members])
        return config, member

    async def resolve_any(self, team: str | None) -> str:
        """For history: a running team, else any team the journal knows."""
        if team is None or team in self.teams:
            return self.resolve(team).name
        known = [t.name for t in await self._store.teams()]
        if team not in known:
            raise NotFound("team", team, known)
        return team
