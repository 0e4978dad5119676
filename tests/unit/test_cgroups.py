"""This machine's cgroups as ``orchestrator.cgroups`` reads them, on fake trees
(tests/support/cgroupfs.py): which hierarchy a member's cgroup goes in (v1 or v2, beside the
daemon's own, never inside it), the limits written there, what is read back (OOM kills, the
peak), and what is removed. The real kernel's side: tests/integration/test_ceilings.py."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import pytest

from orchestrator.ceilings import Ceiling
from orchestrator.cgroups import CgroupError, Cgroups
from tests.support.cgroupfs import FakeCgroupfs, hybrid_v1, v2_delegated, v2_root

if TYPE_CHECKING:
    from pathlib import Path

ALL = frozenset({"memory", "cpu", "pids"})
CEILING = Ceiling(memory_max=64 << 20, memory_high=48 << 20, cpu_weight=50, pids_max=64)


def _cgroups(fs: FakeCgroupfs) -> Cgroups:
    return Cgroups(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable)


def test_on_a_v1_machine_each_controller_s_cgroup_goes_under_the_daemon_s_own(
        tmp_path: Path) -> None:
    fs = hybrid_v1(tmp_path)
    layout = _cgroups(fs).layout()
    assert layout.v2 is None  # the unified mount offers no memory, cpu or pids
    assert {name: h.base for name, h in layout.v1.items()} == {
        "memory": tmp_path / "sys/fs/cgroup/memory/process_api/abc",
        "cpu": tmp_path / "sys/fs/cgroup/cpu", "pids": tmp_path / "sys/fs/cgroup/pids"}
    chosen = layout.choose(frozenset({"memory", "pids"}))
    assert not isinstance(chosen, str)
    assert [(h.version, h.base.name) for h in chosen] == [(1, "abc"), (1, "pids")]


def test_v1_limits_are_written_as_v1_has_them(tmp_path: Path) -> None:
    """memory_max bounds memory and swap together; memory_high is the soft limit; a weight
    of 50 is 512 shares (100 ↔ 1024, as systemd maps them)."""
    fs = hybrid_v1(tmp_path)
    group = _cgroups(fs).make(ALL, "teamctl-h1", "web.dev", CEILING)
    memory = tmp_path / "sys/fs/cgroup/memory/process_api/abc/teamctl-h1/web.dev"
    assert group.version == 1 and group.dirs["memory"] == memory
    assert (memory / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert (memory / "memory.memsw.limit_in_bytes").read_text() == str(64 << 20)
    assert (memory / "memory.soft_limit_in_bytes").read_text() == str(48 << 20)
    assert (group.dirs["cpu"] / "cpu.shares").read_text() == "512"
    assert (group.dirs["pids"] / "pids.max").read_text() == "64"
    assert set(group.procs) == {memory / "cgroup.procs",
                                tmp_path / "sys/fs/cgroup/cpu/teamctl-h1/web.dev/cgroup.procs",
                                tmp_path / "sys/fs/cgroup/pids/teamctl-h1/web.dev/cgroup.procs"}


def test_a_group_taken_over_loses_the_limits_the_ceiling_no_longer_sets(tmp_path: Path) -> None:
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.dev", CEILING)
    group = cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.dev",
                         Ceiling(memory_max=128 << 20))
    assert (group.dirs["memory"] / "memory.limit_in_bytes").read_text() == str(128 << 20)
    assert (group.dirs["memory"] / "memory.soft_limit_in_bytes").read_text() == "-1"


def test_a_delegated_v2_subtree_takes_teamctl_s_group_beside_the_daemon_never_in_it(
        tmp_path: Path) -> None:
    fs = v2_delegated(tmp_path)
    cgroups = _cgroups(fs)
    slice_ = tmp_path / "sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice"
    layout = cgroups.layout()
    assert layout.v2 is not None and layout.v2.base == slice_ and layout.v2.controllers == ALL
    group = cgroups.make(ALL, "teamctl-h1", "web.dev", CEILING)
    member = slice_ / "teamctl-h1/web.dev"
    assert group.version == 2 and group.paths == (member,)
    assert group.procs == (member / "cgroup.procs",)
    assert set((slice_ / "teamctl-h1/cgroup.subtree_control").read_text().split()) == {
        "+cpu", "+memory", "+pids"}
    assert (member / "memory.max").read_text() == str(64 << 20)
    assert (member / "memory.swap.max").read_text() == "0"  # no way past it through swap
    assert (member / "memory.high").read_text() == str(48 << 20)
    assert (member / "cpu.weight").read_text() == "50"
    assert (member / "pids.max").read_text() == "64"
    assert not (slice_ / "run-1.scope" / "teamctl-h1").exists()


def test_the_root_of_v2_is_used_by_a_daemon_that_sits_there(tmp_path: Path) -> None:
    fs = v2_root(tmp_path)
    cgroups = _cgroups(fs)
    layout = cgroups.layout()
    assert layout.v2 is not None and layout.v2.base == tmp_path / "sys/fs/cgroup"
    group = cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.dev", Ceiling(64 << 20))
    assert (tmp_path / "sys/fs/cgroup/cgroup.subtree_control").read_text() == "+memory"
    assert (group.paths[0] / "memory.max").read_text() == str(64 << 20)


@pytest.mark.parametrize(("fs", "named"), [
    (lambda p: v2_delegated(p, writable=False), "is not writable by this user"),
    (lambda p: v2_delegated(p, enabled=frozenset({"cpu"})), "the memory, pids controllers"),
    (lambda p: hybrid_v1(p, controllers=("memory", "cpu")), "enabled for "),
])
def test_where_no_hierarchy_has_a_controller_the_answer_names_it_and_the_fix(
        tmp_path: Path, fs: object, named: str) -> None:
    found = fs(tmp_path)  # type: ignore[operator]
    cgroups = _cgroups(found)
    why = cgroups.layout().choose(ALL)
    assert isinstance(why, str) and named in why and "systemd-run --user --scope" in why
    if found.version == 1:
        assert "take the pids controller (" in why and "cgroup v1 has cpu, memory" in why
    with pytest.raises(CgroupError, match="enable it"):
        cgroups.make(ALL, "teamctl-h1", "web.dev", CEILING)
    assert cgroups.probe(ALL, "teamctl-h1") == why


def test_a_mount_that_shows_a_part_of_the_hierarchy_is_read_relative_to_it(
        tmp_path: Path) -> None:
    """A container's cgroup mount shows its own cgroup as the mount's root (mountinfo's
    fourth field); a path with a space is written ``\\040`` there."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("4:memory:/docker/c1/inner\n0::/\n")
    (tmp_path / "proc/self/mountinfo").write_text(
        "40 31 0:40 /docker/c1 /sys/fs/my\\040cgroup rw - cgroup cgroup rw,memory\n")
    fs = FakeCgroupfs(tmp_path, 1, {"sys/fs/my cgroup": frozenset({"memory"})})
    fs.cgroup("sys/fs/my cgroup", "/inner")
    layout = _cgroups(fs).layout()
    assert layout.v1["memory"].base == tmp_path / "sys/fs/my cgroup/inner"


