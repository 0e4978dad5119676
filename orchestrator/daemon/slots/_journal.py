"""The slots' table in the journal (migration 19): each member's value of each slot, unique in
its space (``_plan``), committed durably before any member of the team starts — so the values
are the same after a restart of the member, a sleep, a relaunch and a daemon killed (``kill
-9``): the next launch finds them here.

A team's rows are written whole at each of its launches (``assign``): read, planned and written
in one call of the writer thread, so two teams launched at once never plan over each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.daemon.slots._plan import Held, Plan, plan

if TYPE_CHECKING:
    from orchestrator.daemon.journal import Journal, Migrations
    from orchestrator.daemon.slots._plan import PortCheck, Wanted

__all__ = ["MIGRATIONS", "assign", "rows"]

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE slots (
    team TEXT NOT NULL,
    member TEXT NOT NULL,
    var TEXT NOT NULL,
    kind TEXT NOT NULL,
    space TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (team, member, var),
    UNIQUE (space, value)
)
"""
MIGRATIONS: Migrations = {19: SCHEMA}


def rows(journal: Journal) -> list[Held]:
    """Every value the journal gives, of every team."""
    found = journal.connection.execute(
        "SELECT team, member, var, kind, space, value FROM slots ORDER BY team, member, var")
    return [Held(r["team"], r["member"], r["var"], r["kind"], r["space"], r["value"])
            for r in found.fetchall()]


def assign(journal: Journal, team: str, wanted: list[Wanted], running: set[str],
           port_free: PortCheck) -> Plan:
    """``team``'s slots planned over every row and written in one transaction (nothing is
    written when the team has none and had none); raises SlotsExhausted, writing nothing."""
    held = rows(journal)
    if not wanted and not any(row.team == team for row in held):
        return Plan()
    result = plan(team, wanted, held, running, port_free)
    with journal.transaction() as db:
        db.execute("DELETE FROM slots WHERE team = ?", (team,))
        db.executemany("DELETE FROM slots WHERE team = ? AND member = ? AND var = ?",
                       [(row.team, row.member, row.var) for row in result.reclaimed])
        db.executemany("INSERT INTO slots (team, member, var, kind, space, value) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       [(row.team, row.member, row.var, row.kind, row.space, row.value)
                        for row in result.rows])
    return result
