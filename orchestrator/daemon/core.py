"""The daemon's core, built in one place: the journal's users (approvals, ledger), the
supervisor and its launch factory, the attachment pipeline, the mailbox, described images, the
team operations, the router and the board — wired to each other and to a change feed.

``daemon.main`` (the composition root) builds it around the real runtime adapters and serves
it; ``tests/support/fakes.py`` builds the very same core around a fake runtime, so what the fast
tests prove is what the daemon runs. The core names runtimes only through the port
(``orchestrator.ports``) and the capability fields of ``orchestrator.runtime_table``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from orchestrator.attachments.artifacts import ArtifactStore
from orchestrator.attachments.catalog import load_catalog
from orchestrator.attachments.loader import VariantLoader
from orchestrator.attachments.planner import Planner
from orchestrator.daemon.admission import Admission, AdmissionSettings, FootprintJournal, Footprints
from orchestrator.daemon.approvals import Approvals
from orchestrator.daemon.board import (
    DEFAULT_GRACE,
    LEASE_CHECK_INTERVAL,
    Board,
    Gates,
    Leases,
    Offers,
    Silence,
    working_on,
)
from orchestrator.daemon.changes import Changes
from orchestrator.daemon.describe import Descriptions
from orchestrator.daemon.forge import Forges, open_forge
from orchestrator.daemon.journal import JournalVariantCache
from orchestrator.daemon.land import Land
from orchestrator.daemon.ledger import Ledger
from orchestrator.daemon.mailbox import Mailbox
from orchestrator.daemon.members import Ceilings, LaunchFactory, Supervisor, home_id
from orchestrator.daemon.quota import probe_after_from_env
from orchestrator.daemon.router import Router
from orchestrator.daemon.slots import PortCheck, Slots, port_free
from orchestrator.daemon.teams import Teams
from orchestrator.daemon.telemetry import DELAYS, Delays, Telemetry, TraceJournal
from orchestrator.errors import NotFound, TeamctlError
from orchestrator.runtime_table import runtime_info
from orchestrator.telemetry_config import export_settings

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from orchestrator.cgroups import Cgroups
    from orchestrator.config import TeamConfig
    from orchestrator.contracts import Capabilities, Host, ImageDescriber
    from orchestrator.daemon.board import GateResult
    from orchestrator.daemon.members import HostFactory, Sleep, VisionLookup
    from orchestrator.daemon.queue import AsyncStore, Delivery
    from orchestrator.daemon.worktrees import PlacedWorktrees
    from orchestrator.git_run import GitViews
    from orchestrator.paths import Home
    from orchestrator.ports import Runtime
    from orchestrator.protocol.board import TaskDoc
    from orchestrator.protocol.teams import EgressStatus

__all__ = ["Core", "build_core", "catalog_vision"]


def catalog_vision(runtime: str, model: str | None, override: bool | None) -> bool | None:
    """Whether a member's model sees images: the operator's ``vision``, else the catalog."""
    return load_catalog().lookup(runtime, model, operator_vision=override).image_input


class _Capabilities(Mapping[str, "Capabilities"]):
    """Each runtime's transport capabilities, read from its adapter when first asked for —
    an adapter the team never uses is never imported (the registry loads them lazily)."""

    def __init__(self, runtimes: Mapping[str, Runtime]) -> None:
        self._runtimes = runtimes

    def __getitem__(self, name: str) -> Capabilities:
        return self._runtimes[name].capabilities

    def __iter__(self) -> Iterator[str]:
        return iter(self._runtimes)

    def __len__(self) -> int:
        return len(self._runtimes)


def _no_egress(team: str, member: str) -> EgressStatus | None:
    """No egress proxies (a core without the composition root's sandboxes: the tests')."""
    return None


class _Late:
    """The parts a wire pointing up the construction order reaches: each set once, as soon
    as it is built, and read only when a wire is called."""

    supervisor: Supervisor
    mailbox: Mailbox
    router: Router
    board: Board
    offers: Offers
    leases: Leases
    land: Land
    forges: Forges
    silence: Silence
    telemetry: Telemetry


async def _answered(late: _Late, delivery: Delivery, reply: str) -> None:
    """A delivery was answered: a teammate's reply routed back, a silent turn on a held task
    forwarded (board/_silence.py)."""
    await late.router.on_answered(delivery, reply)
    await late.silence.on_answered(delivery, reply)


@dataclass
class Core:
    """The core's parts, for the composition root (and the tests) to serve and inspect."""

    home: Home
    store: AsyncStore
    changes: Changes
    approvals: Approvals
    ledger: Ledger
    supervisor: Supervisor
    artifacts: ArtifactStore
    mailbox: Mailbox
    teams: Teams
    router: Router
    board: Board
    offers: Offers  # the board's idle claimers (the mailbox's ``on_idle``)
    admission: Admission  # the members waiting for memory (docs/scaling.md)
    land: Land  # the merge queue (docs/land.md)
    forges: Forges  # each running team's forge loop (docs/forge.md)
    telemetry: Telemetry  # each ended attempt exported (docs/telemetry.md)


