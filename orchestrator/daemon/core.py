"""The daemon's core, built in one place: the journal's users (approvals, ledger), the
supervisor and its launch factory, the attachment pipeline, the mailbox, described images, the
team operations, the router and the board — wired to each other and to a change feed.

``daemon.main`` (the composition root) builds it around the real runtime adapters and serves
it; ``tests/fakes.py`` builds the very same core around a fake runtime, so what the fast tests
prove is what the daemon runs. The core names runtimes only through the port
(``orchestrator.ports``) and the capability fields of ``orchestrator.runtime_table``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from orchestrator.attachments.artifacts import ArtifactStore
from orchestrator.attachments.catalog import load_catalog
from orchestrator.attachments.loader import VariantLoader
from orchestrator.attachments.planner import Planner
from orchestrator.daemon.approvals import Approvals
from orchestrator.daemon.board import DEFAULT_GRACE, Board
from orchestrator.daemon.board_gate import Gates
from orchestrator.daemon.board_leases import LEASE_CHECK_INTERVAL, Leases
from orchestrator.daemon.board_members import working_on
from orchestrator.daemon.board_offers import Offers
from orchestrator.daemon.changes import Changes
from orchestrator.daemon.describe import Descriptions
from orchestrator.daemon.launch import LaunchFactory
from orchestrator.daemon.ledger import Ledger
from orchestrator.daemon.mailbox import Mailbox
from orchestrator.daemon.router import Router
from orchestrator.daemon.supervisor import Supervisor
from orchestrator.daemon.teams import Teams
from orchestrator.daemon.variant_cache import JournalVariantCache
from orchestrator.runtime_table import runtime_info

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import Capabilities, Host, ImageDescriber
    from orchestrator.daemon.launch import HostFactory, VisionLookup
    from orchestrator.daemon.lifecycle import Sleep
    from orchestrator.daemon.store import AsyncStore
    from orchestrator.daemon.worktrees import PlacedWorktrees
    from orchestrator.git_run import GitViews
    from orchestrator.paths import Home
    from orchestrator.ports import Runtime

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
                     launch_checks: Sequence[Callable[[TeamConfig], None]] = ()) -> Core:
    """The core over ``store``, its tasks in ``tg``. ``runtimes`` and ``describers``: the
    adapters by runtime name; ``hosts``: each member's host, ``local_host``: this machine's
    (where describers run) — the runtimes' classes, so the core imports none;
    ``clock``/``sleep``: the supervisor's and the router's time (a test's manual clock);
    ``lease_check_interval``: how often a lapsed task is looked for (a test's is short);
    ``placed``: where each launch's worktrees are told to the composition root (a sandboxed
    member's view of git), ``git_views``: the boundary teamctl's git on a sandboxed member's
    tree runs in (None: refused); ``launch_checks``: what must hold before a team starts (the
    composition root's: a ``[notify]`` that can start)."""
    changes = Changes()
    approvals = Approvals(store)
    approvals.on_change = changes.bump
    ledger = Ledger(store, tg)
    ledger.on_change = changes.bump
    await ledger.load()
    launches = LaunchFactory(
        home, load_session=lambda t, m: store.session_id(t, m),
        vision=vision, approvals=approvals, ledger=ledger, hosts=hosts)
    supervisor = Supervisor(
        runtimes, tg, launches=launches,
        save_session=lambda t, m, s: store.set_session_id(t, m, s),
        clock=clock, sleep=sleep, on_change=changes.bump)
    artifacts = ArtifactStore(home.artifacts)
    planner = Planner(artifacts, load_catalog(), JournalVariantCache(store))
    loader = VariantLoader(artifacts)
    mailbox = Mailbox(store, supervisor, loader, tg, ledger=ledger)
    mailbox.on_change = changes.bump
    ledger.on_release = mailbox.poke
    ledger.on_budget_change = functools.partial(_budget_changed, supervisor)
    capabilities = _Capabilities(runtimes)
    descriptions = Descriptions(store, planner, loader, describers or {}, capabilities, home,
                                ledger=ledger, host=local_host)
    teams = Teams(store, supervisor, mailbox, planner, capabilities,
                  worktree_root=home.worktrees, ledger=ledger, descriptions=descriptions,
                  placed=placed, git_views=git_views, launch_checks=launch_checks)
    teams.on_change = changes.bump
    router = Router(teams, supervisor, store, home=home, vision=vision, clock=clock)
    mailbox.on_answered = router.on_answered
    board = await _board(store, tg, teams, supervisor, mailbox, changes, ledger,
                         lease_check_interval)
    router.working_on = functools.partial(working_on, board)  # a message's task
    return Core(home, store, changes, approvals, ledger, supervisor, artifacts, mailbox, teams,
                router, board)


def _budget_changed(supervisor: Supervisor, team: str, member: str | None) -> None:
    """A budget changed: members whose CLI holds a budget backstop as an argument of its
    process (``budget_backstop``) get a new one — recycle them (after the turn in flight)."""
    for state in supervisor.members(team):
        if runtime_info(state.config.runtime).budget_backstop and member in (None, state.name):
            supervisor.recycle_member(team, state.name, "its budget changed")


async def _board(store: AsyncStore, tg: TaskGroup, teams: Teams, supervisor: Supervisor,
                 mailbox: Mailbox, changes: Changes, ledger: Ledger,
                 interval: float) -> Board:
    """The board, live (docs/board.md): gates that run checks and ask reviewers, leases that
    follow the supervisor's launches, idle claimers handed the next ready task; every
    change on the change feed. What a dead daemon left in progress gets the grace."""
    async def send(team: str, member: str, text: str, task_id: int) -> str:
        return await mailbox.send(team, member, text, task_id=task_id)

    gates = Gates(teams, supervisor, send)
    board = Board(store, gate=gates.gate)
    board.on_gated = gates.gated
    board.reviewer = lambda team: None if (c := teams.running(team)) is None \
        else c.board.review_by
    offers = Offers(store, board, teams, supervisor, mailbox.poke,
                    held=lambda team, member: ledger.gate(team, member) is not None)

    def changed(team: str | None) -> None:
        changes.bump()
        offers.poke(team)

    board.on_change = changed
    mailbox.on_idle = offers.on_idle
    teams.tasks_of = board.held
    leases = Leases(board, teams)
    supervisor.on_launch.append(leases.launched)
    supervisor.on_exit.append(leases.exited)
    await board.daemon_started(now=board.clock(), grace=DEFAULT_GRACE)
    tg.start_soon(leases.expire_loop, interval, name="board leases")
    # a cooldown is minutes long: a release is looked at within ten lease intervals (10 s);
    # a board that does not change is never read (an idle daemon sleeps)
    tg.start_soon(offers.cooldown_loop, 10 * interval, name="board cooldowns")
    return board
