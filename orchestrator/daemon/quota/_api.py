"""``teamctl accounts`` (docs/costs.md, "Quota windows"): the quota's accounts as the control
API shows them — the members of the running teams each spends, what its window last
reported, what is held and why each member waits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from orchestrator import protocol
from orchestrator.protocol.quota import (
    AccountDoc,
    AccountHold,
    AccountMember,
    AccountsDoc,
    AccountWindow,
)

if TYPE_CHECKING:
    from orchestrator.config import TeamConfig
    from orchestrator.daemon.quota._service import Quota
    from orchestrator.daemon.quota._windows import Account
    from orchestrator.protocol.quota import AccountsParams

__all__ = ["QuotaApi"]

Handler = Callable[[Any], Awaitable[Any]]


class QuotaApi:
    """The ``accounts`` method. ``running(team)``: the team's config while it runs (None:
    not running; its members are not shown); ``resolve(team)``: a team named by the
    operator (NotFound, AmbiguousTeam)."""

    def __init__(self, quota: Quota, *, running: Callable[[str], TeamConfig | None],
                 resolve: Callable[[str | None], TeamConfig], clock: Callable[[], float]
                 ) -> None:
        self._quota = quota
        self._running = running
        self._resolve = resolve
        self._clock = clock

    def handlers(self) -> dict[str, Handler]:
        return {protocol.ACCOUNTS.name: self._accounts}

    async def _accounts(self, params: AccountsParams) -> AccountsDoc:
        team = None if params.team is None else self._resolve(params.team).name
        return self.document(team)

    def document(self, team: str | None = None) -> AccountsDoc:
        """Every account a member of a running team spends (``team``: of that team)."""
        shown = []
        for account in self._quota.accounts():
            members = [k for k in account.members if self._running(k[0]) is not None]
            if members and (team is None or any(t == team for t, _ in members)):
                shown.append(self._account(account, members))
        return AccountsDoc(now=self._clock(), accounts=shown)

    def _account(self, account: Account, members: list[tuple[str, str]]) -> AccountDoc:
        quota = self._quota
        rows = []
        for key in members:
            pause = quota.gate(key)
            rows.append(AccountMember(team=key[0], member=key[1], priority=quota.priority(key),
                                      reserve=quota.reserve(key),
                                      paused=None if pause is None else pause.text))
        report, held = account.report, account.held
        window = None if report is None else AccountWindow(
            status=report.status, window=report.window, used=report.used,
            resets_at=report.resets_at, reported_at=report.at,
            reported_by=f"{report.by[0]}/{report.by[1]}")
        hold = None if held is None else AccountHold(
            window=held.window, until=held.until, named=held.named, reason=held.reason,
            probing=f"{account.probe[0]}/{account.probe[1]}"
            if held.probing and account.probe else None)
        return AccountDoc(name=account.name, members=rows, window=window, held=hold)
