"""Each member's slots (orchestrator/daemon/slots): the plan — unique across the team and every
team of the home, the same at every launch, a port another program took moved to the next free
one, a range with nothing left refused naming the range and the fix, a stopped team's values
kept until nothing else is left —, the journal that keeps them, the port check, and the core:
the values in each launch's environment and in status, across restarts and relaunches."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from orchestrator.daemon.migrations import open_journal
from orchestrator.daemon.slots import Slots, port_free
from orchestrator.daemon.slots import _journal as slots_journal
from orchestrator.daemon.slots._plan import Held, Wanted, plan
from orchestrator.errors import SlotsExhausted, WorktreeError
from orchestrator.slots_config import parse_slot
from tests.support.fakes import core, team_config

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio

SLOTS = {"PORT": "port", "DB_NAME": "name", "REDIS_DB": "index:0-15"}


def _wanted(members: list[str], slots: dict[str, str] = SLOTS, *,
            local: bool = True) -> list[Wanted]:
    return [Wanted(member, var, text, parse_slot(text), local)
            for member in members for var, text in slots.items()]


def _all_free(port: int) -> bool:
    return True


def _values(rows: list[Held]) -> dict[tuple[str, str], str]:
    return {(row.member, row.var): row.value for row in rows}


def test_each_member_gets_values_unique_across_its_team_and_every_other_team() -> None:
    first = plan("web", _wanted(["lead", "dev", "qa"]), [], set(), _all_free)
    assert _values(first.rows) == {
        ("lead", "PORT"): "20000", ("lead", "DB_NAME"): "web_lead", ("lead", "REDIS_DB"): "0",
        ("dev", "PORT"): "20001", ("dev", "DB_NAME"): "web_dev", ("dev", "REDIS_DB"): "1",
        ("qa", "PORT"): "20002", ("qa", "DB_NAME"): "web_qa", ("qa", "REDIS_DB"): "2"}
    assert [e for e, _ in first.events] == ["slot_assigned"] * 9
    second = plan("api", _wanted(["lead", "dev"]), first.rows, {"web"}, _all_free)
    assert _values(second.rows) == {
        ("lead", "PORT"): "20003", ("lead", "DB_NAME"): "api_lead", ("lead", "REDIS_DB"): "3",
        ("dev", "PORT"): "20004", ("dev", "DB_NAME"): "api_dev", ("dev", "REDIS_DB"): "4"}


def test_indexes_of_different_variables_are_apart_and_ports_are_one_space() -> None:
    """REDIS_DB's 0 and WORKER's 0 are different things; two port slots are one machine's."""
    slots = {"REDIS_DB": "index:0-15", "WORKER": "index:0-3", "PORT": "port",
             "DEBUG_PORT": "port"}
    result = plan("web", _wanted(["lead"], slots), [], set(), _all_free)
    assert _values(result.rows) == {("lead", "REDIS_DB"): "0", ("lead", "WORKER"): "0",
                                    ("lead", "PORT"): "20000", ("lead", "DEBUG_PORT"): "20001"}


def test_a_second_launch_keeps_every_value_and_says_nothing() -> None:
    first = plan("web", _wanted(["lead", "dev"]), [], set(), _all_free)
    again = plan("web", _wanted(["lead", "dev"]), first.rows, {"web"}, _all_free)
    assert again.rows == first.rows
    assert again.events == [] and again.reclaimed == []


def test_two_names_sanitised_alike_stay_apart_and_each_keeps_its_own() -> None:
    """Team a-b's member c and team a's member b-c both make ``a_b_c``: the second gets
    ``a_b_c_2``, and keeps it at its next launch."""
    name = {"DB_NAME": "name"}
    first = plan("a-b", _wanted(["c"], name), [], set(), _all_free)
    second = plan("a", _wanted(["b-c"], name), first.rows, {"a-b"}, _all_free)
    assert [r.value for r in first.rows + second.rows] == ["a_b_c", "a_b_c_2"]
    again = plan("a", _wanted(["b-c"], name), first.rows + second.rows, {"a-b"}, _all_free)
    assert again.rows == second.rows and again.events == []


def test_a_new_port_skips_one_another_program_listens_on() -> None:
    result = plan("web", _wanted(["lead"], {"PORT": "port"}), [], set(),
                  lambda port: port != 20000)
    assert _values(result.rows) == {("lead", "PORT"): "20001"}
    assert result.events == [("slot_assigned", {"team": "web", "member": "lead",
                                                "slot": "PORT", "value": "20001"})]


