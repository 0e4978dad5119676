"""Memory admission (orchestrator/daemon/admission): the verdict, what is read of this machine's
memory, what a member is expected to take, the line's order, and a member of an in-process
core that waits for memory — shown, its messages kept — until memory frees or the reserve is
lowered. The machine's memory is a meminfo file the test writes: nothing here depends on this
machine's free memory."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.config import TeamConfig
from orchestrator.contracts import HostProfile
from orchestrator.daemon.admission import (
    PRESSURE_LIMIT,
    Admission,
    AdmissionSettings,
    FootprintJournal,
    Footprints,
    HostMemory,
    MemorySource,
)
from orchestrator.daemon.admission._decision import decide
from orchestrator.daemon.admission._footprints import KEEP, kind_of
from orchestrator.daemon.members import MemberState
from orchestrator.daemon.queue import AsyncStore
from orchestrator.errors import MemoryReserveTooLarge, TeamAlreadyRunning, UsageError
from runtimes.hosts.local.host import LocalHost
from tests.support.fakes import ample_memory, core, journal_at, team_config, write_meminfo
from tests.support.settle import until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

pytestmark = pytest.mark.anyio

MiB, GiB = 2**20, 2**30
CLAUDE = 260 * MiB  # the claude row's footprint_mib (orchestrator/runtime_table.py)


def _memory(available: int, *, total: int = 64 * GiB, pressure: float | None = None
            ) -> HostMemory:
    return HostMemory(available_bytes=available, total_bytes=total, pressure=pressure)


# -- the verdict ------------------------------------------------------------------------------

def test_a_member_that_fits_above_the_reserve_starts() -> None:
    verdict = decide(_memory(3 * GiB), needs_bytes=300 * MiB, reserve_bytes=2 * GiB)
    assert verdict.fits
    assert verdict.why == "needs ~300 MiB; 1 GiB free above the 2 GiB reserve"


def test_a_member_that_does_not_fit_waits_and_says_how_much_is_free() -> None:
    verdict = decide(_memory(2 * GiB + 200 * MiB), needs_bytes=300 * MiB,
                     reserve_bytes=2 * GiB)
    assert not verdict.fits
    assert verdict.why == "waiting for memory (needs ~300 MiB; 200 MiB free above the 2 GiB " \
                          "reserve)"


def test_below_the_reserve_it_says_what_is_available() -> None:
    verdict = decide(_memory(int(1.5 * GiB)), needs_bytes=300 * MiB, reserve_bytes=2 * GiB)
    assert not verdict.fits
    assert verdict.why == "waiting for memory (needs ~300 MiB; 1.5 GiB available, below the " \
                          "2 GiB reserve)"


def test_members_admitted_and_still_starting_count_against_what_is_free() -> None:
    """Two members admitted together never count the same free memory twice."""
    memory = _memory(2 * GiB + 400 * MiB)
    assert decide(memory, needs_bytes=300 * MiB, reserve_bytes=2 * GiB).fits
    later = decide(memory, needs_bytes=300 * MiB, reserve_bytes=2 * GiB,
                   starting_bytes=300 * MiB)
    assert not later.fits and "100 MiB free above the 2 GiB reserve" in later.why


def test_memory_pressure_keeps_a_member_waiting_whatever_is_available() -> None:
    high = decide(_memory(40 * GiB, pressure=PRESSURE_LIMIT + 5), needs_bytes=300 * MiB,
                  reserve_bytes=GiB)
    assert not high.fits
    assert high.why.startswith("waiting for memory (memory pressure 15% over the last 10 s, "
                               "at most 10%; needs ~300 MiB;")
    assert decide(_memory(40 * GiB, pressure=PRESSURE_LIMIT - 1), needs_bytes=300 * MiB,
                  reserve_bytes=GiB).fits
    assert decide(_memory(40 * GiB, pressure=None), needs_bytes=300 * MiB,
                  reserve_bytes=GiB).fits  # no PSI here: MemAvailable alone


# -- what is read -----------------------------------------------------------------------------

def test_meminfo_and_pressure_are_read_from_the_files_named(tmp_path: Path) -> None:
    meminfo = write_meminfo(tmp_path / "meminfo", available_mib=1024, total_mib=4096)
    psi = tmp_path / "psi"
    psi.write_text("some avg10=12.50 avg60=3.00 avg300=1.00 total=99\n"
                   "full avg10=1.00 avg60=0.00 avg300=0.00 total=9\n")
    assert MemorySource(meminfo, psi).read() == HostMemory(GiB, 4 * GiB, 12.5)
    assert MemorySource(meminfo, tmp_path / "absent").read() == HostMemory(GiB, 4 * GiB, None)
    assert MemorySource(meminfo, None).read() == HostMemory(GiB, 4 * GiB, None)


@pytest.mark.parametrize("text", [
    "", "MemTotal: 1 kB\n", "MemAvailable: 1 kB\n", "MemTotal: x kB\nMemAvailable: 1 kB\n",
    "MemTotal: -5 kB\nMemAvailable: 1 kB\n", "MemTotal: 5 MB\nMemAvailable: 1 kB\n",
    "\x00\xff" * 100, "MemTotal: 1 kB\nMemAvailable: " + "9" * 50000 + " kB\n"])
def test_a_meminfo_that_does_not_parse_reads_as_nothing_not_a_guess(
        tmp_path: Path, text: str) -> None:
    path = tmp_path / "meminfo"
    path.write_text(text, errors="surrogateescape")
    assert MemorySource(path, None).read() is None


@pytest.mark.parametrize("text", ["some avg10=nan avg60=0 total=1", "some avg10=inf",
                                  "some avg10=-1", "some avg10=101", "full avg10=50.0",
                                  "some avg10=x", "garbage"])
def test_a_pressure_that_does_not_parse_leaves_memavailable_alone(
        tmp_path: Path, text: str) -> None:
    meminfo = write_meminfo(tmp_path / "meminfo", available_mib=1024)
    psi = tmp_path / "psi"
    psi.write_text(text + "\n")
    memory = MemorySource(meminfo, psi).read()
    assert memory is not None and memory.pressure is None


def test_a_fifo_named_as_meminfo_reads_as_nothing_and_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "meminfo"
    os.mkfifo(fifo)
    assert MemorySource(fifo, fifo).read() is None


def test_this_machines_proc_is_read_by_default() -> None:
    memory = MemorySource().read()
    assert memory is not None and 0 < memory.available_bytes <= memory.total_bytes


def test_the_test_switches_name_the_files_and_the_poll_interval(tmp_path: Path) -> None:
    settings = AdmissionSettings.from_env({"TEAMCTL_MEMINFO": str(tmp_path / "m"),
                                           "TEAMCTL_PSI_MEMORY": "",
                                           "TEAMCTL_MEMORY_POLL_INTERVAL": "0.05"})
    assert (settings.memory.meminfo, settings.memory.pressure) == (tmp_path / "m", None)
    assert settings.poll_interval == 0.05
    assert AdmissionSettings.from_env({}).memory.meminfo.as_posix() == "/proc/meminfo"
    for bad in ("0", "-1", "nan", "inf", "1e9", "soon"):
        with pytest.raises(UsageError, match="TEAMCTL_MEMORY_POLL_INTERVAL"):
            AdmissionSettings.from_env({"TEAMCTL_MEMORY_POLL_INTERVAL": bad})


# -- what a member is expected to take --------------------------------------------------------

def _team(*members: dict[str, Any], reserve: str = "1G", name: str = "web") -> TeamConfig:
    return TeamConfig.model_validate({"team": {"name": name, "memory_reserve": reserve},
                                      "members": [{"runtime": "claude", **m} for m in members]})


def test_each_kind_has_its_documented_default() -> None:
    team = _team({"name": "c"}, {"name": "x", "runtime": "codex"},
                 {"name": "e", "runtime": "codex", "transport": "exec"},
                 {"name": "o", "runtime": "opencode"},
                 {"name": "q", "runtime": "acp", "acp_agent": "qwen"},
                 {"name": "g", "runtime": "acp", "acp_agent": "gemini"},
                 {"name": "a", "runtime": "acp", "command": ["/opt/bin/my-agent", "--acp"]})
    kinds = [kind_of(m, sandboxed=False) for m in team.members]
    assert [(k.kind, k.default_bytes // MiB) for k in kinds] == [
        ("claude", 260), ("codex/app-server", 170), ("codex/exec", 170), ("opencode", 350),
        ("acp/qwen", 300), ("acp/gemini", 255), ("acp/my-agent", 300)]
    assert {k.place for k in kinds} == {"local"}
    assert kind_of(team.members[0], sandboxed=True).place == "sandbox"


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    store = journal_at(tmp_path / "state.db")
    try:
        yield AsyncStore(store)
    finally:
        store.close()


async def test_a_kind_expects_the_median_of_its_journaled_peaks_across_restarts(
        journal: AsyncStore) -> None:
    kind = kind_of(_team({"name": "c"}).members[0], sandboxed=False)
    footprints = Footprints(FootprintJournal(journal))
    await footprints.load()
    assert footprints.expected(kind) == (CLAUDE, False)
    for launch, mib in (("a", 200), ("b", 400), ("c", 300)):
        await footprints.record(launch, kind, mib * MiB)
    await footprints.record("a", kind, 150 * MiB)  # a launch's peak only grows
    assert footprints.expected(kind) == (300 * MiB, True)
    again = Footprints(FootprintJournal(journal))  # a restarted daemon
    await again.load()
    assert again.expected(kind) == (300 * MiB, True)
    sandboxed = kind_of(_team({"name": "c"}).members[0], sandboxed=True)
    assert again.expected(sandboxed) == (CLAUDE, False), "learned per place"


async def test_only_the_newest_launches_of_a_kind_are_kept(journal: AsyncStore) -> None:
    kind = kind_of(_team({"name": "c"}).members[0], sandboxed=False)
    footprints = Footprints(FootprintJournal(journal))
    for n in range(KEEP + 5):
        await footprints.record(f"launch {n}", kind, (100 + n) * MiB)
    peaks = await FootprintJournal(journal).peaks()
    assert sorted(peaks[("claude", "local")]) == [(100 + n) * MiB for n in range(5, KEEP + 5)]
    reloaded = Footprints(FootprintJournal(journal))
    await reloaded.load()
    assert reloaded.expected(kind) == footprints.expected(kind)


# -- the line ---------------------------------------------------------------------------------

def _states(team: TeamConfig, host: Any = None) -> list[MemberState]:
    return [MemberState(team.name, team.resolved(m), "/", host=host or LocalHost())
            for m in team.members]


class _Line:
    """An ``Admission`` over a meminfo file, its loop running; each member's ``told`` texts."""

    def __init__(self, admission: Admission, meminfo: Path) -> None:
        self.admission, self.meminfo = admission, meminfo
        self.told: dict[str, list[str]] = {}

    def told_to(self, state: MemberState) -> Callable[[str], None]:
        return lambda why: self.told.setdefault(state.name, []).append(why)


