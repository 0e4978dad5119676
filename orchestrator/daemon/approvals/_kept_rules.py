"""The rules ``approve --always`` kept, in the journal (table ``kept_rules``): per member, each
with what it approves in words (its scope), the request that made it, and when it was revoked
(``teamctl approvals --rules``, ``teamctl approvals --revoke RULE``). A revoked rule stays as
a record and never matches again.

``MIGRATIONS`` holds this table's migration (10; ``daemon.migrations`` runs it in its place in
the journal's migrations); ``KeptRules`` is its typed async way in. It replaces migration 7's
``_rules``, whose rules (a bare tool, or a command's program and anything after it)
approved more than the member's worktree: their rows are carried over, revoked.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from orchestrator.daemon.approvals._rules import KeptRule, Rule, parse_rule
from orchestrator.errors import NotFound, UsageError
from orchestrator.protocol.approvals import KeptRuleDoc

if TYPE_CHECKING:
    from orchestrator.daemon.journal import AsyncJournal, Journal, Migrations

__all__ = ["MIGRATIONS", "SCHEMA", "KeptRules", "keep", "listing", "live", "revoke"]

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE kept_rules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    team TEXT NOT NULL,
    member TEXT NOT NULL,
    tool TEXT NOT NULL,
    pattern TEXT NOT NULL,
    scope TEXT NOT NULL,
    approval_id TEXT,
    created_at REAL NOT NULL,
    revoked_at REAL,
    revoked_why TEXT
);
CREATE UNIQUE INDEX kept_rules_live ON kept_rules (team, member, tool, pattern)
    WHERE revoked_at IS NULL;
INSERT INTO kept_rules (team, member, tool, pattern, scope, created_at, revoked_at,
                        revoked_why)
    SELECT team, member, tool, pattern, 'kept by approve --always before rules were scoped',
           created_at, (julianday('now') - 2440587.5) * 86400.0,
           'it approved more than the member''s worktree: revoked by the upgrade'
    FROM approval_rules;
DROP TABLE approval_rules
"""
MIGRATIONS: Migrations = {10: SCHEMA}

_COLUMNS = "id, team, member, tool, pattern, scope, approval_id, created_at, revoked_at, " \
           "revoked_why"


def live(journal: Journal, team: str, member: str) -> list[Rule]:
    rows = journal.connection.execute(
        "SELECT tool, pattern FROM kept_rules WHERE team = ? AND member = ? "
        "AND revoked_at IS NULL ORDER BY id", (team, member)).fetchall()
    return [Rule(r["tool"], r["pattern"]) for r in rows]


def keep(journal: Journal, team: str, member: str, kept: KeptRule, approval_id: str) -> None:
    with journal.transaction() as db:
        db.execute("INSERT OR IGNORE INTO kept_rules (team, member, tool, pattern, scope, "
                   "approval_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (team, member, kept.rule.tool, kept.rule.pattern, kept.scope, approval_id,
                    time.time()))


def listing(journal: Journal, team: str | None, member: str | None,
            everything: bool) -> list[KeptRuleDoc]:
    sql, args = _where(team, member)
    if not everything:
        sql += " AND revoked_at IS NULL"
    rows = journal.connection.execute(
        f"SELECT {_COLUMNS} FROM kept_rules WHERE {sql} ORDER BY id", args).fetchall()
    return [_doc(r) for r in rows]


def revoke(journal: Journal, text: str, team: str | None, member: str | None) -> list[KeptRuleDoc]:
    """Revoke the live rule written ``text`` (of ``member``, or of the one member that has
    it); NotFound when none has it, UsageError when several do."""
    rule = parse_rule(text)
    sql, args = _where(team, member)
    with journal.transaction() as db:
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM kept_rules WHERE {sql} AND revoked_at IS NULL "
            "AND tool = ? AND pattern = ?", [*args, rule.tool, rule.pattern or ""]).fetchall()
        owners = sorted({f"{r['team']}/{r['member']}" for r in rows})
        if not rows:
            raise NotFound("kept rule", str(rule), [d.rule for d in listing(
                journal, team, member, everything=False)])
        if len(owners) > 1:
            raise UsageError(f"{rule} is kept for {', '.join(owners)}: name one with --team "
                             "and --member")
        now = time.time()
        db.execute(f"UPDATE kept_rules SET revoked_at = ?, revoked_why = 'revoked by the "
                   f"operator' WHERE id IN ({', '.join('?' * len(rows))})",
                   [now, *(r["id"] for r in rows)])
    return [_doc(r).model_copy(update={"revoked_at": now, "revoked_why":
                                       "revoked by the operator"}) for r in rows]


def _where(team: str | None, member: str | None) -> tuple[str, list[Any]]:
    clauses, args = ["1 = 1"], []
    for column, value in (("team", team), ("member", member)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    return " AND ".join(clauses), args


def _doc(row: Any) -> KeptRuleDoc:
    return KeptRuleDoc(
        team=row["team"], member=row["member"],
        rule=str(Rule(row["tool"], row["pattern"])), scope=row["scope"],
        approval_id=row["approval_id"], created_at=row["created_at"],
        revoked_at=row["revoked_at"], revoked_why=row["revoked_why"])


class KeptRules:
    """The kept rules' typed async methods, over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def live(self, team: str, member: str) -> list[Rule]:
        """The member's rules that still match."""
        return await self._journal.run(live, team, member)

    async def keep(self, team: str, member: str, kept: KeptRule, approval_id: str) -> None:
        await self._journal.run(keep, team, member, kept, approval_id)

    async def listing(self, team: str | None, member: str | None,
                      everything: bool) -> list[KeptRuleDoc]:
        return await self._journal.run(listing, team, member, everything)

    async def revoke(self, text: str, team: str | None, member: str | None
                     ) -> list[KeptRuleDoc]:
        return await self._journal.run(revoke, text, team, member)
