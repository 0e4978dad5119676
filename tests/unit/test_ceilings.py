"""A member's ceiling (docs/operations.md, "A ceiling per teammate"): the team file's keys
(hostile values refused naming the file, the line, the key and the fix), a member's own key
over the team's, and the governor in the daemon's core on a fake cgroup tree — the launch
refused where nothing can hold a ceiling, each start made in its cgroup and its host told,
an OOM kill read back as ``member_memory_exceeded`` with the peak, the cgroup removed. The real
kernel's side: tests/integration/test_ceilings.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.ceilings import Ceiling, parse_size, refused_elsewhere, shown_size
from orchestrator.cgroups import Cgroups
from orchestrator.config import TeamConfig, load_team_file
from orchestrator.contracts import (
    CgroupClosed,
    HostProfile,
    HostUnavailable,
    RuntimeExited,
    TurnResult,
    cgroup_host,
    cgroups_there,
)
from orchestrator.daemon.members import Ceilings
from orchestrator.errors import ResourceLimitsUnavailable, TeamFileError
from runtimes.hosts.local.host import LocalHost, entering
from runtimes.hosts.sandbox.host import SandboxHost, member_policy
from runtimes.hosts.ssh.host import SshHost, SshTarget
from tests.support.cgroupfs import FakeCgroupfs, hybrid_v1, v2_delegated
from tests.support.fakes import FakeRuntime, core, team_config

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from orchestrator.contracts import Turn
    from tests.support.fakes import Core, FakeProcess

pytestmark = pytest.mark.anyio


# -- the keys -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "size"), [
    ("2G", 2 << 30), ("512M", 512 << 20), ("1.5G", 3 << 29), ("16M", 16 << 20),
    ("2GiB", 2 << 30), ("2 GB", 2 << 30), ("64m", 64 << 20), ("1T", 1 << 40),
    ("16384K", 16 << 20)])
def test_a_size_is_read_in_powers_of_1024(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(("value", "said"), [
    ("-1G", "is not a size"), ("0", "is not a size"), ("0G", "is outside 16 MiB … 1 PiB"),
    ("15M", "is outside"), ("2P", "is not a size"), ("1025T", "is outside"),
    ("NaN", "is not a size"), ("nanG", "is not a size"), ("infG", "is not a size"),
    ("1e3G", "is not a size"), ("lots", "is not a size"), ("", "is not a size"),
    ("1.5.5G", "is not a size"), ("2 G B", "is not a size"), ("9" * 40 + "G", "is not a size"),
    (2, "is not a size"), (2.0, "is not a size"), (float("nan"), "is not a size"),
    (True, "is not a size"), (None, "is not a size"), (["2G"], "is not a size")])
def test_a_hostile_size_is_refused_saying_what_to_write(value: object, said: str) -> None:
    with pytest.raises(ValueError, match=said) as refused:
        parse_size(value)
    assert "\"2G\"" in str(refused.value) or "16M" in str(refused.value)


def _file(tmp_path: Path, team: str, member: str) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "web"\n{team}\n\n[[members]]\nname = "dev"\n'
                    f'runtime = "claude"\n{member}\n')
    return path


@pytest.mark.parametrize(("team", "member", "expected"), [
    ("", 'memory_max = "-1G"', ":8: members[0].memory_max: '-1G' is not a size: write a size "
     "in quotes with its unit"),
    ('memory_max = 2147483648', "", ":3: team.memory_max: 2147483648 is not a size"),
    ("", "memory_high = nan", "members[0].memory_high: nan is not a size"),
    ("", 'memory_max = "99999T"', "members[0].memory_max: '99999T' is outside 16 MiB … 1 PiB"),
    ("", 'memory_max = "lots"', "members[0].memory_max: 'lots' is not a size"),
    ("", "cpu_weight = 0", "members[0].cpu_weight: 0 is outside 1 … 10000 (100 is every "
     "member's share"),
    ("cpu_weight = 10001", "", "team.cpu_weight: 10001 is outside 1 … 10000"),
    ("", 'cpu_weight = "100"', "members[0].cpu_weight: '100' is not a whole number: write one "
     "without quotes"),
    ("", "cpu_weight = true", "members[0].cpu_weight: True is not a whole number"),
    ("", "cpu_weight = 1.5", "members[0].cpu_weight: 1.5 is not a whole number"),
    ("", "pids_max = -1", "members[0].pids_max: -1 is outside 8 … 4194304"),
    ("", "pids_max = 99999999", "members[0].pids_max: 99999999 is outside 8 … 4194304"),
    ("", "pids_max = inf", "members[0].pids_max: inf is not a whole number"),
    ("", "memory_maximum = \"2G\"", "members[0].memory_maximum: unknown key (remove it or "
     "check its spelling)"),
    ('memory_max = "1G"', 'memory_high = "2G"', "members[0].memory_high: 2 GiB is above its "
     "memory_max 1 GiB, where it would never act; lower memory_high"),
])
def test_hostile_ceiling_values_are_refused_naming_file_line_key_and_fix(
        tmp_path: Path, team: str, member: str, expected: str) -> None:
    with pytest.raises(TeamFileError) as refused:
        load_team_file(_file(tmp_path, team, member))
    assert expected in refused.value.message, refused.value.message
    assert str(tmp_path / "team.toml") in refused.value.message


def test_a_member_s_own_key_wins_over_the_team_s_key_by_key(tmp_path: Path) -> None:
    config = load_team_file(_file(tmp_path, 'memory_max = "2G"\npids_max = 256',
                                  'memory_max = "1.5G"\ncpu_weight = 50'))
    ceiling = config.resolved(config.members[0]).ceiling
    assert ceiling == Ceiling(memory_max=3 << 29, cpu_weight=50, pids_max=256)
    assert ceiling.shown() == "memory_max 1.5 GiB, cpu_weight 50, pids_max 256"
    assert ceiling.controllers == frozenset({"memory", "cpu", "pids"})
    again = TeamConfig.model_validate(config.model_dump(mode="json"))  # as the journal keeps it
    assert again.resolved(again.members[0]).ceiling == ceiling


def test_no_key_is_no_ceiling(tmp_path: Path) -> None:
    config = load_team_file(_file(tmp_path, "", ""))
    assert config.resolved(config.members[0]).ceiling is None


def test_sizes_are_shown_as_a_person_reads_them() -> None:
    assert [shown_size(n) for n in (64 << 20, 3 << 29, 2 << 30, 1536, 10)] == [
        "64 MiB", "1.5 GiB", "2 GiB", "1.5 KiB", "10 B"]


def test_a_pod_refuses_what_it_cannot_hold_whatever_it_offers() -> None:
    ceiling = Ceiling(memory_max=1 << 30, pids_max=64)
    assert refused_elsewhere(ceiling, in_pod=False) is None
    assert refused_elsewhere(Ceiling(memory_max=1 << 30), in_pod=True) is None
    keys, why = refused_elsewhere(ceiling, in_pod=True) or ((), "")
    assert keys == ("pids_max",) and "podPidsLimit" in why


# -- the hosts ----------------------------------------------------------------------------------

async def test_this_machine_starts_every_process_inside_the_cgroups_it_is_told(
        tmp_path: Path) -> None:
    """``enter_cgroups`` on this machine's host: each later spawn is the trampoline around
    the command; a sandbox here forwards it to its base (bubblewrap itself starts inside);
    told none, the command as it is."""
    started: list[list[str]] = []

    async def spawner(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Any:
        started.append(list(argv))

    local = LocalHost(spawner=spawner)
    sandboxed = SandboxHost(local, "dev", member_policy(
        workdir=tmp_path, private=tmp_path / "private", state_root=tmp_path / "state",
        others=(), paths={"rw": [], "ro": [], "hide": []}, runtime="claude",
        login="isolated", permissions="edit"), tmp_path / "mcp")
    procs = [tmp_path / "memory" / "cgroup.procs", tmp_path / "pids" / "cgroup.procs"]
    for host in (local, sandboxed):
        assert host.profile.cgroups and not host.profile.holds_ceiling
        held = cgroup_host(host)
        assert held is not None
        held.enter_cgroups(procs)
        await local.spawn(["claude", "-p"], cwd=tmp_path, env={})
        assert started[-1] == entering(procs, ["claude", "-p"])
        assert started[-1][:2] == ["/bin/sh", "-c"] and started[-1][-2:] == ["claude", "-p"]
        held.enter_cgroups(())
        await local.spawn(["claude", "-p"], cwd=tmp_path, env={})
        assert started[-1] == ["claude", "-p"]


def test_a_host_elsewhere_enters_no_cgroup_here_and_a_pod_holds_the_ceiling_itself() -> None:
    """An SSH host makes the member's cgroup there (``CgroupsThere``), never one of this
    machine; a pod's resources hold it."""
    ssh = SshHost(SshTarget("box", "box.example"), Path("/nonexistent"), "h1", "web", "dev",
                  Path("/nonexistent"))
    assert not ssh.profile.cgroups and cgroup_host(ssh) is None
    assert not ssh.profile.holds_ceiling
    assert ssh.profile.cgroups_there and cgroups_there(ssh) is ssh
    assert cgroups_there(LocalHost()) is None
    from runtimes.hosts.kubernetes.host import KubernetesHost
    from runtimes.hosts.kubernetes.manifests import PodPlan

    pod = KubernetesHost("k8s", PodPlan("web", "dev", "default", "agent"), Path("/nonexistent"))
    assert pod.profile.holds_ceiling and not pod.profile.cgroups and cgroup_host(pod) is None


