"""Building a member's launch: everything a runtime needs to start its process, assembled apart
from the supervisor (which only starts, watches, restarts and stops what this builds).

Where a member runs (its host and workdir), its executable, its private directory, its
environment, teamctl's MCP wiring with this launch's token, its approvals channel (the ``ask``
profile), its meter and, for a runtime whose CLI takes one, its budget backstop.
"""

from __future__ import annotations

import copy
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.attachments.catalog import load_catalog
from orchestrator.contracts import LaunchSpec
from orchestrator.daemon.approvals import parse_rule
from orchestrator.daemon.members._dirs import private_dirs
from orchestrator.errors import MemberStartFailed
from orchestrator.runtime_table import runtime_info

if TYPE_CHECKING:
    from orchestrator.config import MemberConfig, TeamConfig
    from orchestrator.contracts import Host, ToolLog
    from orchestrator.daemon.approvals import Approvals, MemberApprover
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.daemon.members.state import MemberState
    from orchestrator.paths import Home
    from orchestrator.ports import Runtime

__all__ = ["HostFactory", "LaunchFactory", "SessionLoad", "SlotLookup", "TelemetryLookup",
           "VisionLookup"]

SessionLoad = Callable[[str, str], Awaitable[str | None]]
# a member's slots (``daemon.slots``): the variables its team gives it, by (team, member)
SlotLookup = Callable[[str, str], Mapping[str, str]]
# (team, member) → the env and config that point its CLI's own telemetry at the collector
TelemetryLookup = Callable[[str, str], tuple[Mapping[str, str], Mapping[str, Any]]]
VisionLookup = Callable[[str, str | None, bool | None], bool | None]
# where each member runs (``contracts.Host``), from the composition root: this machine's host
# for a member the team file puts nowhere else (the core imports no runtime module)
HostFactory = Callable[["TeamConfig", "MemberConfig"], "Host"]


def native_pdfs(config: MemberConfig) -> bool:
    """Whether the planner sends this member PDFs natively when its runtime carries them
    (docs/documents.md): ``documents = "native"``, or no choice and the catalog's ``pdf``."""
    if config.documents is not None:
        return config.documents == "native"
    return load_catalog().lookup(config.runtime, config.model).pdf is True


