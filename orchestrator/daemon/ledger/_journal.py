"""The ledger's tables in the journal (migrations 8 and 18): ``usage`` (one row per settled
turn attempt, and why its figures are a lower bound where they are), ``usage_counters`` (the
running total each runtime counter was last charged up to) and ``budgets`` (the operator's and
the team file's). ``LedgerJournal`` is the typed async way in; ``ledger.Ledger`` keeps the
totals in memory and decides."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.contracts import TokenUsage
from orchestrator.daemon.ledger._charge import Charge, CounterValue

if TYPE_CHECKING:
    from orchestrator.daemon.journal import AsyncJournal, Journal, Migrations

__all__ = ["MIGRATIONS", "TEAM", "Budget", "By", "LedgerJournal"]

TEAM = ""  # the member of a whole team's row: its budgets, its totals
By = Literal["member", "model", "day"]  # how a usage query groups its rows

MIGRATIONS: Migrations = {
    # what each turn cost: one row per settled turn attempt, the running totals each runtime
    # counter was last charged up to, and the budgets
    8: """
    CREATE TABLE usage (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        message_id TEXT,
        runtime TEXT NOT NULL,
        model TEXT,
        input_tokens INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        reasoning_output_tokens INTEGER NOT NULL,
        cost_usd REAL,
        estimated INTEGER NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX usage_by_member ON usage (team, member);
    CREATE INDEX usage_by_message ON usage (message_id, member);
    CREATE TABLE usage_counters (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        counter TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        reasoning_output_tokens INTEGER NOT NULL,
        cost_usd REAL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (team, member, counter)
    );
    CREATE TABLE budgets (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        usd REAL,
        tokens INTEGER,
        file_usd REAL,
        file_tokens INTEGER,
        updated_at REAL NOT NULL,
        PRIMARY KEY (team, member)
    );
    """,
    # why a turn's figures leave some of the member's API calls out (an ACP agent's side
    # requests it does not report: costs/coverage.py); NULL: every call is in them
    18: "ALTER TABLE usage ADD COLUMN unreported TEXT",
}


@dataclass
class Budget:
    """A member's (or, member ``""``, a team's) budgets: the operator's, and the team file's
    they came from."""

    usd: float | None = None
    tokens: int | None = None
    file_usd: float | None = None
    file_tokens: int | None = None
    warned: bool = False

    @property
    def set(self) -> bool:
        return self.usd is not None or self.tokens is not None


# the sums every query of the usage table takes (``unknown``: rows whose cost is unknown)
_SUMS = ("SUM(input_tokens) AS i, SUM(cached_input_tokens) AS c, SUM(output_tokens) AS o, "
         "SUM(reasoning_output_tokens) AS r, SUM(COALESCE(cost_usd, 0)) AS usd, "
         "SUM(cost_usd IS NULL) AS unknown, MAX(unreported) AS unreported")


def _totals(journal: Journal) -> list[dict[str, Any]]:
    rows = journal.connection.execute(
        f"SELECT team, member, {_SUMS} FROM usage GROUP BY team, member").fetchall()
    return [dict(r) for r in rows]


def _counters(journal: Journal, team: str, member: str) -> dict[str, CounterValue]:
    rows = journal.connection.execute(
        "SELECT * FROM usage_counters WHERE team=? AND member=?", (team, member)).fetchall()
    return {row["counter"]: CounterValue(TokenUsage(
        row["input_tokens"], row["cached_input_tokens"], row["output_tokens"],
        row["reasoning_output_tokens"]), row["cost_usd"]) for row in rows}


def _record(journal: Journal, team: str, member: str, runtime: str, message_id: str,
            charge: Charge, counters: dict[str, CounterValue], at: float | None = None) -> None:
    """One settled attempt (``at``: when; a retried write keeps it): its usage row, the
    message's running usage (for history) and the counters' new baselines, in one
    transaction."""
    now = time.time() if at is None else at
    with journal.transaction() as db:
        if not charge.empty:
            t = charge.tokens
            db.execute(
                "INSERT INTO usage (team, member, message_id, runtime, model, input_tokens, "
                "cached_input_tokens, output_tokens, reasoning_output_tokens, cost_usd, "
                "estimated, at, unreported) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (team, member, message_id, runtime, charge.model, t.input_tokens,
                 t.cached_input_tokens, t.output_tokens, t.reasoning_output_tokens,
                 charge.cost_usd, int(charge.estimated), now, charge.unreported))
            row = db.execute(
                f"SELECT {_SUMS}, MAX(estimated) AS est FROM usage "
                "WHERE message_id=? AND member=?",
                (message_id, member)).fetchone()
            doc: dict[str, Any] = {
                "input_tokens": row["i"], "cached_input_tokens": row["c"],
                "output_tokens": row["o"], "reasoning_output_tokens": row["r"],
                "cost_usd": None if row["unknown"] else round(row["usd"] or 0.0, 6)}
            if row["est"]:
                doc["estimated"] = True
            if row["unreported"]:
                doc["lower_bound"] = row["unreported"]
            db.execute("UPDATE deliveries SET usage=? WHERE message_id=? AND member=?",
                       (json.dumps(doc, sort_keys=True), message_id, member))
        for name, value in counters.items():
            t = value.tokens
            db.execute(
                "INSERT OR REPLACE INTO usage_counters (team, member, counter, input_tokens,"
                " cached_input_tokens, output_tokens, reasoning_output_tokens, cost_usd, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (team, member, name, t.input_tokens, t.cached_input_tokens,
                 t.output_tokens, t.reasoning_output_tokens, value.cost_usd, now))


def _budgets(journal: Journal, team: str) -> dict[str, Budget]:
    rows = journal.connection.execute(
        "SELECT member, usd, tokens, file_usd, file_tokens FROM budgets WHERE team=?",
        (team,)).fetchall()
    return {r["member"]: Budget(r["usd"], r["tokens"], r["file_usd"], r["file_tokens"])
            for r in rows}


def _save_budget(journal: Journal, team: str, member: str, budget: Budget) -> None:
    with journal.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO budgets (team, member, usd, tokens, file_usd, "
            "file_tokens, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (team, member, budget.usd, budget.tokens, budget.file_usd, budget.file_tokens,
             time.time()))


def _usage(journal: Journal, team: str | None, by: By) -> list[dict[str, Any]]:
    label = {"member": "member", "model": "COALESCE(model, '')",
             "day": "date(at, 'unixepoch', 'localtime')"}[by]
    where, args = ("WHERE team = ?", (team,)) if team else ("", ())
    rows = journal.connection.execute(
        f"SELECT team, {label} AS key, COUNT(*) AS turns, {_SUMS} FROM usage {where} "
        "GROUP BY team, key ORDER BY team, key", args).fetchall()
    return [dict(r) for r in rows]


class LedgerJournal:
    """The ledger tables' typed async methods, over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def totals(self) -> list[dict[str, Any]]:
        """Per team and member, the sums charged so far."""
        return await self._journal.run(_totals)

    async def counters(self, team: str, member: str) -> dict[str, CounterValue]:
        return await self._journal.run(_counters, team, member)

    async def record(self, team: str, member: str, runtime: str, message_id: str,
                     charge: Charge, counters: dict[str, CounterValue],
                     at: float | None = None) -> None:
        await self._journal.run(_record, team, member, runtime, message_id, charge, counters,
                                at)

    async def budgets(self, team: str) -> dict[str, Budget]:
        return await self._journal.run(_budgets, team)

    async def save_budget(self, team: str, member: str, budget: Budget) -> None:
        await self._journal.run(_save_budget, team, member, budget)

    async def usage(self, team: str | None, by: By) -> list[dict[str, Any]]:
        return await self._journal.run(_usage, team, by)