# -- the launch check ---------------------------------------------------------------------------

def _ceilings(fs: FakeCgroupfs, hosts: object = None) -> Ceilings:
    return Ceilings(Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable),
                    lambda: "h1", hosts=hosts or (lambda team, member: LocalHost()))  # type: ignore[arg-type]


def _team(tmp_path: Path, **member: object) -> TeamConfig:
    extra = member.pop("team", {})
    return TeamConfig.model_validate({
        "team": {"name": "web", "workdir": str(tmp_path), **extra},  # type: ignore[dict-item]
        "hosts": {"k8s": {"kind": "kubernetes", "image": "python:3.12"}},
        "members": [{"name": "dev", "runtime": "claude", "login": "isolated", **member}]})


async def test_a_launch_is_refused_where_no_cgroup_can_hold_the_ceiling(tmp_path: Path) -> None:
    fs = v2_delegated(tmp_path, writable=False)
    with pytest.raises(ResourceLimitsUnavailable) as refused:
        await _ceilings(fs).check(_team(tmp_path, memory_max="1G", pids_max=64))
    error = refused.value
    assert (error.code, error.retryable, error.member) == ("resource_limits_unavailable", False,
                                                            "dev")
    assert "its memory_max, pids_max cannot be held: no cgroup of this machine" in error.message
    assert "systemd-run --user --scope" in error.message
    assert "or remove memory_max and pids_max for it" in error.message
    assert not fs.made


