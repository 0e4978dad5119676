"""Memory admission: a member of this machine starts only when it fits (docs/scaling.md,
"Starts that fit").

This module is the face: code outside ``admission/`` imports from here only. Underneath,
``_memory`` reads this machine's memory (MemAvailable, PSI; injectable for tests);
``_decision`` is the verdict, pure; ``_footprints`` is what each kind of member is expected to
take, learned from its earlier launches and journaled (table ``member_footprints``, migration
20); ``_service`` is ``Admission``: the line of waiting members, in order, and the loop that
looks at it and measures running members; ``_settings``: where it reads and how often (the
daemon's /proc, or a test's switches).
"""

from __future__ import annotations

from orchestrator.daemon.admission._decision import PRESSURE_LIMIT
from orchestrator.daemon.admission._footprints import MIGRATIONS, FootprintJournal, Footprints
from orchestrator.daemon.admission._memory import HostMemory, MemorySource
from orchestrator.daemon.admission._service import POLL_INTERVAL, SAMPLE_INTERVAL, Admission
from orchestrator.daemon.admission._settings import AdmissionSettings

__all__ = ["MIGRATIONS", "POLL_INTERVAL", "PRESSURE_LIMIT", "SAMPLE_INTERVAL", "Admission",
           "AdmissionSettings", "FootprintJournal", "Footprints", "HostMemory", "MemorySource"]
