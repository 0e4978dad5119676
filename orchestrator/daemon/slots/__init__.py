"""Each member's slots (``[team] slots``; docs/operations.md, "A port and a database name of its
own"): variables in its environment whose values are its own — a port, a database name, an
index — unique across the team's members and every team of this home, the same across restarts,
sleep, relaunches and a daemon killed.

- ``_plan``: which value each slot holds after a launch (pure): kept, moved off a port another
  program took, new, taken back from a stopped team, or ``SlotsExhausted``;
- ``_journal``: the ``slots`` table, each team's rows planned and written in one call;
- ``_ports``: whether a server could listen on a port here now.

``Slots`` assigns a team's values when it is launched or resumed, before any member starts, and
answers each launch of a member (its environment) and ``status``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from orchestrator.daemon.slots._journal import MIGRATIONS, assign
from orchestrator.daemon.slots._plan import PortCheck, Wanted
from orchestrator.daemon.slots._ports import port_free
from orchestrator.slots_config import parse_slot

if TYPE_CHECKING:
    from orchestrator.config import MemberConfig, TeamConfig
    from orchestrator.daemon.queue import AsyncStore

__all__ = ["MIGRATIONS", "PortCheck", "Slots", "port_free"]

log = structlog.get_logger("teamctl.slots")


class Slots:
    """The running teams' members' slots, assigned in the journal, held here for their
    launches and ``status``."""

    def __init__(self, store: AsyncStore, *, ports: PortCheck = port_free) -> None:
        """``ports``: whether a port is free here now (a test's fake)."""
        self._store = store
        self._ports = ports
        self._running: dict[str, dict[str, dict[str, str]]] = {}  # team -> member -> values

    async def assign(self, config: TeamConfig) -> None:
        """Give ``config``'s members their values — kept, moved, new, freed: each logged — in
        the journal, before any of them starts. Raises SlotsExhausted (nothing written)."""
        running = {record.name for record in await self._store.teams(desired="running")}
        wanted = [Wanted(member.name, var, text, parse_slot(text), local=_here(config, member))
                  for member in config.members for var, text in config.team.slots.items()]
        result = await self._store.run(assign, config.name, wanted,
                                       running | set(self._running), self._ports)
        for event, fields in result.events:
            log.info(event, **fields)
        values: dict[str, dict[str, str]] = {member.name: {} for member in config.members}
        for row in result.rows:
            values[row.member][row.var] = row.value
        self._running[config.name] = values

    def stopped(self, team: str) -> None:
        """``team`` runs no more: its values stay in the journal (its next launch finds them),
        and a launch that finds nothing else left in a range may take them back."""
        self._running.pop(team, None)

    def env_of(self, team: str, member: str) -> dict[str, str]:
        """The variables ``member`` finds in its environment ({}: none, or its team does not
        run)."""
        return dict(self._running.get(team, {}).get(member, {}))


def _here(config: TeamConfig, member: MemberConfig) -> bool:
    """Whether the team file runs ``member`` on this machine (no SSH host, no pod): its port
    is checked free here."""
    resolved = config.resolved(member)
    return resolved.ssh_host is None and resolved.kubernetes is None