async def test_a_launch_proves_the_cgroup_by_making_one_and_leaves_nothing(tmp_path: Path) -> None:
    fs = hybrid_v1(tmp_path)
    ceilings = _ceilings(fs)
    await ceilings.check(_team(tmp_path, team={"memory_max": "1G"}))
    assert fs.made and not any(path.exists() for path in fs.made)
    made = len(fs.made)
    await ceilings.check(_team(tmp_path, team={"memory_max": "2G"}))
    assert len(fs.made) == made, "a ceiling of the same controllers is proved once"
    await ceilings.check(_team(tmp_path))  # no ceiling: nothing to prove
    assert len(fs.made) == made


@dataclass(frozen=True)
class ThereHost(LocalHost):
    """A host that makes a member's cgroup on its own machine, as an SSH host's remote side
    does (``contracts.CgroupsThere``): what it was asked, and what it answers (``problem``: it
    cannot hold one; ``switches["unreachable"]``: it cannot be asked; ``closed``: what each
    end of a process finds there, in turn)."""

    problem: str | None = None
    changed: str | None = None  # what its starts answer, where it changed since the launch
    switches: dict[str, bool] = field(default_factory=dict)
    closed: list[CgroupClosed] = field(default_factory=list)
    asked: list[tuple[object, ...]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "box"

    @property
    def profile(self) -> HostProfile:
        return HostProfile(checks_local_login=False, local_memory=False, cgroups_there=True)

    def local_path(self, path: str) -> str | None:
        return None  # its files are its machine's (its workdir "~" there)

    def _reached(self) -> None:
        if self.switches.get("unreachable"):
            raise HostUnavailable("dev", "box", "host_unreachable", "ssh to box failed",
                                  retryable=True)

    async def cgroup_problem(self, controllers: frozenset[str], top: str) -> str | None:
        self.asked.append(("problem", tuple(sorted(controllers)), top))
        self._reached()
        return self.problem

    async def make_cgroup(self, top: str, name: str, ceiling: Ceiling) -> str:
        self.asked.append(("make", top, name, ceiling))
        self._reached()
        if (self.changed or self.problem) is not None:
            raise ResourceLimitsUnavailable("dev", ceiling.keys, self.changed or self.problem)
        return f"/sys/fs/cgroup/memory/{top}/{name}"

    async def close_cgroup(self, deadline: float) -> CgroupClosed | None:
        self.asked.append(("close", deadline))
        self._reached()
        if self.closed:
            return self.closed.pop(0)
        return CgroupClosed(0, 1 << 20, (), True, "/sys/fs/cgroup/memory/teamctl-h1/web.dev")


THERE = ("no cgroup of host box can take the memory controller (cgroup v1 memory: /sys/fs/"
         "cgroup/memory/user.slice is not writable by this user); enable it: run its members "
         "there as root")


async def test_an_ssh_member_s_ceiling_is_proved_on_its_host_which_the_refusal_names(
        tmp_path: Path) -> None:
    """Its host is asked to make a cgroup there and remove it (once per host and
    controllers in a launch), never this machine; what it cannot hold refuses the launch
    with the host's own words."""
    fs = v2_delegated(tmp_path, writable=False)  # nothing here: never asked
    refusing = ThereHost(problem=THERE)
    with pytest.raises(ResourceLimitsUnavailable) as refused:
        await _ceilings(fs, lambda team, member: refusing).check(
            _team(tmp_path, host="dev@box", memory_max="1G"))
    assert refused.value.member == "dev" and THERE in refused.value.message
    assert "its memory_max cannot be held: no cgroup of host box" in refused.value.message
    assert refusing.asked == [("problem", ("memory",), "teamctl-h1")]

    holding = ThereHost()
    config = TeamConfig.model_validate({
        "team": {"name": "web", "workdir": str(tmp_path), "memory_max": "1G"},
        "members": [{"name": name, "runtime": "claude", "host": "dev@box"}
                    for name in ("dev", "ops")]})
    await _ceilings(fs, lambda team, member: holding).check(config)
    assert holding.asked == [("problem", ("memory",), "teamctl-h1")], "asked once"
    assert not fs.made


async def test_an_ssh_host_that_cannot_be_asked_at_the_launch_leaves_it_to_the_start(
        tmp_path: Path) -> None:
    """A host down now is no refusal: the member's start asks again (and fails typed,
    retried, while the host is down)."""
    fs = v2_delegated(tmp_path, writable=False)
    down = ThereHost(switches={"unreachable": True})
    with capture_logs() as logs:
        await _ceilings(fs, lambda team, member: down).check(
            _team(tmp_path, host="dev@box", memory_max="1G"))
    [deferred] = [e for e in logs if e["event"] == "ceiling_check_deferred"]
    assert (deferred["member"], deferred["host"], deferred["code"]) == (
        "dev", "box", "host_unreachable")


async def test_a_pod_takes_all_but_pids_max(tmp_path: Path) -> None:
    fs = v2_delegated(tmp_path, writable=False)  # nothing here: never asked
    with pytest.raises(ResourceLimitsUnavailable, match="its pids_max cannot be held: a pod"):
        await _ceilings(fs).check(_team(tmp_path, host="k8s", memory_max="1G", pids_max=64))
    await _ceilings(fs).check(_team(tmp_path, host="k8s", memory_max="1G", cpu_weight=200))
    assert not fs.made


# -- doctor -------------------------------------------------------------------------------------

def test_doctor_says_which_controllers_this_machine_holds_by_making_a_cgroup(
        tmp_path: Path) -> None:
    from orchestrator.client.doctor import inspect_cgroups

    fs = hybrid_v1(tmp_path / "v1")
    found = inspect_cgroups(fs.root)
    assert found["ok"] and found["reason"] is None and found["fix"] is None
    assert [(row["controller"], row["version"]) for row in found["controllers"]] == [
        ("memory", 1), ("cpu", 1), ("pids", 1)]
    assert found["controllers"][0]["base"] == str(fs.root / "sys/fs/cgroup/memory/process_api/abc")
    assert not list((fs.root / "sys/fs/cgroup/memory/process_api/abc").glob("teamctl-*")), \
        "the cgroup it made is removed"
    partial = inspect_cgroups(v2_delegated(tmp_path / "v2", enabled=frozenset({"cpu"})).root)
    assert not partial["ok"] and "systemd-run --user --scope" in partial["fix"]
    assert [row["version"] for row in partial["controllers"]] == [None, 2, None]


def test_doctor_names_a_member_whose_ceiling_cannot_be_held_where_it_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.client.doctor import describe_members

    monkeypatch.setenv("TEAMCTL_HOME", str(tmp_path / "state"))
    [far, pod] = describe_members(TeamConfig.model_validate({
        "team": {"name": "web", "workdir": str(tmp_path), "memory_max": "1G"},
        "hosts": {"k8s": {"kind": "kubernetes", "image": "agent"}},
        "members": [{"name": "far", "runtime": "claude", "host": "dev@box"},
                    {"name": "pod", "runtime": "claude", "host": "k8s", "login": "isolated",
                     "pids_max": 64}]}), timeout=1.0)
    assert far["ceiling"] == "memory_max 1 GiB"
    assert "cannot be held" not in (far["problem"] or ""), "its host's: doctor --host asks it"
    assert "its pids_max cannot be held: a pod has no process limit" in pod["problem"]


# -- each start, in the core --------------------------------------------------------------------

async def _running(c: Core, tmp_path: Path, **member: object) -> None:
    config = team_config(tmp_path, {"name": "dev", "backoff": [0.01, 0.02], **member})
    await c.teams.launch(config, "team.toml", wait=True, timeout=10)


async def _until(c: Core, predicate: object) -> None:
    with anyio.fail_after(10):
        while True:
            state = c.supervisor.member("web", "dev")
            changed = state.changed()
            if predicate(state):  # type: ignore[operator]
                return
            await changed.wait()


async def test_each_start_runs_in_its_cgroup_and_an_oom_kill_is_read_back_with_the_peak(
        tmp_path: Path) -> None:
    """While it runs, its host starts every process inside its cgroup (the cgroup.procs
    files); an OOM kill in it ends the turn as a crash does: ``member_memory_exceeded`` with
    the peak, the exit's reason, a restart in a cgroup of its own again, the message
    answered; at the stop the cgroup is gone."""
    fs = hybrid_v1(tmp_path / "fs")
    hosts: dict[str, LocalHost] = {}

    def host(team: object, member: object) -> LocalHost:
        return hosts.setdefault("dev", LocalHost())

    group = tmp_path / "fs/sys/fs/cgroup/memory/process_api/abc/teamctl-h1/web.dev"

    async def killed(process: FakeProcess, turn: Turn) -> TurnResult:
        (group / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
        (group / "memory.max_usage_in_bytes").write_text(f"{64 << 20}\n")
        process.exit(-9)
        raise RuntimeExited("dev", -9, [])

    runtime = FakeRuntime([killed])
    cgroups = Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable)
    async with core(tmp_path, runtime, hosts=host, cgroups=cgroups) as c:
        (c.home.root / "home-id").write_text("h1\n")
        await _running(c, tmp_path, memory_max="64M", pids_max=32)
        assert hosts["dev"]._cgroups == [
            group / "cgroup.procs",
            tmp_path / "fs/sys/fs/cgroup/pids/teamctl-h1/web.dev/cgroup.procs"]
        assert (group / "memory.limit_in_bytes").read_text() == str(64 << 20)
        with capture_logs() as logs:
            await c.teams.send(None, "dev", "hold 400 MiB", wait=True, timeout=10)
        [exceeded] = [e for e in logs if e["event"] == "member_memory_exceeded"]
        assert (exceeded["peak"], exceeded["peak_shown"], exceeded["oom_kills"],
                exceeded["memory_max"]) == (64 << 20, "64 MiB", 1, 64 << 20)
        [exited] = [e for e in logs if e["event"] == "member_exited"]
        reason = ("memory_max 64 MiB exceeded: the kernel's OOM killer ended 1 process in its "
                  "cgroup (peak 64 MiB)")
        assert exited["reason"] == reason
        state = c.supervisor.member("web", "dev")
        await _until(c, lambda s: s.restarts == 1 and s.launch == "running")
        [shown] = (await c.teams.status("web")).teams[0].members
        assert shown.last_exit is not None and shown.last_exit.reason == reason
        assert shown.ceiling == "memory_max 64 MiB, pids_max 32"
        assert len(runtime.opened) == 2 and group.exists()
        assert (group / "memory.oom_control").read_text().endswith("oom_kill 0\n"), \
            "the restart runs in a cgroup made anew"
        assert state.launch == "running"
        await c.teams.stop("web")
        assert hosts["dev"]._cgroups == []
        assert not group.exists() and not group.parent.exists()


async def test_a_member_without_a_ceiling_gets_no_cgroup(tmp_path: Path) -> None:
    fs = hybrid_v1(tmp_path / "fs")
    hosts: dict[str, LocalHost] = {}
    cgroups = Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable)
    async with core(tmp_path, hosts=lambda t, m: hosts.setdefault("dev", LocalHost()),
                    cgroups=cgroups) as c:
        await _running(c, tmp_path)
        assert hosts["dev"]._cgroups == [] and not fs.made