async def build_core(home: Home, store: AsyncStore, tg: TaskGroup, *,
                     runtimes: Mapping[str, Runtime],
                     describers: Mapping[str, ImageDescriber] | None = None,
                     hosts: HostFactory, local_host: Host,
                     vision: VisionLookup = catalog_vision,
                     clock: Callable[[], float] = time.monotonic,
                     sleep: Sleep = anyio.sleep,
                     lease_check_interval: float = LEASE_CHECK_INTERVAL,
                     placed: PlacedWorktrees | None = None,
                     git_views: GitViews | None = None,
                     launch_checks: Sequence[Callable[[TeamConfig], None]] = (),
                     bare_hosts: HostFactory | None = None,
                     egress_of: Callable[[str, str], EgressStatus | None] = _no_egress,
                     ports: PortCheck = port_free,
                     cgroups: Cgroups | None = None,
                     admission: AdmissionSettings | None = None,
                     environ: Mapping[str, str] | None = None,
                     telemetry_delays: Delays = DELAYS) -> Core:
    """The core over ``store``, its tasks in ``tg``. ``runtimes`` and ``describers``: the
    adapters by runtime name; ``hosts``: each member's host, ``local_host``: this machine's
    (where describers run) — the runtimes' classes, so the core imports none;
    ``clock``/``sleep``: the supervisor's and the router's time (a test's manual clock);
    ``lease_check_interval``: how often a lapsed task is looked for (a test's is short);
    ``placed``: where each launch's worktrees are told to the composition root (a sandboxed
    member's view of git), ``git_views``: the boundary teamctl's git on a sandboxed member's
    tree runs in (None: refused); ``launch_checks``: what must hold before a team starts (the
    composition root's: a ``[notify]`` that can start); ``bare_hosts``: a member's host
    without its sandbox, as a launch check asks it (None: ``hosts``); ``egress_of``: a
    sandboxed member's egress proxy as status shows it (the composition root's proxies);
    ``ports``: whether a
    member's port is free here (a test's fake); ``cgroups``: where members' ceilings are held
    (None: this machine's cgroups; a test's fake tree); ``admission``: where memory admission
    reads this machine's memory and how often (None: /proc, or the test switches in the
    environment); ``environ``: where telemetry reads the standard ``OTEL_EXPORTER_OTLP_*``
    variables (None: the daemon's environment); ``telemetry_delays``: how long telemetry
    gathers ended attempts and spans before it reads and sends them, and how often metrics
    leave when not the team's ``metric_interval`` (a test's are short).

    Each part is built whole, with its collaborators, in dependency order. The wires that
    point up that order — the ledger releases a held member into the mailbox and recycles the
    supervisor's members whose budget changed, the supervisor tells the board's leases of a
    launch and asks the board who holds a task (``max_running``), the mailbox tells the router
    of an answer and the board's offers of an idle member, status asks the board for each
    member's task, a board change pokes the offers — are late-bound: a closure over the part
    built below (``_Late``), called only once it is built (no member runs before
    ``build_core`` returns)."""
    late = _Late()
    env = os.environ if environ is None else environ
    changes = Changes()
    approvals = Approvals(store, on_change=changes.bump)
    ledger = Ledger(store, tg, on_change=changes.bump,
                    on_release=lambda team, member: late.mailbox.poke(team, member),
                    on_budget_change=lambda team, member: _budget_changed(
                        late.supervisor, team, member),
                    probe_after=probe_after_from_env())
    await ledger.load()
    slots = Slots(store, ports=ports)
    admit = await _admission(store, tg, admission or AdmissionSettings.from_env(), late)
    launches = LaunchFactory(
        home, load_session=lambda t, m: store.session_id(t, m),
        vision=vision, approvals=approvals, ledger=ledger, hosts=hosts, slots=slots.env_of,
        own_telemetry=lambda team, member: late.telemetry.own(team, member),
        tools=lambda team, member: late.telemetry.tools(team, member))
    if cgroups is None:
        from orchestrator.cgroups import Cgroups

        cgroups = Cgroups()
    ceilings = Ceilings(cgroups, functools.partial(home_id, home.root),
                        hosts=bare_hosts or hosts)
    supervisor = late.supervisor = Supervisor(
        runtimes, tg, launches=launches,
        save_session=lambda t, m, s: store.set_session_id(t, m, s),
        gate=admit, clock=clock, sleep=sleep, on_change=changes.bump,
        on_launch=[lambda state: late.leases.launched(state), admit.launched,
                   lambda state: late.land.launched(state),
                   lambda state: late.forges.launched(state)],
        on_exit=[lambda state: late.leases.exited(state), admit.exited], ceilings=ceilings,
        holding=lambda team: late.board.held(team))
    artifacts = ArtifactStore(home.artifacts)
    planner = Planner(artifacts, load_catalog(), JournalVariantCache(store))
    loader = VariantLoader(artifacts)
    mailbox = late.mailbox = Mailbox(
        store, supervisor, loader, tg, ledger=ledger, on_change=changes.bump,
        on_answered=lambda delivery, reply: _answered(late, delivery, reply),
        on_idle=lambda team, member: late.offers.on_idle(team, member),
        on_ended=lambda delivery: late.telemetry.ended(delivery))
    capabilities = _Capabilities(runtimes)
    descriptions = Descriptions(store, planner, loader, describers or {}, capabilities, home,
                                ledger=ledger, host=local_host)
    teams = Teams(store, supervisor, mailbox, planner, capabilities,
                  worktree_root=home.worktrees, ledger=ledger, descriptions=descriptions,
                  slots=slots, placed=placed, git_views=git_views,
                  launch_checks=[*launch_checks, ceilings.check,
                                 functools.partial(_telemetry_can_start, env)],
                  on_change=changes.bump, egress_of=egress_of, admission=admit,
                  tasks_of=lambda team: late.board.held(team),
                  forge_of=lambda team: late.forges.doc(team))
    telemetry = late.telemetry = Telemetry(
        TraceJournal(store), config_of=teams.running,
        sample=functools.partial(_gauges, teams, supervisor, store, approvals, ledger),
        environ=env, turn_of=functools.partial(_turn_of, supervisor), delays=telemetry_delays)
    tg.start_soon(telemetry.run, name="telemetry")
    board = late.board = await _board(store, tg, teams, supervisor, mailbox, changes, ledger,
                                      late, lease_check_interval)
    late.silence = Silence(board, store)
    land = late.land = Land(store, board, teams, supervisor, tg, root=home.root / "land",
                            on_change=changes.bump,
                            on_landed=lambda team: late.forges.poke(team),
                            on_checked=telemetry.checked)
    late.forges = forges = Forges(store, board, teams.running, tg, open_forge=open_forge,
                                  landings=land,
                                  epoch_of=functools.partial(_running_epoch, supervisor))
    await land.start()
    late.router = router = Router(teams, supervisor, store, home=home, vision=vision,
                                  clock=clock, working_on=functools.partial(working_on, board))
    return Core(home, store, changes, approvals, ledger, supervisor, artifacts, mailbox, teams,
                router, board, late.offers, admit, land, forges, telemetry)