def test_a_kept_port_another_program_took_moves_to_the_next_free_one_and_says_so() -> None:
    first = plan("web", _wanted(["lead", "dev"], {"PORT": "port:3000-3003"}), [], set(),
                 _all_free)
    assert _values(first.rows) == {("lead", "PORT"): "3000", ("dev", "PORT"): "3001"}
    taken = {3000, 3002}  # lead's port, and the next one, now another program's
    again = plan("web", _wanted(["lead", "dev"], {"PORT": "port:3000-3003"}), first.rows,
                 {"web"}, lambda port: port not in taken)
    assert _values(again.rows) == {("lead", "PORT"): "3003", ("dev", "PORT"): "3001"}
    assert again.events == [("slot_port_moved", {"team": "web", "member": "lead",
                                                 "slot": "PORT", "old": "3000",
                                                 "new": "3003"})]


def test_a_moved_port_goes_round_its_range_to_the_first_free_one() -> None:
    rows = [Held("web", "lead", "PORT", "port:3000-3002", "port", "3002"),
            Held("api", "lead", "PORT", "port:3000-3002", "port", "3000")]
    again = plan("web", _wanted(["lead"], {"PORT": "port:3000-3002"}), rows, {"api", "web"},
                 lambda port: port != 3002)
    assert _values(again.rows) == {("lead", "PORT"): "3001"}


def test_an_index_range_with_nothing_left_refuses_naming_the_range_and_the_fix() -> None:
    with pytest.raises(SlotsExhausted) as caught:
        plan("web", _wanted(["lead", "dev", "qa"], {"REDIS_DB": "index:0-1"}), [], set(),
             _all_free)
    error = caught.value
    assert (error.code, error.retryable) == ("slots_exhausted", True)
    assert error.message == (
        "team 'web': no value of REDIS_DB (index:0-1) is left for member 'qa': 2 of the 2 are "
        "held by members of running teams; widen the range in [team] slots (e.g. REDIS_DB = "
        "\"index:0-3\"), or stop a team that holds some ('teamctl status' shows each "
        "member's slots)")
    assert error.details == {"team": "web", "member": "qa", "slot": "REDIS_DB",
                             "kind": "index:0-1", "size": 2, "held": 2}


def test_a_port_range_other_programs_fill_refuses_saying_so() -> None:
    rows = [Held("api", "lead", "PORT", "port:3000-3002", "port", "3000")]
    with pytest.raises(SlotsExhausted) as caught:
        plan("web", _wanted(["lead"], {"PORT": "port:3000-3002"}), rows, {"api"},
             lambda port: False)
    assert "1 of the 3 are held by members of running teams and 2 in use by other " \
           "programs here" in caught.value.message
    assert 'PORT = "port:3000-3005"' in caught.value.message
    with pytest.raises(SlotsExhausted, match='"port:65000-65535"'):  # never past 65535
        plan("web", _wanted(["lead"], {"PORT": "port:65000-65535"}), [], set(),
             lambda port: False)


def test_a_stopped_teams_values_are_kept_until_a_range_has_nothing_else() -> None:
    """A stopped team keeps its values while others are left (its next launch finds them);
    a launch that finds nothing else takes one back, said in the log."""
    stopped = plan("old", _wanted(["a", "b"], {"REDIS_DB": "index:0-3"}), [], set(),
                   _all_free).rows
    result = plan("web", _wanted(["lead", "dev", "qa"], {"REDIS_DB": "index:0-3"}), stopped,
                  set(), _all_free)
    assert _values(result.rows) == {("lead", "REDIS_DB"): "2", ("dev", "REDIS_DB"): "3",
                                    ("qa", "REDIS_DB"): "0"}
    assert result.reclaimed == [stopped[0]]
    assert ("slot_reclaimed", {"team": "web", "member": "qa", "slot": "REDIS_DB", "value": "0",
                               "from_team": "old", "from_member": "a"}) in result.events
    with pytest.raises(SlotsExhausted):  # a running team's are never taken
        plan("web", _wanted(["lead", "dev", "qa"], {"REDIS_DB": "index:0-3"}), stopped,
             {"old"}, _all_free)


def test_a_member_or_slot_removed_frees_its_values() -> None:
    first = plan("web", _wanted(["lead", "dev"], {"PORT": "port", "DB": "name"}), [], set(),
                 _all_free)
    again = plan("web", _wanted(["lead"], {"PORT": "port"}), first.rows, {"web"}, _all_free)
    assert _values(again.rows) == {("lead", "PORT"): "20000"}
    assert sorted((e, f["member"], f["slot"]) for e, f in again.events) == [
        ("slot_freed", "dev", "DB"), ("slot_freed", "dev", "PORT"), ("slot_freed", "lead", "DB")]