async def test_a_cgroup_that_cannot_be_made_at_a_start_fails_the_member_typed(
        tmp_path: Path) -> None:
    """Past the launch check (the machine changed since): the start is refused with
    ``resource_limits_unavailable``, the member fatal, never run without its ceiling."""
    fs = hybrid_v1(tmp_path / "fs")
    proved: list[object] = []

    def mkdir(path: Path) -> None:
        if proved:
            raise PermissionError(13, "Permission denied", str(path))
        fs.mkdir(path)

    def rmdir(path: Path) -> None:
        fs.rmdir(path)
        proved.append(path)

    runtime = FakeRuntime()
    cgroups = Cgroups(fs.root, mkdir=mkdir, rmdir=rmdir, writable=fs.writable)
    async with core(tmp_path, runtime, cgroups=cgroups) as c:
        await _running(c, tmp_path, memory_max="64M")
        state = c.supervisor.member("web", "dev")
        await _until(c, lambda s: s.launch == "fatal")
        assert "its memory_max cannot be held: cannot make the cgroup" in (state.error or "")
        assert "Permission denied" in (state.error or "")
        assert runtime.opened == [], "never started without its ceiling"


async def test_a_process_left_in_the_cgroup_is_killed_before_it_is_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = hybrid_v1(tmp_path / "fs")
    group = tmp_path / "fs/sys/fs/cgroup/memory/process_api/abc/teamctl-h1/web.dev"
    killed: list[int] = []

    def kill(pid: int, signum: int) -> None:
        killed.append(pid)
        (group / "cgroup.procs").write_text("")  # the kernel empties it

    monkeypatch.setattr("orchestrator.cgroups.os.kill", kill)
    runtime = FakeRuntime()
    cgroups = Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable)
    async with core(tmp_path, runtime, cgroups=cgroups) as c:
        (c.home.root / "home-id").write_text("h1\n")
        await _running(c, tmp_path, memory_max="64M")
        (group / "cgroup.procs").write_text("4242\n")  # a server the member started, left
        with capture_logs() as logs:
            await c.teams.stop("web")
        assert killed == [4242] and not group.exists()
        assert [e["pids"] for e in logs if e["event"] == "member_cgroup_leftovers"] == [[4242]]


