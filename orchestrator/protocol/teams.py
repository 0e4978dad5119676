"""Teams as the operator runs them (``launch``, ``status``, ``restart``, ``stop``, ``ping``): a
member on its four axes (launch, liveness, readiness, spend), a team, and the launch's params.
"""

from typing import Any, Literal

from pydantic import Field

from orchestrator.limits import MAX_WAIT_SECONDS
from orchestrator.protocol.common import Doc, Params
from orchestrator.protocol.costs import Spend

__all__ = [
    "EgressStatus",
    "LastExit",
    "Launch",
    "LaunchParams",
    "LaunchResult",
    "Liveness",
    "MemberStatus",
    "Ping",
    "PullDoc",
    "Readiness",
    "RestartResult",
    "StatusDoc",
    "StopResult",
    "TeamStatus",
]


# asleep: idle past ``pause_after`` (or put to sleep for another under ``max_running``), its
# process stopped and its session kept (a pod's place suspended too); its next message wakes it.
# waiting: its start waits until its memory fits (``memory_reserve``)
Launch = Literal["pending", "starting", "running", "backoff", "stopping", "stopped", "fatal",
                 "asleep", "waiting"]


# unresponsive: it did not answer its liveness probe within the deadline (killed, restarted)
Liveness = Literal["alive", "unresponsive", "dead", "unknown"]


Readiness = Literal["ready", "busy", "not_ready"]


class LastExit(Doc):
    code: int | None
    at: float
    reason: str | None = Field(default=None, description="why, where teamctl knows more than "
                               "the code: \"memory_max 2 GiB exceeded: the kernel's OOM killer "
                               "ended 1 process in its cgroup (peak 2 GiB)\"")


class EgressStatus(Doc):
    """A sandboxed member's egress proxy (docs/security.md, "The network boundary")."""

    allowed: int = Field(description="connections the policy allowed")
    denied: int = Field(description="refused by the policy (egress_denied in the log)")


class MemberStatus(Doc):
    """One member on the four axes (delivery is per message: see ``history``)."""

    name: str
    runtime: str
    model: str | None
    host: str | None = Field(default=None, description="the SSH host it runs on (null: this "
                             "machine); pid is then the local ssh client's")
    sandbox: str | None = Field(default=None, description="the OS boundary around it: "
                                "\"process, network on\" (bubblewrap; its network mode); "
                                "null: none (docs/security.md)")
    ceiling: str | None = Field(default=None, description="what its whole process tree may "
                                "hold: \"memory_max 2 GiB, pids_max 256\" (its cgroup, or its "
                                "pod's resources); null: no ceiling")
    egress: EgressStatus | None = Field(default=None, description="its egress proxy's "
                                        "connections since its team was placed (network off "
                                        "or allowlist; null: none)")
    pid: int | None
    launch: Launch
    liveness: Liveness
    readiness: Readiness
    activity: str | None = None
    restarts: int
    epoch: int = Field(default=0, description="its launch number: each start of its process "
                       "(restart or recycle) is a new epoch; events of an older one are ignored")
    recycles: int = Field(default=0, description="planned restarts (recycle_turns, "
                          "recycle_rss_mb, recycle_children): not failures")
    session_id: str | None
    last_exit: LastExit | None
    error: str | None = None
    note: str | None = None
    waiting: str | None = Field(default=None, description="why its start waits: \"waiting for "
                                "memory (needs ~300 MiB; 1.1 GiB free above the 2 GiB "
                                "reserve)\"; its messages stay queued (docs/scaling.md)")
    queued: int = 0
    asleep_since: float | None = Field(default=None, description="launch asleep: when it fell "
                                       "asleep (seconds since the epoch); its next message "
                                       "wakes it (docs/scaling.md, \"Idle members asleep\")")
    turn: str | None = Field(default=None, description="the message id of the turn in flight")
    spend: Spend | None = None
    hold: str | None = Field(default=None, description="why the member's queue is held (a "
                             "budget reached; its account's window: \"held: claude:operator "
                             "five-hour window until 15:34\", or past the reserve kept for the "
                             "top priority); messages stay queued")
    account: str | None = Field(default=None, description="the quota account it spends "
                                "(claude:operator, anthropic:key…3f2a): members of one account "
                                "share its rate-limit window (teamctl accounts)")
    task: str | None = Field(default=None, description="its current task on the board: "
                             "\"T3 title\" (\" (review)\" when in review; several: \"; \")")
    slots: dict[str, str] = Field(default_factory=dict, description="its slots ([team] "
                                  "slots): each variable and the value its environment holds, "
                                  "as a string (docs/operations.md)")


class PullDoc(Doc):
    """A task's pull request (docs/forge.md, "Pull requests")."""

    task: int
    number: int | None = Field(description="the pull request's number (None: not opened yet)")
    url: str | None
    branch: str
    state: Literal["pending", "open", "merged", "closed", "needs_you"] = Field(
        description="pending (to push or open), open, merged, closed, needs_you (CI failed "
        "past ci_retries)")
    failed_heads: int = Field(description="heads whose CI failed (ci_retries counts them)")
    note: str | None = Field(description="the last failure (a refused push says which "
                             "permission is missing) or why it needs the operator")


class ForgeStatusDoc(Doc):
    """A team's forge (docs/forge.md) as ``status`` shows it: never its token."""

    repo: str
    rounds: int = Field(description="intake rounds done since the team launched")
    error: str | None = Field(description="the last round's failure: its code and message")
    remaining: int | None = Field(description="requests left in the rate-limit window")
    reset: float | None = Field(description="when the window resets (epoch seconds)")
    waiting_until: float | None = Field(description="a spent window: polling waits until")
    pulls: list[PullDoc] = Field(default=[], description="the team's pull requests, newest "
                                 "first (at most 100)")


class TeamStatus(Doc):
    name: str
    members: list[MemberStatus]
    spend: Spend | None = None
    forge: ForgeStatusDoc | None = None
    already_running: bool = False
    resumed: bool = False
    applied: list[str] = Field(default=[], description="what a launch of the running team's "
                               "file applied to it: [\"memory_reserve\"] (the only key a "
                               "relaunch changes live: docs/scaling.md)")


class StatusDoc(Doc):
    """``teamctl status --json``."""

    teams: list[TeamStatus]


class LaunchResult(Doc):
    """``teamctl launch --json``."""

    ok: bool
    team: str
    members: list[MemberStatus]
    already_running: bool = False
    resumed: bool = False
    applied: list[str] = []


class RestartResult(TeamStatus):
    """``restart``: the member's team after the restart."""

class StopResult(Doc):
    stopped: list[str]
    daemon_stopping: bool


class Ping(Doc):
    pid: int


class LaunchParams(Params):
    config: dict[str, Any]
    file: str
    wait: bool = True
    timeout: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False)