@pytest.fixture
async def line(tmp_path: Path, journal: AsyncStore) -> AsyncIterator[_Line]:
    footprints = Footprints(FootprintJournal(journal))
    meminfo = write_meminfo(tmp_path / "meminfo", available_mib=1024 + 100)
    holding: dict[str, dict[str, str]] = {}
    admission = Admission(footprints, MemorySource(meminfo, tmp_path / "psi"),
                          holds_task=lambda team: _async(holding.get(team, {})),
                          poll_interval=0.01, measure=lambda pid: None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(admission.run)
        made = _Line(admission, meminfo)
        made.holding = holding  # type: ignore[attr-defined]
        yield made
        tg.cancel_scope.cancel()


async def _async(value: dict[str, str]) -> dict[str, str]:
    return value


async def _admit_all(line: _Line, states: list[MemberState], order: list[str]) -> None:
    """Admit every member at once, each told while it waits; ``order``: who got in when."""
    async with anyio.create_task_group() as tg:
        for state in states:
            async def one(state: MemberState = state) -> None:
                await line.admission.admit(state, line.told_to(state))
                order.append(state.name)
            tg.start_soon(one)


async def test_the_lead_and_members_holding_a_task_start_first_then_launch_order(
        line: _Line) -> None:
    """Four wait; memory for one at a time: the lead, the member holding a task, then the
    others in the team file's order — each once the one before it is up (its hold gone)."""
    team = _team({"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "boss", "lead": True})
    line.admission.configure(team)
    line.holding["web"] = {"c": "T1 the task"}  # type: ignore[attr-defined]
    write_meminfo(line.meminfo, available_mib=1024)  # nothing fits above the 1G reserve
    states = {s.name: s for s in _states(team)}
    order: list[str] = []
    expected = ["boss", "c", "a", "b"]
    async with anyio.create_task_group() as tg:
        tg.start_soon(_admit_all, line, list(states.values()), order)
        await until(lambda: _holds(len(line.told) == 4))
        assert order == []
        assert {t[-1] for t in line.told.values()} == {
            "waiting for memory (needs ~260 MiB; 0 B free above the 1 GiB reserve)"}
        write_meminfo(line.meminfo, available_mib=1024 + 300)  # room for one at a time
        for n, name in enumerate(expected, start=1):
            await until(lambda n=n: _holds(len(order) >= n))  # type: ignore[misc]
            assert order == expected[:n], "one at a time: the next waits for this one's hold"
            await line.admission.launched(states[name])


async def test_a_member_that_would_fit_waits_behind_one_that_does_not(line: _Line) -> None:
    """No one starts ahead of a member that waits before it, and status says so."""
    team = _team({"name": "boss", "runtime": "opencode", "lead": True}, {"name": "dev"})
    line.admission.configure(team)
    write_meminfo(line.meminfo, available_mib=1024 + 300)  # 260 fits, 350 does not
    boss, dev = _states(team)
    order: list[str] = []
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_admit_all, line, [boss, dev], order)
            await until(lambda: _holds(len(line.told) == 2))
            assert line.told["boss"][-1] == ("waiting for memory (needs ~350 MiB; 300 MiB "
                                             "free above the 1 GiB reserve)")
            assert line.told["dev"][-1] == ("waiting for memory (needs ~260 MiB; 300 MiB "
                                            "free above the 1 GiB reserve; after boss, which "
                                            "starts first)")
            write_meminfo(line.meminfo, available_mib=1024 + 700)
    admitted = [e for e in logs if e["event"] == "member_admitted"]
    assert [(e["member"], e["starting_bytes"]) for e in admitted] == [
        ("boss", 0), ("dev", 350 * MiB)], "boss first; dev counts boss's hold"


async def test_memory_pressure_holds_the_line_until_it_eases(line: _Line,
                                                             tmp_path: Path) -> None:
    team = _team({"name": "dev"})
    line.admission.configure(team)
    write_meminfo(line.meminfo, available_mib=40 * 1024)
    psi = tmp_path / "psi"
    psi.write_text("some avg10=35.00 avg60=20.00 avg300=5.00 total=1\n")
    (dev,) = _states(team)
    order: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_admit_all, line, [dev], order)
        await until(lambda: _holds(bool(line.told)))
        assert line.told["dev"][-1].startswith("waiting for memory (memory pressure 35%")
        psi.write_text("some avg10=0.50 avg60=20.00 avg300=5.00 total=1\n")
    assert order == ["dev"]


async def test_a_member_on_another_host_is_not_this_machines_to_admit(line: _Line) -> None:
    team = _team({"name": "far"})
    line.admission.configure(team)
    write_meminfo(line.meminfo, available_mib=10)  # nothing fits here
    remote = SimpleNamespace(profile=HostProfile(checks_local_login=False, local_memory=False),
                             name="gpu1")
    (far,) = _states(team, remote)
    with anyio.fail_after(5):
        await line.admission.admit(far, line.told_to(far))
    assert line.told == {}


async def test_an_unreadable_meminfo_lets_members_start_and_says_so_once(line: _Line) -> None:
    team = _team({"name": "a"}, {"name": "b"})
    line.admission.configure(team)
    line.meminfo.write_text("not a meminfo\n")
    with capture_logs() as logs, anyio.fail_after(5):
        for state in _states(team):
            await line.admission.admit(state, line.told_to(state))
    assert [e["event"] for e in logs if e["event"] == "admission_memory_unreadable"] == [
        "admission_memory_unreadable"]
    assert line.told == {}


async def test_a_hold_that_never_came_up_lapses_after_its_start_timeout(
        tmp_path: Path, journal: AsyncStore) -> None:
    """A member admitted whose start never ended (no ready, no exit told) holds its footprint
    for its ``start_timeout`` at most."""
    now = [0.0]
    meminfo = write_meminfo(tmp_path / "meminfo", available_mib=1024 + 300)
    admission = Admission(Footprints(FootprintJournal(journal)), MemorySource(meminfo, None),
                          holds_task=lambda team: _async({}), poll_interval=0.01,
                          measure=lambda pid: None, clock=lambda: now[0])
    team = _team({"name": "a", "start_timeout": 30}, {"name": "b"})
    admission.configure(team)
    a, b = _states(team)
    told: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(admission.run)
        await admission.admit(a, told.append)
        done = anyio.Event()

        async def admit_b() -> None:
            await admission.admit(b, told.append)
            done.set()

        tg.start_soon(admit_b)
        await until(lambda: _holds(bool(told)))
        assert not done.is_set()
        now[0] = 31.0  # a's start_timeout passed
        with anyio.fail_after(5):
            await done.wait()
        tg.cancel_scope.cancel()


async def test_a_reserve_no_member_fits_under_on_this_machine_is_refused(
        line: _Line) -> None:
    write_meminfo(line.meminfo, available_mib=1024, total_mib=8 * 1024)
    with pytest.raises(MemoryReserveTooLarge) as refused:
        line.admission.check(_team({"name": "dev"}, reserve="8G"))
    assert refused.value.code == "memory_reserve_too_large" and refused.value.exit_code == 2
    assert "memory_reserve = \"8G\" leaves member 'dev' (~260 MiB) no room in this " \
           "machine's 8 GiB" in refused.value.message
    line.admission.check(_team({"name": "dev"}, reserve="7G"))  # tight, but it can fit
    line.admission.check(_team({"name": "far", "host": "dev@box"}, reserve="8G"))


async def _holds(value: bool) -> bool:
    return value


# -- a member of a core -----------------------------------------------------------------------

async def _status(c: Any, name: str) -> Any:
    doc = await c.teams.status("web")
    return next(m for m in doc.teams[0].members if m.name == name)


async def test_a_member_that_does_not_fit_waits_named_in_status_and_starts_when_memory_frees(
        tmp_path: Path) -> None:
    """The launch returns at once with the member ``waiting``, status says why, a message to
    it stays queued (its receipt says it waits); memory freed, it starts and the message is
    answered once."""
    meminfo = write_meminfo(tmp_path / "meminfo", available_mib=2048 + 100)
    async with core(tmp_path, admission=ample_memory(tmp_path, poll_interval=0.02)) as c:
        config = team_config(tmp_path, {"name": "lead"}, {"name": "dev"})
        config = TeamConfig.model_validate({**config.model_dump(mode="json"),
                                            "team": {**config.team.model_dump(mode="json"),
                                                     "memory_reserve": "2G"}})
        with anyio.fail_after(10):
            launched = await c.teams.launch(config, "a.toml", wait=True, timeout=30)
        assert [(m.name, m.launch) for m in launched.members] == [
            ("lead", "waiting"), ("dev", "waiting")]
        dev = await _status(c, "dev")
        assert dev.waiting == ("waiting for memory (needs ~260 MiB; 100 MiB free above the "
                               "2 GiB reserve)")
        receipt = await c.teams.send(None, "dev", "hello", wait=False, timeout=1)
        assert receipt.notes == [f"dev is {dev.waiting}; the message waits in the journal "
                                 "until it starts"]
        assert c.runtime.opened == [] and (await _status(c, "dev")).queued == 1
        write_meminfo(meminfo, available_mib=2048 + 1024)
        outcome = await c.mailbox.wait_outcome(receipt.id, "dev", 10)
        assert outcome.state == "answered" and outcome.attempts == 1
        assert [t.message_id for t in c.runtime.turns] == [receipt.id]
        assert (await _status(c, "dev")).launch == "running"
        assert (await _status(c, "dev")).waiting is None


async def test_a_relaunch_that_lowers_the_reserve_starts_the_waiting_member(
        tmp_path: Path) -> None:
    write_meminfo(tmp_path / "meminfo", available_mib=2048 + 100)
    async with core(tmp_path, admission=ample_memory(tmp_path, poll_interval=3600)) as c:
        def with_reserve(reserve: str, **team: Any) -> TeamConfig:
            base = team_config(tmp_path, {"name": "dev"})
            return TeamConfig.model_validate({**base.model_dump(mode="json"), "team": {
                **base.team.model_dump(mode="json"), "memory_reserve": reserve, **team}})

        await c.teams.launch(with_reserve("2G"), "a.toml", wait=True, timeout=30)
        assert (await _status(c, "dev")).launch == "waiting"
        with pytest.raises(TeamAlreadyRunning) as refused:  # more than the reserve changed
            await c.teams.launch(with_reserve("1G", claims=True), "a.toml", wait=True,
                                 timeout=30)
        assert refused.value.details["differences"] == ["[team] claims, memory_reserve changed"]
        assert (await _status(c, "dev")).launch == "waiting"
        again = await c.teams.launch(with_reserve("1G"), "a.toml", wait=True, timeout=30)
        assert again.already_running and again.applied == ["memory_reserve"]
        await until(lambda: _ready(c, "dev"))  # no poll (an hour): the relaunch looked
        resumed = await c.store.teams(desired="running")
        assert resumed[0].config["team"]["memory_reserve"] == "1G", "journaled for a resume"
        same = await c.teams.launch(with_reserve("1G"), "a.toml", wait=True, timeout=30)
        assert same.already_running and same.applied == []


async def _ready(c: Any, name: str) -> bool:
    return bool((await _status(c, name)).readiness == "ready")


async def test_a_team_whose_reserve_leaves_no_room_is_refused_before_anything_starts(
        tmp_path: Path) -> None:
    write_meminfo(tmp_path / "meminfo", available_mib=1024, total_mib=4096)
    async with core(tmp_path) as c:
        base = team_config(tmp_path, {"name": "dev"})
        config = TeamConfig.model_validate({**base.model_dump(mode="json"), "team": {
            **base.team.model_dump(mode="json"), "memory_reserve": "4G"}})
        with pytest.raises(MemoryReserveTooLarge):
            await c.teams.launch(config, "a.toml", wait=True, timeout=30)
        assert await c.store.teams() == [] and c.teams.names() == []


async def test_a_team_stopped_while_its_member_waits_stops_at_once(tmp_path: Path) -> None:
    write_meminfo(tmp_path / "meminfo", available_mib=1024)
    async with core(tmp_path, admission=ample_memory(tmp_path, poll_interval=0.02)) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "dev"}), "a.toml", wait=True,
                             timeout=30)
        state = c.supervisor.member("web", "dev")
        assert state.launch == "waiting"
        with anyio.fail_after(10):
            await c.teams.stop("web")
        assert state.launch == "stopped" and c.runtime.opened == []


