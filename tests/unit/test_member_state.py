"""A member's launch as a state machine (orchestrator/daemon/members/state.py): every arrow of
the transition table can be taken, every other move is refused and moves nothing, each move is
logged once as ``member_state`` from → to (why), readiness is a function of the state, and the
members package has no import cycle, counting the imports made only for type checking."""

from __future__ import annotations

import ast
from collections import deque
from types import SimpleNamespace
from typing import TYPE_CHECKING, get_args

import pytest
from structlog.testing import capture_logs

from orchestrator.config import TeamConfig
from orchestrator.daemon.members.state import TRANSITIONS, LaunchState, MemberState, readiness
from orchestrator.errors import TransitionRefused
from orchestrator.protocol.teams import Launch
from runtimes.hosts.local.host import LocalHost
from tests.support.driver import REPO

if TYPE_CHECKING:
    from orchestrator.ports import RuntimeProcess

ARROWS = [(was, to) for was, targets in TRANSITIONS.items() for to in sorted(targets)]
NOT_ARROWS = [(was, to) for was in LaunchState for to in LaunchState
              if to not in TRANSITIONS[was]]


def _member() -> MemberState:
    team = TeamConfig.model_validate({"team": {"name": "web"}, "members": [
        {"name": "lead", "runtime": "claude"}]})
    return MemberState(team="web", member=team.resolved(team.members[0]), workdir="/",
                       host=LocalHost())


def _path_to(target: LaunchState) -> list[LaunchState]:
    """The shortest run of arrows from ``pending`` to ``target``."""
    came: dict[LaunchState, LaunchState | None] = {LaunchState.PENDING: None}
    todo = deque([LaunchState.PENDING])
    while todo:
        state = todo.popleft()
        for to in sorted(TRANSITIONS[state]):
            if to not in came:
                came[to] = state
                todo.append(to)
    assert target in came, f"{target} cannot be reached from pending"
    path: list[LaunchState] = []
    at: LaunchState | None = target
    while at is not None and at is not LaunchState.PENDING:
        path.append(at)
        at = came[at]
    return path[::-1]


def _member_in(state: LaunchState) -> MemberState:
    member = _member()
    for step in _path_to(state):
        member.move(step, "on the way")
    return member


def test_the_table_names_every_state_and_only_stopped_ends_it() -> None:
    assert set(TRANSITIONS) == set(LaunchState)
    assert [s for s in LaunchState if not TRANSITIONS[s]] == [LaunchState.STOPPED]
    # 42, and six for waiting for memory: starting and waking to it, it back to either
    # (admission: docs/scaling.md), and to fatal or stopped as every live state
    assert len(ARROWS) == 48


@pytest.mark.parametrize(("was", "to"), ARROWS, ids=[f"{a}->{b}" for a, b in ARROWS])
def test_every_arrow_of_the_table_is_a_move_a_member_can_make(
        was: LaunchState, to: LaunchState) -> None:
    member = _member_in(was)
    member.move(to, "because")
    assert (member.launch_state, member.why) == (to, "because")


@pytest.mark.parametrize(("was", "to"), NOT_ARROWS, ids=[f"{a}->{b}" for a, b in NOT_ARROWS])
def test_a_move_the_table_has_no_arrow_for_is_refused_and_moves_nothing(
        was: LaunchState, to: LaunchState) -> None:
    member = _member_in(was)
    with capture_logs() as logs, pytest.raises(TransitionRefused) as refused:
        member.move(to, "a bug")
    assert member.launch_state is was
    assert (refused.value.was, refused.value.to, refused.value.code) == (
        was.value, to.value, "transition_refused")
    assert logs == [], "a refused move is not logged as a move"


def test_each_move_is_logged_once_as_from_to_why() -> None:
    member = _member()
    with capture_logs() as logs:
        member.move(LaunchState.STARTING, "launch 1")
        member.move(LaunchState.RUNNING, "ready, pid 7")
    assert [(e["event"], e["from"], e["to"], e["why"], e["team"], e["member"]) for e in logs] == [
        ("member_state", "pending", "starting", "launch 1", "web", "lead"),
        ("member_state", "starting", "running", "ready, pid 7", "web", "lead")]


