"""What a member is expected to take: learned per runtime from its earlier launches on this
machine, a documented default per runtime until then.

A member's *kind* is its runtime and the options its runtime row names (``codex/app-server``,
``codex/exec``, ``acp/qwen``, ``acp/<executable>`` for an ACP agent named by its command alone,
``claude``), and where it runs here (``local``, or ``sandbox``: bubblewrap around it). The peak
resident memory of each launch's process tree — measured when it is ready and every
``SAMPLE_INTERVAL`` while it runs — is journaled (table ``member_footprints``, migration 20: one
row per launch, the newest ``KEEP`` per kind), so what was learned survives a restart of the
daemon. A kind's expected footprint is the median of its kept peaks; with none, the runtime
row's ``footprint_mib`` (an ACP preset's own) — docs/scaling.md lists them.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

from orchestrator.acp_agents import acp_agent
from orchestrator.runtime_table import runtime_info

if TYPE_CHECKING:
    from orchestrator.config import MemberConfig
    from orchestrator.daemon.journal import AsyncJournal, Journal, Migrations

__all__ = ["KEEP", "MIGRATIONS", "FootprintJournal", "Footprints", "Kind", "kind_of"]

KEEP = 20  # launches kept per kind: a median of recent ones, not of every launch ever
_MIB = 2**20

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE member_footprints (
    launch TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    place TEXT NOT NULL,
    peak_bytes INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX member_footprints_by_kind ON member_footprints (kind, place, at)
"""
MIGRATIONS: Migrations = {20: SCHEMA}


@dataclass(frozen=True)
class Kind:
    """Members whose footprints are learned together, and the default until one is."""

    kind: str
    place: str
    default_bytes: int


def kind_of(config: MemberConfig, *, sandboxed: bool) -> Kind:
    """The member's kind (its runtime, that runtime's options, its place here: ``sandboxed``
    by teamctl's boundary or not)."""
    info = runtime_info(config.runtime)
    parts: list[str] = [config.runtime]
    for option in info.options:
        value = getattr(config, option, None)
        if value is None:  # an ACP agent named by its command: its executable's name
            value = PurePath(config.command_line()[0] or "").name or "command"
        parts.append(str(value))
    preset = acp_agent(config.acp_agent)
    mib = preset.footprint_mib if preset is not None and preset.footprint_mib else \
        info.footprint_mib
    return Kind("/".join(parts), "sandbox" if sandboxed else "local",
                mib * _MIB)


def _record(journal: Journal, launch: str, kind: Kind, peak_bytes: int, now: float) -> None:
    # not fsynced: a peak a power loss rolls back is learned again at the next launch
    with journal.transaction(durable=False) as db:
        db.execute("INSERT INTO member_footprints VALUES (?, ?, ?, ?, ?) ON CONFLICT(launch) "
                   "DO UPDATE SET peak_bytes = MAX(peak_bytes, excluded.peak_bytes), "
                   "at = excluded.at", (launch, kind.kind, kind.place, peak_bytes, now))
        db.execute("DELETE FROM member_footprints WHERE kind = ? AND place = ? AND launch NOT IN "
                   "(SELECT launch FROM member_footprints WHERE kind = ? AND place = ? "
                   "ORDER BY at DESC LIMIT ?)", (kind.kind, kind.place, kind.kind, kind.place,
                                                 KEEP))


def _peaks(journal: Journal) -> dict[tuple[str, str], list[int]]:
    rows = journal.connection.execute(
        "SELECT kind, place, peak_bytes FROM member_footprints ORDER BY at").fetchall()
    peaks: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        peaks.setdefault((row["kind"], row["place"]), []).append(int(row["peak_bytes"]))
    return peaks


class FootprintJournal:
    """The ``member_footprints`` table, over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def record(self, launch: str, kind: Kind, peak_bytes: int) -> None:
        """Keep ``launch``'s peak (the higher of this and one recorded before)."""
        await self._journal.run(_record, launch, kind, peak_bytes, time.time())

    async def peaks(self) -> dict[tuple[str, str], list[int]]:
        """The kept peaks of every kind and place, oldest first."""
        return await self._journal.run(_peaks)


class Footprints:
    """The learned peaks in memory (loaded once), and each kind's expected footprint."""

    def __init__(self, journal: FootprintJournal) -> None:
        self._journal = journal
        self._peaks: dict[tuple[str, str], dict[str, int]] = {}  # by launch, newest last

    async def load(self) -> None:
        for key, peaks in (await self._journal.peaks()).items():
            self._peaks[key] = {f"journaled {i}": peak for i, peak in enumerate(peaks)}

    def expected(self, kind: Kind) -> tuple[int, bool]:
        """The bytes a member of ``kind`` is expected to take, and whether that was learned
        here (else the runtime's default)."""
        peaks = self._peaks.get((kind.kind, kind.place))
        if not peaks:
            return kind.default_bytes, False
        return int(statistics.median(peaks.values())), True

    async def record(self, launch: str, kind: Kind, peak_bytes: int) -> None:
        """Journal ``launch``'s peak so far and count it from now on."""
        await self._journal.record(launch, kind, peak_bytes)
        peaks = self._peaks.setdefault((kind.kind, kind.place), {})
        peaks[launch] = max(peak_bytes, peaks.pop(launch, 0))  # newest last
        while len(peaks) > KEEP:
            del peaks[next(iter(peaks))]