async def test_a_members_peak_is_journaled_and_is_what_its_kind_expects_next(
        tmp_path: Path, journal: AsyncStore) -> None:
    """Measured when it is up and every sample interval while it runs; its peak journaled
    (again when it grew by a tenth, and at its exit); the next member of its kind — after a
    restart of the daemon too — needs that much."""
    sizes = [150, 140, 160, 170, 180]  # MiB, one per measure (then the last again)
    measured: list[int] = []

    def measure(pid: int) -> int | None:
        measured.append(pid)
        return sizes[min(len(measured), len(sizes)) - 1] * MiB

    footprints = Footprints(FootprintJournal(journal))
    meminfo = write_meminfo(tmp_path / "meminfo", available_mib=1024 + 200)
    admission = Admission(footprints, MemorySource(meminfo, None),
                          holds_task=lambda team: _async({}), poll_interval=0.01,
                          sample_interval=0.01, measure=measure)
    team = _team({"name": "dev"})
    admission.configure(team)
    (dev,) = _states(team)
    dev.pid = 4242  # not a process: measure() is the test's
    async with anyio.create_task_group() as tg:
        await admission.launched(dev)
        assert await _peaks(journal) == [150 * MiB]
        tg.start_soon(admission.run)
        await until(lambda: _holds(len(measured) >= 5), deadline=10)
        assert await _peaks(journal) == [170 * MiB], "160 is not a tenth above 150; 170 is"
        await admission.exited(dev)
        tg.cancel_scope.cancel()
    assert await _peaks(journal) == [180 * MiB], "the last peak, at its exit"
    restarted = Footprints(FootprintJournal(journal))
    await restarted.load()
    kind = kind_of(team.members[0], sandboxed=False)
    assert restarted.expected(kind) == (180 * MiB, True)