async def test_an_oom_kill_under_memory_high_alone_says_the_machine_ran_out(
        tmp_path: Path) -> None:
    """No memory_max: the OOM kill was the machine's (its cgroup's count says so), not a
    ceiling crossed — the reason says which."""
    fs = hybrid_v1(tmp_path / "fs")
    group = tmp_path / "fs/sys/fs/cgroup/memory/process_api/abc/teamctl-h1/web.dev"

    async def killed(process: FakeProcess, turn: Turn) -> TurnResult:
        (group / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
        process.exit(-9)
        raise RuntimeExited("dev", -9, [])

    cgroups = Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable)
    async with core(tmp_path, FakeRuntime([killed]), cgroups=cgroups) as c:
        (c.home.root / "home-id").write_text("h1\n")
        await _running(c, tmp_path, memory_high="64M")
        with capture_logs() as logs:
            await c.teams.send(None, "dev", "hold 400 MiB", wait=True, timeout=10)
        [exited] = [e for e in logs if e["event"] == "member_exited"]
        assert exited["reason"].startswith("the machine's memory ran out (it has no memory_max)")


# -- each start on an SSH host, in the core -----------------------------------------------------

async def test_an_ssh_member_runs_in_the_cgroup_its_host_makes_and_an_oom_kill_there_is_read(
        tmp_path: Path) -> None:
    """Each start asks its host for its cgroup there (the same name as here); once the
    process has ended its host's answer is read — an OOM kill there is
    ``member_memory_exceeded`` with the host and the peak, the exit's reason, the member
    restarted in a cgroup made again; at the stop it is closed. This machine makes none."""
    fs = hybrid_v1(tmp_path / "fs")
    where = "/sys/fs/cgroup/memory/user.slice/teamctl-h1/web.dev"
    there = ThereHost(closed=[CgroupClosed(1, 64 << 20, (4242,), True, where)])

    async def killed(process: FakeProcess, turn: Turn) -> TurnResult:
        process.exit(-9)
        raise RuntimeExited("dev", -9, [])

    runtime = FakeRuntime([killed])
    cgroups = Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable)
    async with core(tmp_path, runtime, hosts=lambda team, member: there,
                    cgroups=cgroups) as c:
        (c.home.root / "home-id").write_text("h1\n")
        await _running(c, tmp_path, memory_max="64M", pids_max=32, host="dev@box")
        ceiling = Ceiling(memory_max=64 << 20, pids_max=32)
        assert there.asked == [("problem", ("memory", "pids"), "teamctl-h1"),
                               ("make", "teamctl-h1", "web.dev", ceiling)]
        with capture_logs() as logs:
            await c.teams.send(None, "dev", "hold 400 MiB", wait=True, timeout=10)
        [exceeded] = [e for e in logs if e["event"] == "member_memory_exceeded"]
        assert (exceeded["host"], exceeded["cgroup"], exceeded["peak"], exceeded["peak_shown"],
                exceeded["oom_kills"]) == ("box", where, 64 << 20, "64 MiB", 1)
        [left] = [e for e in logs if e["event"] == "member_cgroup_leftovers"]
        assert left["pids"] == [4242] and left["host"] == "box"
        [exited] = [e for e in logs if e["event"] == "member_exited"]
        assert exited["reason"] == ("memory_max 64 MiB exceeded: the kernel's OOM killer "
                                    "ended 1 process in its cgroup (peak 64 MiB)")
        await _until(c, lambda s: s.restarts == 1 and s.launch == "running")
        assert [a[0] for a in there.asked] == ["problem", "make", "close", "make"]
        await c.teams.stop("web")
        assert [a[0] for a in there.asked] == ["problem", "make", "close", "make", "close"]
        assert there.asked[-1] == ("close", 5.0)
    assert not fs.made, "nothing of this machine's"