def test_the_socket_shows_the_launch_words_it_always_showed() -> None:
    """The finer states show as the word the protocol has (``protocol.teams.Launch``); asleep
    is the one a user reads for a sleeping member."""
    shown = {state: _member_in(state).launch for state in LaunchState}
    assert set(shown.values()) == set(get_args(Launch)), "every word is shown by some state"
    assert shown[LaunchState.WAKING] == "starting"
    assert {shown[s] for s in (LaunchState.DRAINING, LaunchState.RECYCLING,
                               LaunchState.FALLING_ASLEEP)} == {"running"}
    assert [s for s in LaunchState if shown[s] == "asleep"] == [LaunchState.ASLEEP]
    assert [s for s in LaunchState if _member_in(s).waking] == [LaunchState.WAKING]
    assert shown[LaunchState.WAITING] == "waiting"  # for memory: status says it, and why


def test_a_sleep_goes_running_falling_asleep_asleep_waking_running_and_nowhere_else() -> None:
    """The sleep's arrows: only a running member falls asleep (never one draining: its turn
    is in flight), an asleep one only wakes (or is stopped), and a member past
    ``max_running`` at its launch is asleep before it ever started."""
    into = {was for was, targets in TRANSITIONS.items() if LaunchState.FALLING_ASLEEP in targets}
    assert into == {LaunchState.RUNNING}
    assert {was for was, targets in TRANSITIONS.items() if LaunchState.ASLEEP in targets} == {
        LaunchState.FALLING_ASLEEP, LaunchState.PENDING}
    assert TRANSITIONS[LaunchState.ASLEEP] == {LaunchState.WAKING, LaunchState.FATAL,
                                               LaunchState.STOPPED}
    member = _member_in(LaunchState.RUNNING)
    for step in (LaunchState.FALLING_ASLEEP, LaunchState.ASLEEP, LaunchState.WAKING,
                 LaunchState.RUNNING):
        member.move(step, "a sleep")
    assert member.launch == "running"


def test_an_asleep_member_shows_since_when() -> None:
    """``status``: launch asleep, ``asleep_since`` its wall time, and its activity says
    since when (the live view's column)."""
    member = _member_in(LaunchState.ASLEEP)
    member.asleep_since = 1_800_000_000.0
    status = member.snapshot()
    assert (status.launch, status.asleep_since, status.readiness) == (
        "asleep", 1_800_000_000.0, "not_ready")
    assert status.activity is not None and status.activity.startswith("asleep since ")
    member.waiting = "waiting for a running slot (max_running = 2)"
    assert member.snapshot().activity == member.waiting


def _with_process(state: LaunchState, *, usable: bool = True,
                  busy: bool = False) -> MemberState:
    member = _member_in(state)
    process: RuntimeProcess = SimpleNamespace(usable=usable)  # type: ignore[assignment]
    member.process = process
    member.slot.busy = busy
    return member


@pytest.mark.parametrize("state", list(LaunchState))
def test_readiness_is_a_function_of_the_launch_the_process_and_the_turn(
        state: LaunchState) -> None:
    serving = state in (LaunchState.RUNNING, LaunchState.DRAINING)
    assert readiness(_with_process(state)) == ("ready" if serving else "not_ready")
    assert readiness(_with_process(state, busy=True)) == ("busy" if serving else "not_ready")
    assert readiness(_with_process(state, usable=False)) == "not_ready"
    assert _member_in(state).readiness == "not_ready", "no process: not ready"


def _members_imports() -> dict[str, set[str]]:
    """Each module of ``members/`` and the modules of ``members/`` it imports — the ones
    under ``if TYPE_CHECKING:`` and inside functions included."""
    package = "orchestrator.daemon.members"
    root = REPO / "orchestrator" / "daemon" / "members"
    names = {p.stem: f"{package}.{p.stem}" if p.stem != "__init__" else package
             for p in root.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for stem, module in names.items():
        targets = set()
        for node in ast.walk(ast.parse((root / f"{stem}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == package:
                targets |= {f"{package}.{a.name}" for a in node.names
                            if f"{package}.{a.name}" in names.values()} or {package}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package):
                targets.add(node.module or "")
        graph[module] = targets - {module}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return None
        for target in sorted(graph.get(module, ())):
            if (found := visit(target, [*path, module])) is not None:
                return found
        done.add(module)
        return None

    return next((c for m in sorted(graph) if (c := visit(m, [])) is not None), None)


def test_the_members_package_has_no_import_cycle_counting_type_only_imports() -> None:
    """``MemberState`` once lived in the supervisor and was read by the four modules the
    supervisor imports: a circle through their type-only imports. ``state`` is below them all
    and imports none of them."""
    graph = _members_imports()
    assert graph["orchestrator.daemon.members.state"] == set()
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"], "the check finds a circle"