async def _admission(store: AsyncStore, tg: TaskGroup, settings: AdmissionSettings,
                     late: _Late) -> Admission:
    """Memory admission (docs/scaling.md, "Starts that fit"): the footprints learned so far,
    the board asked who holds a task (the line's order), its loop running."""
    footprints = Footprints(FootprintJournal(store))
    await footprints.load()
    admission = Admission(footprints, settings.memory,
                          holds_task=lambda team: late.board.held(team),
                          poll_interval=settings.poll_interval,
                          sample_interval=settings.sample_interval, measure=settings.measure)
    tg.start_soon(admission.run, name="memory admission")
    return admission


def _turn_of(supervisor: Supervisor, team: str, member: str) -> str | None:
    """The message of ``member``'s turn in flight (None: none, or no such member)."""
    try:
        return supervisor.member(team, member).slot.turn
    except NotFound:
        return None


def _telemetry_can_start(environ: Mapping[str, str], config: TeamConfig) -> None:
    """Refuse a launch whose ``[telemetry]`` could not export (``TelemetryConfigInvalid``,
    exit 2): no endpoint, a bad standard variable, ``headers_env`` not set."""
    if config.telemetry is not None:
        export_settings(config.telemetry, environ)


async def _gauges(teams: Teams, supervisor: Supervisor, store: AsyncStore,
                  approvals: Approvals, ledger: Ledger) -> dict[str, dict[tuple[str, ...], float]]:
    """What telemetry's gauges read now, per (team, member): the queue's depth, restarts,
    approvals waiting, held by a budget or a quota window."""
    found: dict[str, dict[tuple[str, ...], float]] = {
        "teamctl.queue.depth": {}, "teamctl.member.restarts": {},
        "teamctl.approvals.waiting": {}, "teamctl.member.held": {}}
    for team in teams.names():
        queued = await store.queued_counts(team)
        for state in supervisor.members(team):
            key = (team, state.name)
            found["teamctl.queue.depth"][key] = queued.get(state.name, 0)
            found["teamctl.member.restarts"][key] = state.restarts
            found["teamctl.member.held"][key] = float(ledger.gate(team, state.name) is not None)
            found["teamctl.approvals.waiting"][key] = 0
        for pending in (await approvals.query(team)).approvals:
            key = (team, pending.member)
            found["teamctl.approvals.waiting"][key] = found["teamctl.approvals.waiting"].get(
                key, 0) + 1
    return found