async def test_a_cgroup_an_ssh_host_cannot_make_at_a_start_fails_the_member_typed(
        tmp_path: Path) -> None:
    """The host changed since the launch (or could not be asked then): the start is refused
    with ``resource_limits_unavailable`` in the host's words, never run without it."""
    fs = hybrid_v1(tmp_path / "fs")
    there = ThereHost(changed=THERE)  # it could at the launch; by the start, no more
    runtime = FakeRuntime()
    cgroups = Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable)
    async with core(tmp_path, runtime, hosts=lambda team, member: there,
                    cgroups=cgroups) as c:
        await _running(c, tmp_path, memory_max="64M", host="dev@box")
        state = c.supervisor.member("web", "dev")
        await _until(c, lambda s: s.launch == "fatal")
        assert THERE in (state.error or "") and runtime.opened == []


async def test_a_host_that_cannot_be_asked_once_the_process_ended_is_the_member_s_trouble(
        tmp_path: Path) -> None:
    """Its cgroup stays there (its next start empties and takes it over); the end is logged,
    the member restarts by its policy, the daemon serves on."""
    fs = hybrid_v1(tmp_path / "fs")
    there = ThereHost()

    async def cut(process: FakeProcess, turn: Turn) -> TurnResult:
        there.switches["unreachable"] = True  # the network went with the process
        process.exit(-9)
        raise RuntimeExited("dev", -9, [])

    cgroups = Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable)
    async with core(tmp_path, FakeRuntime([cut]), hosts=lambda team, member: there,
                    cgroups=cgroups) as c:
        await _running(c, tmp_path, memory_max="64M", host="dev@box", max_restarts=50)
        with capture_logs() as logs:
            message = await c.teams.send(None, "dev", "go", wait=False, timeout=None)
            await _until(c, lambda s: s.restarts >= 1)
            failed = [e for e in logs if e["event"] == "member_cgroup_close_failed"]
            assert failed and failed[0]["host"] == "box" and "ssh to box" in failed[0]["error"]
            there.switches["unreachable"] = False  # back
            await _until(c, lambda s: s.launch == "running")
        assert message is not None
        assert c.supervisor.member("web", "dev").last_exit is not None