async def test_a_process_gone_or_replaced_is_no_longer_measured(
        tmp_path: Path, journal: AsyncStore) -> None:
    """A paused member (no exit told) or one whose pid changed is never measured again under
    its old pid: a pid the kernel gave to another process measures that process."""
    measured: list[int] = []
    admission = Admission(Footprints(FootprintJournal(journal)),
                          MemorySource(write_meminfo(tmp_path / "m", available_mib=4096), None),
                          holds_task=lambda team: _async({}), sample_interval=0.01,
                          measure=lambda pid: measured.append(pid) or 100 * MiB)
    team = _team({"name": "dev"})
    (dev,) = _states(team)
    dev.pid = 4242
    await admission.launched(dev)
    dev.pid = None  # its process ended by plan (a pause): the lifecycle told no exit
    async with anyio.create_task_group() as tg:
        tg.start_soon(admission.run)
        await anyio.sleep(0.1)  # ten sample intervals: the thing under test is what is not done
        tg.cancel_scope.cancel()
    assert measured == [4242]


async def _peaks(journal: AsyncStore) -> list[int]:
    return (await FootprintJournal(journal).peaks()).get(("claude", "local"), [])


async def test_a_launch_starts_its_lead_first_wherever_the_file_puts_it(
        tmp_path: Path) -> None:
    """Members started together all join the line before it is looked at: with room for one,
    the lead starts and the members the file names before it wait."""
    write_meminfo(tmp_path / "meminfo", available_mib=1024 + 300)
    async with core(tmp_path, admission=ample_memory(tmp_path, poll_interval=3600)) as c:
        with capture_logs() as logs:
            await c.teams.launch(team_config(tmp_path, {"name": "a"}, {"name": "b"},
                                             {"name": "boss", "lead": True}),
                                 "a.toml", wait=True, timeout=30)
    said = [(e["event"], e["member"]) for e in logs
            if e["event"] in ("member_admitted", "member_waiting_for_memory")]
    # (a fake's process takes none of the meminfo file's memory: once boss is up, a fits)
    assert said[:3] == [("member_admitted", "boss"), ("member_waiting_for_memory", "a"),
                        ("member_waiting_for_memory", "b")]


