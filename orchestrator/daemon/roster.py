"""The teams this daemon runs, by name: where ``--team`` is resolved (it may be omitted when
one team runs, or when the member named is in one running team only) for every operation of
the control API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import AmbiguousTeam, NotFound

if TYPE_CHECKING:
    from orchestrator.config import TeamConfig
    from orchestrator.daemon.queue import AsyncStore

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
        """The running team of ``member``: ``team``, the only running team, or — several
        running, ``team`` not given — the one team that has a member of that name."""
        if team is None and len(self.teams) > 1:
            team = self._team_of(member)
        config = self.resolve(team)
        if config.member(member) is None:
            raise NotFound("member", member, [m.name for m in config.members])
        return config, member

    def _team_of(self, member: str) -> str:
        """The one running team with a member named ``member`` (else NotFound, naming every
        running member, or AmbiguousTeam, naming the teams that have one)."""
        having = [name for name, config in self.teams.items() if config.member(member)]
        if len(having) == 1:
            return having[0]
        if having:
            raise AmbiguousTeam(having, member=member)
        raise NotFound("member", member, sorted({m.name for config in self.teams.values()
                                                 for m in config.members}))

    async def resolve_any(self, team: str | None, member: str | None = None) -> str:
        """For history: a running team (with ``member``, found as ``resolve_member`` does),
        else any team the journal knows."""
        if team is None and member is not None and len(self.teams) > 1:
            team = self._team_of(member)
        if team is None or team in self.teams:
            return self.resolve(team).name
        known = [t.name for t in await self._store.teams()]
        if team not in known:
            raise NotFound("team", team, known)
        return team