class LaunchFactory:
    """Builds each launch of a member (``spec``) and says where a member runs (``place``)."""

    def __init__(self, home: Home, *, load_session: SessionLoad,
                 vision: VisionLookup = lambda runtime, model, override: override,
                 approvals: Approvals | None = None, ledger: Ledger | None = None,
                 hosts: HostFactory, slots: SlotLookup = lambda team, member: {},
                 own_telemetry: TelemetryLookup = lambda team, member: ({}, {}),
                 tools: Callable[[str, str], ToolLog | None] = lambda team, member: None
                 ) -> None:
        """``hosts`` gives every member its host (this machine's, or another one's);
        ``slots`` its slots' values, put in its environment; ``own_telemetry`` what points
        its CLI's own telemetry at the team's collector (env, config: the member's own win);
        ``tools`` where its runtime reports its tool calls (telemetry's record)."""
        self.home = home
        self._load_session = load_session
        self._vision = vision
        self._approvals = approvals
        self._ledger = ledger
        self._hosts = hosts
        self._slots = slots
        self._own_telemetry = own_telemetry
        self._tools = tools

    def place(self, team: TeamConfig, member: MemberConfig,
              workdirs: Mapping[str, Path]) -> tuple[str, Host]:
        """The member's workdir (``workdirs``: those in a worktree; for a member the team file
        puts on another host, a path there, "~" its remote home) and its host."""
        host = self._hosts(team, member)
        if team.resolved(member).ssh_host is None and team.resolved(member).kubernetes is None:
            # the team file names no other machine
            return str(workdirs.get(member.name) or team.resolved(member).workdir), host
        return team.resolved(member).remote_workdir or "~", host

    async def spec(self, state: MemberState, runtime: Runtime) -> LaunchSpec:
        """This launch's spec; gives ``state`` a new MCP token (earlier ones stop working)
        and its approver. Raises MemberStartFailed (no executable, workdir, private dir)."""
        config = state.config
        command, args = config.command_line()
        executable = state.host.find_executable(state.name, command,
                                                env_var=runtime.env_var,
                                                default=runtime.default_executable)
        local_workdir = state.host.local_path(state.workdir)  # None: checked there at start
        if local_workdir is not None and not await anyio.Path(local_workdir).is_dir():
            raise MemberStartFailed(state.name, f"its workdir {state.workdir} is not a "
                                    "directory (create it, or fix workdir in the team file)")
        state_dir = self._private_dir(state)
        inherited = {k: os.environ[k] for k in config.pass_env if k in os.environ}
        state.token = token = secrets.token_urlsafe(24)  # a new launch: earlier ones stop
        telemetry_env, telemetry_config = self._own_telemetry(state.team, state.name)
        return LaunchSpec(
            team=state.team, member=state.name, executable=executable, model=config.model,
            prompt=config.prompt, workdir=Path(state.workdir),
            state_dir=state_dir, args=args,
            # a slot's variable is never the member's env's or pass_env's (config.py refuses it)
            env={**inherited, **self._slots(state.team, state.name), **telemetry_env,
                 **config.env},
            # an adapter may add to its tables; a table the member's config has is its own
            config=copy.deepcopy({**telemetry_config, **config.config}),
            session_id=await self._load_session(state.team, state.name),
            start_timeout=config.start_timeout, turn_idle_timeout=config.turn_idle_timeout,
            interrupt_grace=config.interrupt_grace,
            image_input=self._vision(config.runtime, config.model, config.vision),
            pdf_input=native_pdfs(config),
            login=state.member.login, permissions=state.member.permissions,
            mcp=state.host.mcp_server(token, home=self.home.root, socket=self.home.socket,
                                      state_dir=state_dir) if config.messaging else None,
            mcp_listed=self._mcp_listed(state) if config.messaging else None,
            options={key: getattr(config, key) for key in runtime_info(config.runtime).options},
            approver=self._approver(state),
            meter=None if self._ledger is None else await self._ledger.meter(
                state.team, state.name, config.runtime, config.model),
            max_budget_usd=self._backstop(state),
            tools=self._tools(state.team, state.name),
            host=state.host,
        )

    @staticmethod
    def _mcp_listed(state: MemberState) -> Callable[[], Awaitable[object]]:
        """This launch's "tools listed" signal (``member.tools_listed`` sets it)."""
        state.mcp_listed = listed = anyio.Event()
        return listed.wait

    def _private_dir(self, state: MemberState) -> Path:
        """The member's private dir (the daemon's) and the runtime home in it."""
        try:
            return private_dirs(self.home.member_dir(state.team, state.name))
        except OSError as exc:
            raise MemberStartFailed(state.name, f"cannot create its private directory: "
                                    f"{exc.strerror}") from exc

    def _backstop(self, state: MemberState) -> float | None:
        """The CLI's own budget argument, for a runtime that takes one (``budget_backstop``)."""
        if self._ledger is None or not runtime_info(state.config.runtime).budget_backstop:
            return None
        return self._ledger.backstop_usd(state.team, state.name)

    def _approver(self, state: MemberState) -> MemberApprover | None:
        """The ``ask`` profile's channel to the operator, for this launch only."""
        if state.member.permissions != "ask" or self._approvals is None:
            state.approver = None
            return None
        state.approver = self._approvals.approver(
            state.team, state.name, state.config.runtime,
            allow=[parse_rule(rule) for rule in state.member.allow],
            current_message=lambda: state.slot.turn,
            workdir=state.host.local_path(state.workdir))  # path rules' root (None: elsewhere)
        return state.approver
