"""The members: each teammate's process started, watched, restarted, put to sleep, woken and
stopped, and what belongs to the member alone — its private directory, its view of the files,
its attachments read with its own rights.

This module is the face: code outside ``members/`` imports from here only. Underneath,
``_supervisor`` keeps the roster and lends a ready process for a turn; ``_lifecycle`` runs one
member's life (start → ready → exit → restart by ``_restart_policy``); ``_liveness`` probes idle
members; ``_sleep`` puts an idle member to sleep and wakes it; ``_running_cap`` keeps a team
under its ``max_running``; ``_launch`` builds each launch; ``_orphans`` stops what a dead
daemon left behind; ``_ceilings`` holds each start to its member's ceiling (its cgroup);
``_dirs``, ``_view`` and ``_attachments`` are the member's private directory and its view of
the files.
"""

from __future__ import annotations

from orchestrator.daemon.members._attachments import read_in_view
from orchestrator.daemon.members._ceilings import Ceilings
from orchestrator.daemon.members._dirs import private_dirs
from orchestrator.daemon.members._launch import HostFactory, LaunchFactory, VisionLookup
from orchestrator.daemon.members._lifecycle import Gate, Sleep
from orchestrator.daemon.members._orphans import (
    home_id,
    reap_orphans,
    reap_pod_orphans,
)
from orchestrator.daemon.members._supervisor import Supervisor
from orchestrator.daemon.members._view import view_of
from orchestrator.daemon.members.state import MemberState

__all__ = ["Ceilings", "Gate", "HostFactory", "LaunchFactory", "MemberState", "Sleep",
           "Supervisor",
           "VisionLookup", "home_id", "private_dirs", "read_in_view", "reap_orphans",
           "reap_pod_orphans", "view_of"]