def test_a_changed_range_or_prefix_reassigns_only_the_values_it_no_longer_holds() -> None:
    first = plan("web", _wanted(["lead", "dev"], {"REDIS_DB": "index:0-15", "DB": "name"}),
                 [], set(), _all_free)
    rows = [r if r.member != "dev" or r.var != "REDIS_DB" else
            Held("web", "dev", "REDIS_DB", "index:0-15", "index:REDIS_DB", "9") for r in first.rows]
    again = plan("web", _wanted(["lead", "dev"], {"REDIS_DB": "index:8-15", "DB": "name:t"}),
                 rows, {"web"}, _all_free)
    assert _values(again.rows) == {("lead", "REDIS_DB"): "8", ("lead", "DB"): "t_web_lead",
                                   ("dev", "REDIS_DB"): "9", ("dev", "DB"): "t_web_dev"}
    assert ("slot_reassigned", {"team": "web", "member": "lead", "slot": "REDIS_DB",
                                "old": "0", "new": "8",
                                "why": "index:0-15 became index:8-15"}) in again.events


def test_a_member_elsewhere_gets_a_port_without_this_machines_check() -> None:
    """An SSH or Kubernetes member listens on its own machine: its port is unique among the
    home's, never bound here."""
    def refused(port: int) -> bool:
        raise AssertionError(f"port {port} of a member elsewhere checked here")

    result = plan("web", _wanted(["far"], {"PORT": "port"}, local=False), [], set(), refused)
    assert _values(result.rows) == {("far", "PORT"): "20000"}


def test_a_port_a_server_listens_on_is_not_free_and_is_again_once_closed() -> None:
    for address in ("127.0.0.1", "0.0.0.0"):
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((address, 0))
        server.listen()
        port = server.getsockname()[1]
        assert not port_free(port), address
        server.close()
        assert port_free(port), address


def test_values_are_journaled_whole_and_read_the_same_by_a_journal_opened_again(
        tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    journal = open_journal(path)
    result = slots_journal.assign(journal, "web", _wanted(["lead", "dev"]), set(), _all_free)
    journal.close()
    again = open_journal(path)
    try:
        assert slots_journal.rows(again) == sorted(result.rows,
                                                    key=lambda r: (r.team, r.member, r.var))
        with pytest.raises(SlotsExhausted):  # refused: nothing written
            slots_journal.assign(again, "web", _wanted(["lead", "dev"], {"I": "index:0-0"}),
                                 set(), _all_free)
        assert _values(slots_journal.rows(again)) == _values(result.rows)
    finally:
        again.close()


async def _launch(c: Core, tmp_path: Path, *members: str, name: str = "web",
                  slots: dict[str, str] = SLOTS) -> None:
    config = team_config(tmp_path, *({"name": m} for m in members), name=name, slots=slots)
    await c.teams.launch(config, f"{name}.toml", wait=True, timeout=10)


async def _status(c: Core, team: str) -> dict[str, dict[str, str]]:
    [doc] = (await c.teams.status(team)).teams
    return {m.name: m.slots for m in doc.members}


def _ports(checked: list[int]) -> Callable[[int], bool]:
    def free(port: int) -> bool:
        checked.append(port)
        return True
    return free


async def test_each_member_finds_its_slots_in_its_environment_and_status_shows_them(
        tmp_path: Path) -> None:
    async with core(tmp_path, ports=_all_free) as c:
        await _launch(c, tmp_path, "lead", "dev")
        envs = {p.spec.member: p.spec.env for p in c.runtime.opened}
        assert {m: {k: env[k] for k in SLOTS} for m, env in envs.items()} == {
            "lead": {"PORT": "20000", "DB_NAME": "web_lead", "REDIS_DB": "0"},
            "dev": {"PORT": "20001", "DB_NAME": "web_dev", "REDIS_DB": "1"}}
        assert await _status(c, "web") == {m: {k: env[k] for k in SLOTS}
                                           for m, env in envs.items()}
        await c.teams.restart(None, "dev")  # a new process of the member: the same values
        assert {k: c.runtime.opened[-1].spec.env[k] for k in SLOTS} == \
            {"PORT": "20001", "DB_NAME": "web_dev", "REDIS_DB": "1"}


async def test_a_team_without_slots_shows_none_and_writes_none(tmp_path: Path) -> None:
    async with core(tmp_path, ports=_all_free) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}), "a.toml", wait=True,
                             timeout=10)
        assert await _status(c, "web") == {"lead": {}}
        assert not set(SLOTS) & set(c.runtime.opened[0].spec.env)
        assert await c.store.run(slots_journal.rows) == []


