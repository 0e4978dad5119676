"""The stops of the turns in flight (``Meter.on_stop``, docs/costs.md): a team budget crossed
by one member's turn stops every other turn of the team at once, so the team overshoots by the
calls in flight at the crossing only — not by one more call per member. A window spent for one
member's account stops its other members' turns the same way: none sends another request
(docs/costs.md, "Quota windows")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["TurnStops"]

log = structlog.get_logger("teamctl.ledger")


class TurnStops:
    """Per member, the turn in flight and what stops it now; each stop is called once."""

    def __init__(self) -> None:
        self._stops: dict[tuple[str, str], tuple[str, Callable[[], None]]] = {}

    def on_stop(self, team: str, member: str, message_id: str, stop: Callable[[], None]) -> None:
        self._stops[(team, member)] = (message_id, stop)

    def forget(self, team: str, member: str, message_id: str | None = None) -> None:
        """The member's stop is no longer needed (only ``message_id``'s, when given)."""
        current = self._stops.get((team, member))
        if current is not None and message_id in (None, current[0]):
            del self._stops[(team, member)]

    def stop(self, by: tuple[str, str], members: list[tuple[str, str]]) -> None:
        """Stop the turns in flight of ``members`` (the account ``by`` found spent)."""
        for key in members:
            found = self._stops.pop(key, None)
            if found is None:
                continue
            message_id, stop = found
            log.warning("account_stop", team=key[0], member=key[1], message_id=message_id,
                        refused_for=f"{by[0]}/{by[1]}")
            try:
                stop()
            except Exception:  # a runtime's bug must not break the refused member's reading
                log.exception("account_stop_failed", team=key[0], member=key[1])

    def stop_others(self, team: str, member: str) -> None:
        """Stop every turn of the team in flight but ``member``'s (which crossed the team's
        budget); a runtime's failing stop is logged, never raised into the crossing reading."""
        for (t, other), (message_id, stop) in list(self._stops.items()):
            if t != team or other == member:
                continue
            del self._stops[(t, other)]
            log.warning("team_budget_stop", team=team, member=other, message_id=message_id,
                        crossed_by=member)
            try:
                stop()
            except Exception:  # a runtime's bug must not break the crossing member's reading
                log.exception("team_budget_stop_failed", team=team, member=other)