def test_no_proc_and_no_mount_is_a_machine_without_cgroups(tmp_path: Path) -> None:
    why = Cgroups(tmp_path).layout().choose(frozenset({"memory"}))
    assert isinstance(why, str) and "no cgroup hierarchy is mounted" in why


@pytest.mark.parametrize("make", [hybrid_v1, v2_delegated])
def test_the_verdict_is_the_oom_kills_and_the_peak(tmp_path: Path, make: object) -> None:
    fs = make(tmp_path)  # type: ignore[operator]
    cgroups = _cgroups(fs)
    group = cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.dev", Ceiling(64 << 20))
    memory = group.dirs["memory"]
    assert cgroups.verdict(group).oom_kills == 0
    if group.version == 1:
        (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
        (memory / "memory.max_usage_in_bytes").write_text(f"{64 << 20}\n")
    else:
        (memory / "memory.events").write_text("low 0\nhigh 3\nmax 9\noom 2\noom_kill 2\n")
        (memory / "memory.peak").write_text(f"{64 << 20}\n")
    verdict = cgroups.verdict(group)
    assert (verdict.oom_kills, verdict.peak) == (2, 64 << 20)


def test_a_v2_kernel_without_a_peak_says_none(tmp_path: Path) -> None:
    fs = v2_delegated(tmp_path)
    cgroups = _cgroups(fs)
    group = cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.dev", Ceiling(64 << 20))
    (group.paths[0] / "memory.peak").unlink()
    assert cgroups.verdict(group).peak is None


def test_a_group_is_removed_once_empty_and_teamctl_s_with_its_last(tmp_path: Path) -> None:
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    dev = cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.dev", Ceiling(64 << 20))
    ops = cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.ops", Ceiling(64 << 20))
    (dev.procs[0]).write_text("4242\n")  # a process left in it
    assert cgroups.pids(dev) == {4242}
    assert cgroups.remove(dev, "teamctl-h1") is False and dev.paths[0].exists()
    dev.procs[0].write_text("")
    assert cgroups.remove(dev, "teamctl-h1") is True and not dev.paths[0].exists()
    top = dev.paths[0].parent
    assert top.exists()  # web.ops is still in it
    assert cgroups.remove(ops, "teamctl-h1") is True and not top.exists()


def test_the_sweep_stops_what_a_dead_daemon_left_and_removes_its_empty_cgroups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process still in one is killed (it is an orphan: no daemon of this home runs); a
    cgroup not yet empty stays, for its member's next start to take over."""
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    left = cgroups.make(ALL, "teamctl-h1", "web.dev", CEILING)
    busy = cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.ops", Ceiling(64 << 20))
    busy.procs[0].write_text("4242\n")
    signalled: list[tuple[int, int]] = []
    monkeypatch.setattr("orchestrator.cgroups.os.kill",
                        lambda pid, signum: signalled.append((pid, signum)))
    removed, killed = cgroups.sweep("teamctl-h1")
    assert set(removed) == set(left.paths) and killed == [4242]
    assert signalled == [(4242, signal.SIGKILL)]
    assert busy.paths[0].exists() and not any(p.exists() for p in left.paths)


def test_a_v2_group_is_emptied_through_cgroup_kill(tmp_path: Path) -> None:
    fs = v2_delegated(tmp_path)
    cgroups = _cgroups(fs)
    group = cgroups.make(frozenset({"memory"}), "teamctl-h1", "web.dev", Ceiling(64 << 20))
    cgroups.kill(group)
    assert (group.paths[0] / "cgroup.kill").read_text() == "1"


def test_the_probe_makes_a_cgroup_and_leaves_nothing(tmp_path: Path) -> None:
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    assert cgroups.probe(ALL, "teamctl-h1") is None
    assert fs.made and not any(path.exists() for path in fs.made)