def _running_epoch(supervisor: Supervisor, team: str, member: str) -> int | None:
    """The member's launch epoch while it runs (None: no process of it runs now)."""
    try:
        state = supervisor.member(team, member)
    except TeamctlError:
        return None
    return state.epoch if state.launch == "running" else None


def _budget_changed(supervisor: Supervisor, team: str, member: str | None) -> None:
    """A budget changed: members whose CLI holds a budget backstop as an argument of its
    process (``budget_backstop``) get a new one — recycle them (after the turn in flight)."""
    for state in supervisor.members(team):
        if runtime_info(state.config.runtime).budget_backstop and member in (None, state.name):
            supervisor.recycle_member(team, state.name, "its budget changed")


async def _board(store: AsyncStore, tg: TaskGroup, teams: Teams, supervisor: Supervisor,
                 mailbox: Mailbox, changes: Changes, ledger: Ledger, late: _Late,
                 interval: float) -> Board:
    """The board, live (docs/board.md): gates that run checks and ask reviewers, leases that
    follow the supervisor's launches, idle claimers handed the next ready task, a task that
    became done handed to the merge queue; every change on the change feed. What a dead
    daemon left in progress gets the grace."""
    def changed(team: str | None) -> None:
        changes.bump()
        late.offers.poke(team)

    gates = Gates(teams, supervisor, lambda task_id, notice: late.board.tell(task_id, notice))

    async def gated(task: TaskDoc, result: GateResult) -> None:
        await gates.gated(task, result)
        if task.status == "done":
            await late.land.task_done(task)
            await late.forges.task_done(task)
        elif task.status == "review":
            await late.land.task_reviewed(task)

    board = Board(store, gate=gates.gate, on_gated=gated, on_change=changed,
                  on_told=mailbox.poke, on_checked=lambda ran: late.telemetry.checked(ran),
                  reviewer=lambda team: None if (c := teams.running(team)) is None
                  else c.board.review_by)
    late.offers = offers = Offers(
        store, board, teams, supervisor, mailbox.poke,
        held=lambda team, member: ledger.gate(team, member) is not None)
    late.leases = leases = Leases(board, teams)
    await board.daemon_started(now=board.clock(), grace=DEFAULT_GRACE)
    tg.start_soon(leases.expire_loop, interval, name="board leases")
    # a cooldown is minutes long: a release is looked at within ten lease intervals (10 s);
    # a board that does not change is never read (an idle daemon sleeps)
    tg.start_soon(offers.cooldown_loop, 10 * interval, name="board cooldowns")
    return board
