"""What the quota answers (``accounts``; docs/costs.md, "Quota windows"): each account by its
safe name, its members, what its window last reported and what is held."""

from typing import Literal

from pydantic import Field

from orchestrator.protocol.common import Doc, TeamParams

__all__ = ["AccountDoc", "AccountHold", "AccountMember", "AccountWindow", "AccountsDoc",
           "AccountsParams"]


class AccountsParams(TeamParams):
    """``team``: only the accounts a member of that team spends (null: every running team)."""


class AccountMember(Doc):
    team: str
    member: str
    priority: int = Field(description="who keeps turns in the reserve: the highest first "
                          "(priority = n; default 1 for the lead, else 0)")
    reserve: float = Field(description="the share of the window kept for its team's top "
                           "priority (quota_reserve)")
    paused: str | None = Field(default=None, description="why it takes no new turn now "
                               "(the account held, probed by another member, or past the "
                               "reserve); null: it may")


class AccountWindow(Doc):
    """What a runtime last reported of the account's window."""

    status: Literal["allowed", "warning", "rejected"]
    window: str | None = Field(description="the provider's name of it: five_hour, seven_day…")
    used: float | None = Field(description="the fraction used, 0-1 (null: not reported)")
    resets_at: float | None = Field(description="epoch seconds (null: not named)")
    reported_at: float
    reported_by: str = Field(description="TEAM/MEMBER whose runtime reported it")


class AccountHold(Doc):
    """A refused window: every member held until ``until``."""

    window: str | None
    until: float = Field(description="epoch seconds: the reset the runtime named, else "
                         "teamctl's wait before one member probes it")
    named: bool = Field(description="the runtime named the reset (all resume at it); false: "
                        "one member probes at until, the others wait for its answer")
    probing: str | None = Field(default=None, description="TEAM/MEMBER probing it now (the "
                                "wait is over); null: not probing, or no member has work yet")
    reason: str


class AccountDoc(Doc):
    name: str = Field(description="the account's safe name: claude:operator, "
                      "anthropic:key…3f2a (a key's fingerprint, never the key)")
    members: list[AccountMember]
    window: AccountWindow | None = Field(description="null: nothing reported yet (a runtime "
                                         "that reports nothing until it is refused)")
    held: AccountHold | None = None


class AccountsDoc(Doc):
    """``teamctl accounts --json``."""

    now: float = Field(description="the daemon's clock (epoch seconds), for countdowns")
    accounts: list[AccountDoc]