async def test_a_member_up_holds_what_it_has_not_taken_yet_of_its_footprint(
        tmp_path: Path, journal: AsyncStore) -> None:
    """A CLI grows after its handshake: a member up still holds its footprint less what its
    tree holds, measured again at each look — until its tree stops growing (it settled below
    its footprint) or takes it all. One admitted that never comes up holds it all for its
    ``start_timeout``."""
    now, rss = [0.0], {4242: 100 * MiB}
    meminfo = write_meminfo(tmp_path / "meminfo", available_mib=1024 + 400)
    admission = Admission(Footprints(FootprintJournal(journal)), MemorySource(meminfo, None),
                          holds_task=lambda team: _async({}), poll_interval=0.01,
                          measure=rss.get, clock=lambda: now[0])
    # three kinds: what a's measures teach its kind is not what b and c expect
    team = _team({"name": "a"}, {"name": "b", "runtime": "opencode"},
                 {"name": "c", "runtime": "codex"})
    admission.configure(team)
    a, b, c = _states(team)
    told: dict[str, list[str]] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(admission.run)
        await admission.admit(a, told.setdefault("a", []).append)
        a.pid = 4242
        await admission.launched(a)  # up, 100 of its 260 MiB taken: 160 held
        done = anyio.Event()

        async def admit(state: MemberState) -> None:
            await admission.admit(state, told.setdefault(state.name, []).append)
            done.set()

        tg.start_soon(admit, b)
        await until(lambda: _holds(bool(told.get("b"))))
        assert told["b"][-1] == ("waiting for memory (needs ~350 MiB; 240 MiB free above the "
                                 "1 GiB reserve)")
        rss[4242], now[0] = 200 * MiB, 1.5  # still growing: 60 held
        await until(lambda: _holds("340 MiB free" in told["b"][-1]))
        now[0] = 3.0  # no growth since: it settled at 200, below its 260 — nothing held
        with anyio.fail_after(5):
            await done.wait()
        done = anyio.Event()
        tg.start_soon(admit, c)  # b admitted, not up: its 350 MiB held
        await until(lambda: _holds(bool(told.get("c"))))
        now[0] = 4.0 + b.config.start_timeout  # b never came up
        with anyio.fail_after(5):
            await done.wait()
        tg.cancel_scope.cancel()
