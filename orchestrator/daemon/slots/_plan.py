"""Which value each of a team's slots holds after a launch: pure, over what the journal holds.

A value is kept where it still fits (the same member, variable and kind, in the range); a
member or variable gone frees its values; a new one takes the lowest value of its range that no
other member holds — of any team of the home, stopped ones included — and, for a port of a
member on this machine, that a server could listen on now (``port_free``). A kept port another
program took is moved to the next free one after it (``slot_port_moved``). Only when a range has
nothing else left is a value taken back from a stopped team (``slot_reclaimed``; that team gets
another at its next launch); nothing left at all is ``SlotsExhausted``.

Uniqueness is by *space*: every port of the home is one space (a port is the machine's), every
name one space (a database server is shared), an index one space per variable name (REDIS_DB's
0 and WORKER's 0 are apart; two teams' REDIS_DB are not).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.errors import SlotsExhausted
from orchestrator.slots_config import INDEX_BOUNDS, MAX_NAME_CHARS, PORT_BOUNDS, name_base

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from orchestrator.slots_config import SlotKind

__all__ = ["Held", "Plan", "PortCheck", "Wanted", "plan", "space_of"]

# whether a server could listen on a port here now (``_ports.port_free``; a test's fake)
PortCheck = Callable[[int], bool]
_NAME_TRIES = 10_000  # base, base_2, … (two sanitized names rarely meet at all)


@dataclass(frozen=True)
class Held:
    """A value the journal gives a member: of which variable, kind (as written) and space."""

    team: str
    member: str
    var: str
    kind: str
    space: str
    value: str


@dataclass(frozen=True)
class Wanted:
    """A slot a member of the team being launched must have; ``local``: it runs on this
    machine (a port of its is checked free here)."""

    member: str
    var: str
    text: str
    kind: SlotKind
    local: bool


@dataclass
class Plan:
    """The team's rows after the launch, the stopped teams' rows it took back, and what to
    log (event, fields)."""

    rows: list[Held] = field(default_factory=list)
    reclaimed: list[Held] = field(default_factory=list)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def space_of(var: str, kind: SlotKind) -> str:
    return f"index:{var}" if kind.kind == "index" else kind.kind


class _Spaces:
    """Who holds which value: members of running teams and of this one (for good), members
    of stopped teams (until a range has nothing else)."""

    def __init__(self, held: Iterable[Held], team: str, running: set[str]) -> None:
        self.hard: set[tuple[str, str]] = set()
        self.soft: dict[tuple[str, str], Held] = {}
        for row in held:
            if row.team == team:
                continue
            if row.team in running:
                self.hard.add((row.space, row.value))
            else:
                self.soft[(row.space, row.value)] = row

    def taken(self, space: str, value: str) -> bool:
        return (space, value) in self.hard or (space, value) in self.soft


def plan(team: str, wanted: list[Wanted], held: list[Held], running: set[str],
         port_free: PortCheck) -> Plan:
    """``team``'s slots after a launch of ``wanted`` (the team file's order), given every row
    the journal ``held`` and the teams that run (``running``); raises SlotsExhausted."""
    mine = {(row.member, row.var): row for row in held if row.team == team}
    spaces = _Spaces(held, team, running)
    result = Plan()
    kept: dict[tuple[str, str], Held] = {}
    for want in wanted:  # first what stays, so that nothing new takes it
        row = mine.get((want.member, want.var))
        if row is not None and _fits(row, want, team):
            kept[(want.member, want.var)] = row
            spaces.hard.add((row.space, row.value))
    for want in wanted:
        row = kept.get((want.member, want.var))
        if row is None:
            row = _new(team, want, mine.get((want.member, want.var)), spaces, port_free, result)
        elif want.kind.kind == "port" and want.local and not port_free(int(row.value)):
            row = _moved(team, want, row, spaces, port_free, result)
        result.rows.append(row)
    wanted_keys = {(w.member, w.var) for w in wanted}
    result.events += [("slot_freed", _fields(team, row.member, row.var, value=row.value))
                      for key, row in mine.items() if key not in wanted_keys]
    return result


def _fits(row: Held, want: Wanted, team: str) -> bool:
    """The journaled value still answers the slot as the file has it now."""
    if row.space != space_of(want.var, want.kind):
        return False
    if want.kind.kind == "name":
        base = name_base(want.kind.prefix, team, want.member)
        number = row.value.rpartition("_")[2]
        return row.value == base or (number.isdigit() and int(number) <= _NAME_TRIES
                                     and row.value == _name(base, int(number)))
    return want.kind.holds(row.value)


def _name(base: str, number: int) -> str:
    """The ``number``-th name made from ``base`` (the first is ``base`` itself)."""
    if number == 1:
        return base
    suffix = f"_{number}"
    return base[:MAX_NAME_CHARS - len(suffix)] + suffix


def _new(team: str, want: Wanted, old: Held | None, spaces: _Spaces,
         port_free: PortCheck, result: Plan) -> Held:
    value = _first_free(team, want, spaces, port_free, _candidates(team, want), result)
    if old is None:
        result.events.append(("slot_assigned", _fields(team, want.member, want.var,
                                                       value=value)))
    else:
        result.events.append(("slot_reassigned", _fields(
            team, want.member, want.var, old=old.value, new=value,
            why=f"{old.kind} became {want.text}")))
    return _row(team, want, value, spaces)


def _moved(team: str, want: Wanted, row: Held, spaces: _Spaces,
           port_free: PortCheck, result: Plan) -> Held:
    """A kept port another program listens on now: the next free one after it."""
    spaces.hard.discard((row.space, row.value))
    port, kind = int(row.value), want.kind
    after = (str(p) for p in [*range(port + 1, kind.last + 1), *range(kind.first, port)])
    value = _first_free(team, want, spaces, port_free, after, result)
    result.events.append(("slot_port_moved", _fields(team, want.member, want.var,
                                                     old=row.value, new=value)))
    return _row(team, want, value, spaces)


def _row(team: str, want: Wanted, value: str, spaces: _Spaces) -> Held:
    space = space_of(want.var, want.kind)
    spaces.hard.add((space, value))
    return Held(team, want.member, want.var, want.text, space, value)


def _candidates(team: str, want: Wanted) -> Iterator[str]:
    kind = want.kind
    if kind.kind != "name":
        return (str(v) for v in range(kind.first, kind.last + 1))
    base = name_base(kind.prefix, team, want.member)
    return (_name(base, n) for n in range(1, _NAME_TRIES + 1))


def _first_free(team: str, want: Wanted, spaces: _Spaces, port_free: PortCheck,
                candidates: Iterable[str], result: Plan) -> str:
    """The first candidate nobody holds (and, for a port here, free now); else one a stopped
    team holds (taken back); else SlotsExhausted."""
    space = space_of(want.var, want.kind)
    check = want.kind.kind == "port" and want.local
    for value in candidates:
        if not spaces.taken(space, value) and (not check or port_free(int(value))):
            return value
    for (where, value), row in sorted(spaces.soft.items(), key=lambda item: _order(item[0])):
        if where == space and want.kind.holds(value) and (not check or port_free(int(value))):
            del spaces.soft[(where, value)]
            result.reclaimed.append(row)
            result.events.append(("slot_reclaimed", _fields(
                team, want.member, want.var, value=value, from_team=row.team,
                from_member=row.member)))
            return value
    raise _exhausted(team, want, spaces)


def _order(key: tuple[str, str]) -> tuple[str, int, str]:
    space, value = key
    return space, int(value) if value.isdigit() else 0, value


def _exhausted(team: str, want: Wanted, spaces: _Spaces) -> SlotsExhausted:
    kind = want.kind
    space = space_of(want.var, kind)
    held = sum(1 for where, value in spaces.hard if where == space and kind.holds(value))
    bound = PORT_BOUNDS[1] if kind.kind == "port" else INDEX_BOUNDS[1]
    wider = f"{kind.kind}:{kind.first}-{min(bound, kind.first + 2 * kind.size - 1)}"
    return SlotsExhausted(team, want.member, want.var, want.text, size=kind.size, held=held,
                          wider=wider)


def _fields(team: str, member: str, var: str, **more: Any) -> dict[str, Any]:
    return {"team": team, "member": member, "slot": var, **more}