async def test_values_are_the_same_after_a_daemon_restart_and_a_relaunch(
        tmp_path: Path) -> None:
    """Across daemons sharing a journal: resumed, the same values; stopped and launched
    without a member, that member's values are freed and the others' kept."""
    (tmp_path / "home").mkdir()
    journal = tmp_path / "home" / "state.db"
    async with core(tmp_path, store=open_journal(journal), ports=_all_free) as first:
        await _launch(first, tmp_path, "lead", "dev", "qa")
        before = await _status(first, "web")
    async with core(tmp_path, store=open_journal(journal), ports=_all_free) as restarted:
        assert await restarted.teams.resume_desired() == ["web"]
        assert await _status(restarted, "web") == before
        await restarted.teams.stop("web")
        await _launch(restarted, tmp_path, "lead", "qa")
        assert await _status(restarted, "web") == {"lead": before["lead"], "qa": before["qa"]}
        rows = await restarted.store.run(slots_journal.rows)
        assert {row.member for row in rows} == {"lead", "qa"}


async def test_two_teams_of_one_home_never_share_a_value(tmp_path: Path) -> None:
    checked: list[int] = []
    async with core(tmp_path, ports=_ports(checked)) as c:
        await _launch(c, tmp_path, "lead", "dev")
        await _launch(c, tmp_path, "lead", "dev", name="api")
        values = [v for team in ("web", "api") for m in (await _status(c, team)).values()
                  for v in m.items()]
        assert len(values) == len(set(values)) == 12
        assert checked == [20000, 20001, 20002, 20003]  # each port checked free here


async def test_a_launch_with_nothing_left_refuses_before_anything_starts(
        tmp_path: Path) -> None:
    async with core(tmp_path, ports=_all_free) as c:
        with pytest.raises(SlotsExhausted, match="REDIS_DB"):
            await _launch(c, tmp_path, "lead", "dev", slots={"REDIS_DB": "index:0-0"})
        assert c.runtime.opened == []
        assert await c.store.teams() == []
        assert await c.store.run(slots_journal.rows) == []


async def test_a_stopped_team_keeps_its_values_and_finds_them_at_its_next_launch(
        tmp_path: Path) -> None:
    async with core(tmp_path, ports=_all_free) as c:
        await _launch(c, tmp_path, "lead")
        before = await _status(c, "web")
        await c.teams.stop("web")
        await _launch(c, tmp_path, "lead", name="api")
        assert set((await _status(c, "api"))["lead"].values()).isdisjoint(
            before["lead"].values())
        await _launch(c, tmp_path, "lead")
        assert await _status(c, "web") == before


async def test_a_launch_refused_after_its_slots_lets_a_later_launch_take_them(
        tmp_path: Path) -> None:
    """A launch that fails after its values were journaled (a worktree that cannot be made)
    does not run: a later launch with nothing else left may take them back."""
    small = {"REDIS_DB": "index:0-0"}
    async with core(tmp_path, ports=_all_free) as c:
        failing = team_config(tmp_path, {"name": "lead", "worktree": True},
                              name="broken", slots=small)
        with pytest.raises(WorktreeError, match="not in a git repository"):
            await c.teams.launch(failing, "broken.toml", wait=True, timeout=10)
        await _launch(c, tmp_path, "lead", slots=small)
        assert await _status(c, "web") == {"lead": {"REDIS_DB": "0"}}


async def test_a_member_on_another_host_gets_its_values_and_no_port_check_here(
        tmp_path: Path) -> None:
    """Its environment there gets the values like any member's (``LaunchSpec.env``); its port
    is unique among the home's, never bound on this machine."""
    checked: list[int] = []
    config = team_config(tmp_path, {"name": "lead"}, {"name": "far", "host": "dev@box"},
                         slots={"PORT": "port", "DB_NAME": "name"})
    async with core(tmp_path, ports=_ports(checked)) as c:
        slots = Slots(c.store, ports=_ports(checked))
        await slots.assign(config)
        assert slots.env_of("web", "far") == {"PORT": "20001", "DB_NAME": "web_far"}
        assert slots.env_of("web", "lead") == {"PORT": "20000", "DB_NAME": "web_lead"}
        assert checked == [20000]
        slots.stopped("web")
        assert slots.env_of("web", "far") == {}
