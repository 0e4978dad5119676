"""The quota (docs/costs.md, "Quota windows"): one window per account, one decision for all of
its members.

- A refusal for a spent window (``refused``, or a ``rejected`` report) holds the whole account
  until the reset: every member's next turn waits (``gate``) and the ledger stops the turns
  its other members have in flight, so none of them sends another request. At a reset the
  runtime named (and ``RESET_MARGIN`` after it), all resume by themselves, poked in priority
  order; a reset not named (or
  already past) is waited ``probe_after`` seconds, then one member — the first of the account
  with work, in priority order — probes it, and the others wait for its answer.
- A report of the window past ``1 - quota_reserve`` used pauses the members below their
  team's top priority until its reset (the operator's own messages still go).
- Holds are journaled (``QuotaJournal``): a daemon killed while an account is held starts with
  it held until the same reset.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.quota._identity import account_of
from orchestrator.daemon.quota._journal import HeldRow, QuotaJournal
from orchestrator.daemon.quota._windows import (
    Account,
    Held,
    Key,
    Pause,
    Report,
    held_text,
    probe_text,
    reserve_text,
)
from orchestrator.errors import StoreError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from anyio.abc import TaskGroup

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import WindowReading
    from orchestrator.daemon.journal import AsyncJournal

__all__ = ["MAX_HOLD", "PROBE_AFTER", "RESET_MARGIN", "Quota", "probe_after_from_env"]

log = structlog.get_logger("teamctl.quota")

PROBE_AFTER = 300.0  # a refusal that named no reset (or a past one): then one member probes
# a named reset is a whole second of the provider's clock (Claude's ``resetsAt``, Codex's
# ``resetsAt``): the account resumes this long after it, so a reset rounded down or a clock a
# little ahead of the provider's does not send every member into one more refusal
RESET_MARGIN = 1.0
MAX_HOLD = 8 * 24 * 3600.0  # a reset further out than this is not believed
_WRITE_RETRY = (0.5, 30.0)  # a hold the journal refused is written again, waiting longer


def probe_after_from_env(environ: Mapping[str, str] = os.environ) -> float:
    """``TEAMCTL_QUOTA_PROBE_AFTER`` (seconds; tests shorten it), else ``PROBE_AFTER``."""
    try:
        value = float(environ.get("TEAMCTL_QUOTA_PROBE_AFTER") or PROBE_AFTER)
    except ValueError:
        return PROBE_AFTER
    return value if math.isfinite(value) and value > 0 else PROBE_AFTER


class Quota:
    """Every account of every launched team. ``on_release(team, member)``: look at the
    member's queue again (a hold ended); ``on_change()``: an account's state changed."""

    def __init__(self, store: AsyncJournal, tg: TaskGroup, *, clock: Callable[[], float],
                 on_release: Callable[[str, str], None], on_change: Callable[[], None],
                 probe_after: float = PROBE_AFTER,
                 environ: Mapping[str, str] = os.environ) -> None:
        self._journal = QuotaJournal(store)
        self._tg = tg
        self._clock = clock
        self._on_release = on_release
        self._on_change = on_change
        self._probe_after = probe_after
        self._environ = environ
        self._accounts: dict[str, Account] = {}
        self._of: dict[Key, str] = {}
        self._priority: dict[Key, tuple[int, int]] = {}  # (priority, its place in the file)
        self._top: dict[str, int] = {}
        self._reserve: dict[Key, float] = {}

    async def load(self) -> None:
        """The accounts held when the daemon last stopped (once, at start); each waits for
        its reset again from here."""
        for row in await self._journal.held():
            account = self._account(row.account)
            account.held = Held(row.window, row.until, row.reason, row.named, row.probing,
                                row.held_at)
            log.info("quota_held_again", account=row.account, until=row.until,
                     probing=row.probing)
            if not row.probing:
                self._tg.start_soon(self._end_at, row.account, row.until,
                                    name=f"quota {row.account}")

    # -- the team file ------------------------------------------------------------------------

    def configure(self, team: TeamConfig) -> None:
        """Each member's account, priority and reserve (a launch). UsageError: the team file
        names an account in ``[accounts]`` that none of its members spends."""
        found = {m.name: account_of(team, m, self._environ) for m in team.members}
        unknown = sorted(set(team.accounts) - set(found.values()))
        if unknown:
            raise UsageError(
                f"[accounts.\"{unknown[0]}\"]: no member of team {team.name!r} spends that "
                f"account (its members spend {', '.join(sorted(set(found.values())))}: "
                "'teamctl accounts' lists them); fix the name or remove the table")
        self._forget(team.name)
        self._top[team.name] = max(_priority(m.priority, m.lead) for m in team.members)
        for place, member in enumerate(team.members):
            key, name = (team.name, member.name), found[member.name]
            section = team.accounts.get(name)
            self._of[key] = name
            self._priority[key] = (_priority(member.priority, member.lead), -place)
            self._reserve[key] = section.quota_reserve if section else team.team.quota_reserve
            account = self._account(name)
            account.members = sorted([*account.members, key], key=self._rank)
        self._on_change()

    def _forget(self, team: str) -> None:
        for account in self._accounts.values():
            account.members = [k for k in account.members if k[0] != team]
        for key in [k for k in self._of if k[0] == team]:
            del self._of[key]

    def _rank(self, key: Key) -> tuple[int, int]:
        priority, place = self._priority.get(key, (0, 0))
        return -priority, -place

    def _account(self, name: str) -> Account:
        account = self._accounts.get(name)
        if account is None:
            account = self._accounts[name] = Account(name)
        return account

    def _of_member(self, key: Key) -> Account:
        """The member's account (one of its own for a member no launch configured)."""
        name = self._of.get(key)
        if name is None:
            name = self._of[key] = f"unknown:{key[0]}/{key[1]}"
            self._account(name).members.append(key)
        return self._account(name)

    def account(self, key: Key) -> str | None:
        return self._of.get(key)

    def accounts(self) -> list[Account]:
        return sorted(self._accounts.values(), key=lambda a: a.name)

    def priority(self, key: Key) -> int:
        return self._priority.get(key, (0, 0))[0]

    def reserve(self, key: Key) -> float:
        return self._reserve.get(key, 0.0)

    # -- the gate -------------------------------------------------------------------------------

    def gate(self, key: Key, *, claiming: bool = False) -> Pause | None:
        """Why the member takes no new turn now, if it must not. ``claiming``: its queue is
        about to claim a turn — a probe nobody took is its (``idle`` gives it back)."""
        account = self._of_member(key)
        now = self._clock()
        held = account.held
        if held is not None and not held.probing and _resumes_at(held) <= now:
            self._end(account, held)
            held = account.held
        if held is not None and not held.probing:
            return Pause("window", held_text(account.name, held), held.until)
        if held is not None:
            if account.probe in (None, key) and claiming:
                if account.probe is None:
                    log.info("quota_probe", account=account.name, team=key[0], member=key[1])
                account.probe = key
                return None
            if account.probe in (None, key):
                return None
            return Pause("probe", probe_text(account.name, held, account.probe), None)
        return self._reserved(account, key, now)

    def _reserved(self, account: Account, key: Key, now: float) -> Pause | None:
        report, reserve = account.report, self.reserve(key)
        if not reserve or report is None or report.used is None or not report.fresh(now):
            return None
        top = self._top.get(key[0], 0)
        if report.used < 1 - reserve or self.priority(key) >= top:
            return None
        return Pause("reserve", reserve_text(account.name, report, reserve, top),
                     report.resets_at)

    # -- what the runtimes say ------------------------------------------------------------------

    def refused(self, key: Key, until: float | None, window: str | None,
                message: str) -> list[Key]:
        """A member's request was refused for a spent window: hold its account until
        ``until`` (not named, past or absurd: ``probe_after``, then one member probes; at most
        MAX_HOLD). The account's other members, whose turns in flight must stop now."""
        account = self._of_member(key)
        now = self._clock()
        named = until is not None and math.isfinite(until) and until > now
        current = account.held
        if not named and current is not None and not current.probing:
            return []  # the reset already known stands
        until = min(until if named and until is not None else now + self._probe_after,
                    now + MAX_HOLD)
        if current is not None and not current.probing and abs(current.until - until) < 1.0:
            return []
        held = Held(window or (current.window if current else None), until, message[:300],
                    named, probing=False, held_at=now)
        account.report = Report("rejected", held.window, 1.0, until if named else None, now,
                                key)
        self._hold(account, held, key)
        return [k for k in account.members if k != key]

    def _hold(self, account: Account, held: Held, by: Key) -> None:
        account.held, account.probe = held, None
        account.passed.clear()
        self._write(account.name, held)
        log.warning("quota_held", account=account.name, window=held.window, until=held.until,
                    named=held.named, reason=held.reason, by=f"{by[0]}/{by[1]}",
                    members=[f"{t}/{m}" for t, m in account.members])
        for team, member in account.members:
            log.warning("member_held", team=team, member=member, hold="rate_limit",
                        account=account.name, reason=held.reason, until=held.until)
        self._on_change()
        self._tg.start_soon(self._end_at, account.name, held.until,
                            name=f"quota {account.name}")

    def reported(self, key: Key, reading: WindowReading) -> list[Key]:
        """A runtime's report of its window: kept (the reserve reads it); a ``rejected`` one
        is a refusal; any other from a probed account proves the window open again."""
        account = self._of_member(key)
        now = self._clock()
        if reading.status == "rejected":
            return self.refused(key, reading.resets_at, reading.window,
                                f"{reading.window or 'usage'} limit reached")
        account.report = Report(reading.status, reading.window, _fraction(reading.used),
                                _reset(reading.resets_at, now), now, key)
        if account.held is not None and account.held.probing:
            self._open(account, f"{key[1]} reported it {reading.status}")
        self._note_reserve(account, now)
        self._on_change()
        return []

    def _note_reserve(self, account: Account, now: float) -> None:
        """Log the reserve pause once per window, and wake its members at its reset."""
        report = account.report
        if report is None or report.resets_at == account.reserve_noted:
            return
        paused = [k for k in account.members if self._reserved(account, k, now) is not None]
        if not paused:
            return
        account.reserve_noted = report.resets_at
        log.warning("quota_reserve", account=account.name, used=report.used,
                    window=report.window, until=report.resets_at,
                    paused=[f"{t}/{m}" for t, m in paused])
        if report.resets_at is not None:
            waiting = account.reserve_wake is not None
            account.reserve_wake = report.resets_at
            if not waiting:  # one task per account, however many windows it reports
                self._tg.start_soon(self._reserve_over, account.name,
                                    name=f"quota reserve {account.name}")

    def answered(self, key: Key) -> None:
        """A member's turn was answered: a probe's answer opens its account."""
        account = self._of_member(key)
        held = account.held
        if held is not None and held.probing and account.probe == key:
            self._open(account, f"{key[1]}'s turn was answered")

    def idle(self, key: Key) -> None:
        """A member passed the gate and found nothing to send: a probe it held goes to the
        next member with work."""
        account = self._of_member(key)
        held = account.held
        if held is None or not held.probing or account.probe != key:
            return
        account.probe = None
        account.passed.add(key)
        for other in account.members:
            if other not in account.passed:
                self._on_release(*other)

    # -- resets ---------------------------------------------------------------------------------

    async def _end_at(self, name: str, until: float) -> None:
        account = self._accounts[name]
        held = account.held
        if held is None or held.until != until:
            return
        await anyio.sleep(max(_resumes_at(held) - self._clock(), 0.0))
        if account.held is held:
            self._end(account, held)

    def _end(self, account: Account, held: Held) -> None:
        """The hold's time is over: a named reset opens the account; else one member probes."""
        if held.named:
            self._open(account, "its reset time came")
            return
        probing = account.held = replace(held, probing=True)
        account.probe = None
        account.passed.clear()
        self._write(account.name, probing)
        log.info("quota_probing", account=account.name)
        self._wake(account)

    def _open(self, account: Account, why: str) -> None:
        account.held, account.probe = None, None
        if account.report is not None and account.report.status == "rejected":
            account.report = None  # spent no more: the next report says what it is
        account.passed.clear()
        self._tg.start_soon(self._drop, account.name)
        log.info("quota_released", account=account.name, why=why,
                 members=[f"{t}/{m}" for t, m in account.members])
        for team, member in account.members:
            log.info("member_released", team=team, member=member, hold="rate_limit")
        self._wake(account)

    async def _reserve_over(self, name: str) -> None:
        """Wake the account's members when the window its reserve paused them for resets (a
        later report may move it)."""
        account = self._accounts[name]
        while (wake := account.reserve_wake) is not None:
            await anyio.sleep(max(wake - self._clock(), 0.0))
            if account.reserve_wake == wake:
                account.reserve_wake = None
                if account.held is None:
                    log.info("quota_reserve_over", account=name)
                    self._wake(account)

    def _wake(self, account: Account) -> None:
        """Every member looks at its queue again, in priority order."""
        self._on_change()
        for team, member in account.members:
            self._on_release(team, member)

    # -- the journal ----------------------------------------------------------------------------

    def _write(self, name: str, held: Held) -> None:
        row = HeldRow(name, held.window, held.until, held.reason, held.named, held.probing,
                      held.held_at)
        self._tg.start_soon(self._put, row)

    async def _put(self, row: HeldRow) -> None:
        """Journal the hold, again with a growing wait while the journal refuses it."""
        delay = _WRITE_RETRY[0]
        while True:
            held = self._accounts[row.account].held
            if held is None or (held.until, held.probing) != (row.until, row.probing):
                return  # it changed meanwhile: its own write follows
            try:
                await self._journal.put(row)
                log.info("quota_journaled", account=row.account, until=row.until,
                         probing=row.probing)
                return
            except StoreError as exc:
                log.error("quota_unjournaled", account=row.account, error=exc.message,
                          retry_in=delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, _WRITE_RETRY[1])

    async def _drop(self, name: str) -> None:
        try:
            await self._journal.drop(name)
        except StoreError as exc:  # held again at start: it is released at its reset then
            log.error("quota_unjournaled", account=name, error=exc.message)


def _resumes_at(held: Held) -> float:
    """When a held account resumes: its named reset and the margin; teamctl's own wait."""
    return held.until + RESET_MARGIN if held.named else held.until


def _priority(priority: int | None, lead: bool) -> int:
    """A member's priority: its own, else 1 for the lead and 0 for the others."""
    return priority if priority is not None else int(lead)


def _reset(at: float | None, now: float) -> float | None:
    """A reported reset believed: finite, at most MAX_HOLD away (else none named)."""
    if at is None or not math.isfinite(at) or at > now + MAX_HOLD:
        return None
    return at


def _fraction(used: float | None) -> float | None:
    if used is None or not math.isfinite(used):
        return None
    return min(max(used, 0.0), 1.5)

