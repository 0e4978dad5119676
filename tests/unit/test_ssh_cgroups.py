"""A member's cgroup on an SSH host, as the remote side makes it (runtimes/hosts/remote_side.py's
``cgroup`` mode: orchestrator/cgroups.py's source shipped and run there), on fake cgroup trees
(tests/support/cgroupfs.py): made with its limits and what an earlier start left killed, read
and removed, refused naming the host and what to enable there, and a group sent back that is
not one of teamctl's refused. The daemon's side (``SshHost``): what travels and the trampoline
its next start carries. The real kernel and a real process: tests/integration/test_ceilings.py;
a real sshd: tests/e2e/test_ssh_members.py."""

from __future__ import annotations

import ast
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.ceilings import Ceiling
from orchestrator.cgroups import CgroupError, Cgroups
from orchestrator.contracts import (
    CGROUPS_MODULE,
    CgroupsThere,
    McpServer,
    ResourceLimitsUnavailable,
)
from runtimes.hosts import remote_side
from runtimes.hosts.local.host import entering
from runtimes.hosts.sandbox.host import SandboxHost
from runtimes.hosts.ssh.host import SshHost, SshTarget
from tests.support.cgroupfs import FakeCgroupfs, hybrid_v1, v2_delegated

pytestmark = pytest.mark.anyio

HOST = "host box"
ENABLE = "run its members there as root"


def _cgroups(fs: FakeCgroupfs, module: Any = None) -> Any:
    kind = Cgroups if module is None else module.Cgroups
    return kind(fs.root, mkdir=fs.mkdir, rmdir=fs.rmdir, writable=fs.writable, machine=HOST,
                enable=ENABLE)


def _ask(cgroups: Any, **request: Any) -> dict[str, Any]:
    return remote_side.cgroup({"top": "teamctl-h1", "name": "web.dev", **request}, cgroups,
                              CgroupError)


def test_what_is_shipped_is_python_3_8_s_and_the_standard_library_s() -> None:
    """The remote side and orchestrator/cgroups.py run on the host's python3, which may be
    3.8: their grammar is 3.8's, and cgroups.py runs as a module of its own (no teamctl
    package there)."""
    for path in (Path(remote_side.__file__), CGROUPS_MODULE, McpServer.RELAY):
        ast.parse(path.read_text(), feature_version=(3, 8))
    module = remote_side._cgroups_module(CGROUPS_MODULE.read_text())
    assert module.__name__ == "teamctl_cgroups" and module.Cgroups is not Cgroups
    body = ast.parse(CGROUPS_MODULE.read_text()).body  # what it imports when it runs
    imported = {alias.name.split(".")[0] for node in body if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in body
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_the_shipped_module_makes_the_member_s_cgroup_as_here(tmp_path: Path) -> None:
    """Run as the host runs it (its own module), on a v1 machine: the member's cgroup under
    the session's own in each hierarchy, its limits written, its paths as the host has them."""
    fs = hybrid_v1(tmp_path)
    module = remote_side._cgroups_module(CGROUPS_MODULE.read_text())
    answer = remote_side.cgroup(
        {"op": "make", "top": "teamctl-h1", "name": "web.dev",
         "controllers": ["memory", "pids"], "ceiling": {"memory_max": 64 << 20, "pids_max": 64}},
        _cgroups(fs, module), module.CgroupError)
    memory = "/sys/fs/cgroup/memory/process_api/abc/teamctl-h1/web.dev"
    pids = "/sys/fs/cgroup/pids/teamctl-h1/web.dev"
    assert answer == {"version": 1, "dirs": {"memory": memory, "pids": pids},
                      "procs": [f"{memory}/cgroup.procs", f"{pids}/cgroup.procs"], "left": []}
    assert (tmp_path / memory[1:] / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert (tmp_path / pids[1:] / "pids.max").read_text() == "64"


def test_a_start_empties_what_an_earlier_one_left_before_its_limits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its channel lost, the daemon never closed it: the next start kills what is still in
    it (said in ``left``), then writes the limits (a lower limit over a fuller cgroup would be
    refused)."""
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    made = _ask(cgroups, op="make", controllers=["memory"], ceiling={"memory_max": 1 << 30})
    procs = tmp_path / made["procs"][0][1:]
    procs.write_text("4242\n4243\n")
    kernel_kill: list[int] = []
    monkeypatch.setattr("orchestrator.cgroups.os.kill", _killer(tmp_path, kernel_kill))
    again = _ask(cgroups, op="make", controllers=["memory"], ceiling={"memory_max": 64 << 20},
                 deadline=5)
    assert again["left"] == [4242, 4243] and sorted(kernel_kill) == [4242, 4243]
    assert again["dirs"] == made["dirs"]
    assert (procs.parent / "memory.limit_in_bytes").read_text() == str(64 << 20)


def _killer(root: Path, killed: list[int]) -> Any:
    """``os.kill`` as the kernel answers it for a fake tree: the pid killed leaves every
    ``cgroup.procs`` that lists it."""
    def kill(pid: int, signum: int) -> None:
        killed.append(pid)
        for procs in root.rglob("cgroup.procs"):
            words = [w for w in procs.read_text().split() if w != str(pid)]
            procs.write_text("".join(f"{w}\n" for w in words))
    return kill


def test_the_end_reads_the_oom_kills_and_the_peak_kills_what_is_left_and_removes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    made = _ask(cgroups, op="make", controllers=["memory", "pids"],
                ceiling={"memory_max": 64 << 20, "pids_max": 64})
    memory = tmp_path / made["dirs"]["memory"][1:]
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    (memory / "memory.max_usage_in_bytes").write_text(f"{64 << 20}\n")
    (memory / "cgroup.procs").write_text("4242\n")  # a server the member left
    kernel_kill: list[int] = []
    monkeypatch.setattr("orchestrator.cgroups.os.kill", _killer(tmp_path, kernel_kill))
    closed = _ask(cgroups, op="close", group={"version": 1, "dirs": made["dirs"]}, deadline=5)
    assert closed == {"oom_kills": 1, "peak": 64 << 20, "left": [4242], "removed": True,
                      "where": made["dirs"]["memory"]}
    assert not memory.exists() and not memory.parent.exists()
    assert not (tmp_path / made["dirs"]["pids"][1:]).exists()


def test_a_cgroup_something_outlives_the_deadline_in_stays_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    made = _ask(cgroups, op="make", controllers=["memory"], ceiling={"memory_max": 64 << 20})
    (tmp_path / made["procs"][0][1:]).write_text("4242\n")
    monkeypatch.setattr("orchestrator.cgroups.os.kill", lambda pid, signum: None)  # it lingers
    closed = _ask(cgroups, op="close", group={"version": 1, "dirs": made["dirs"]}, deadline=0.05)
    assert closed["left"] == [4242] and closed["removed"] is False
    assert (tmp_path / made["dirs"]["memory"][1:]).exists()


@pytest.mark.parametrize("dirs", [
    {"memory": "/sys/fs/cgroup/memory/process_api/abc/teamctl-h1/web.ops"},  # another's
    {"memory": "/sys/fs/cgroup/memory/process_api/abc/other/web.dev"},  # not teamctl's
    {"memory": "/home/dev/teamctl-h1/web.dev"},  # no cgroup file system
    {"memory": "/sys/fs/cgroup/memory/../../../home/teamctl-h1/web.dev"},
    {"memory": "sys/fs/cgroup/memory/teamctl-h1/web.dev"},  # relative
    {"io": "/sys/fs/cgroup/memory/teamctl-h1/web.dev"},  # no controller of teamctl's
])
def test_a_group_sent_back_that_is_not_the_member_s_is_refused_and_nothing_removed(
        tmp_path: Path, dirs: dict[str, str]) -> None:
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    other = tmp_path / "home/dev/teamctl-h1/web.dev"
    other.mkdir(parents=True)
    closed = _ask(cgroups, op="close", group={"version": 1, "dirs": dirs})
    assert "is no member cgroup teamctl-h1/web.dev" in closed["problem"]
    assert other.exists()


def test_where_no_cgroup_can_be_had_the_answer_names_the_host_and_what_to_enable(
        tmp_path: Path) -> None:
    fs = v2_delegated(tmp_path, writable=False)
    cgroups = _cgroups(fs)
    made = _ask(cgroups, op="make", controllers=["memory"], ceiling={"memory_max": 64 << 20})
    assert made["problem"].startswith("no cgroup of host box can take the memory controller")
    assert made["problem"].endswith(f"enable it: {ENABLE}") and "not writable" in made["problem"]
    assert _ask(cgroups, op="probe", controllers=["memory"])["problem"] == made["problem"]
    support = _ask(cgroups, op="support")
    assert not support["ok"] and support["fix"] == ENABLE
    assert not fs.made


def test_the_probe_and_doctor_s_report_make_a_cgroup_there_and_leave_nothing(
        tmp_path: Path) -> None:
    fs = hybrid_v1(tmp_path)
    cgroups = _cgroups(fs)
    assert _ask(cgroups, op="probe", controllers=["memory", "cpu", "pids"]) == {"problem": None}
    support = _ask(cgroups, op="support")
    assert support["ok"] and support["fix"] is None
    assert [(row["controller"], row["version"]) for row in support["controllers"]] == [
        ("memory", 1), ("cpu", 1), ("pids", 1)]
    assert fs.made and not any(path.exists() for path in fs.made)


@pytest.mark.parametrize("request_", [
    {"op": "make", "top": "../etc", "name": "web.dev"},
    {"op": "make", "top": "teamctl-h1", "name": "web/dev"},
    {"op": "make", "top": "teamctl-h1", "name": ".."},
    {"op": "make", "top": "teamctl-h1", "name": "web.dev", "controllers": ["memory"],
     "ceiling": {"memory_max": "64M"}},
    {"op": "make", "top": "teamctl-h1", "name": "web.dev", "controllers": ["memory"],
     "ceiling": {"memory_max": -1}},
    {"op": "make", "top": "teamctl-h1", "name": "web.dev", "controllers": ["memory"],
     "ceiling": {"memory_max": True}},
    {"op": "rm -rf", "top": "teamctl-h1", "name": "web.dev"},
    {"op": "make", "top": "teamctl-h1", "name": "web.dev", "controllers": [], "ceiling": {}},
    {"op": "probe", "top": "teamctl-h1", "controllers": ["memory", "rdma"]},
])
def test_a_malformed_request_is_refused_before_anything_is_made(
        tmp_path: Path, request_: dict[str, Any]) -> None:
    fs = hybrid_v1(tmp_path)
    refused = r"not a cgroup name|not a limit|unknown cgroup op|not the controllers"
    with pytest.raises(ValueError, match=refused):
        remote_side.cgroup(request_, _cgroups(fs), CgroupError)
    assert not fs.made


# -- the daemon's side ------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [SshHost, SandboxHost], ids=lambda c: c.__name__)
def test_a_host_that_makes_cgroups_there_implements_every_member_of_the_protocol(
        cls: type) -> None:
    """An SSH host says so in its profile (a sandbox around one takes its base's) and has
    each member of ``CgroupsThere``, async as the protocol is."""
    members = {name for name in vars(CgroupsThere) if not name.startswith("_")}
    assert members == {"cgroup_problem", "make_cgroup", "close_cgroup"}
    for name in members:
        assert inspect.iscoroutinefunction(getattr(cls, name)), f"{cls.__name__}.{name}"


class _Side:
    """The remote side's answers, as ``SshHost`` asks them (no ssh: its ``_run_side``)."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, *args: str, stdin: bytes | None = None,
                       deadline: float = 20.0, source: str = "") -> str:
        assert args == ("cgroup",) and stdin is not None
        self.asked.append({**json.loads(stdin), "deadline_s": deadline})
        return json.dumps(self.answers.pop(0)) + "\n"


def _host(tmp_path: Path, side: _Side, monkeypatch: pytest.MonkeyPatch) -> SshHost:
    host = SshHost(SshTarget("box", "10.0.0.5", "dev"), tmp_path, "h0", "web", "dev",
                   tmp_path / "state")

    async def connect(*, fresh: bool = False) -> None:
        return None

    monkeypatch.setattr(host, "connect", connect)
    monkeypatch.setattr(host, "_run_side", side)
    return host


async def test_an_ssh_host_asks_its_side_and_its_next_start_enters_the_cgroup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What travels: cgroups.py's source, the request, the host's name and what to enable
    there; the answer's ``cgroup.procs`` files become the trampoline the next start's header
    carries, and the end sends back the group as it was made."""
    memory = "/sys/fs/cgroup/memory/teamctl-h1/web.dev"
    side = _Side([{"version": 1, "dirs": {"memory": memory},
                   "procs": [f"{memory}/cgroup.procs"], "left": []},
                  {"oom_kills": 1, "peak": 64 << 20, "left": [7], "removed": True,
                   "where": memory}])
    host = _host(tmp_path, side, monkeypatch)
    ceiling = Ceiling(memory_max=64 << 20)
    assert await host.make_cgroup("teamctl-h1", "web.dev", ceiling) == memory
    [made] = side.asked
    assert made["source"] == CGROUPS_MODULE.read_text()
    assert (made["op"], made["top"], made["name"], made["controllers"], made["ceiling"],
            made["machine"]) == ("make", "teamctl-h1", "web.dev", ["memory"],
                                 {"memory_max": 64 << 20}, "host box")
    assert made["enable"].startswith("run its members there as root") and "dev" in made["enable"]
    assert host._enter == entering([Path(f"{memory}/cgroup.procs")], [])
    closed = await host.close_cgroup(5.0)
    assert closed is not None and (closed.oom_kills, closed.peak, closed.left, closed.where) == (
        1, 64 << 20, (7,), memory)
    assert side.asked[1]["group"] == {"version": 1, "dirs": {"memory": memory}}
    assert side.asked[1]["deadline"] == 5.0 and side.asked[1]["deadline_s"] > 5.0
    assert host._enter == [] and await host.close_cgroup(5.0) is None


async def test_what_the_host_cannot_hold_refuses_the_start_in_its_words(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    why = "no cgroup of host box can take the memory controller (...); enable it: ..."
    host = _host(tmp_path, _Side([{"problem": why}, {"problem": why}]), monkeypatch)
    with pytest.raises(ResourceLimitsUnavailable) as refused:
        await host.make_cgroup("teamctl-h1", "web.dev", Ceiling(memory_max=64 << 20))
    assert refused.value.member == "dev" and why in refused.value.message
    assert host._enter == []
    assert await host.cgroup_problem(frozenset({"memory"}), "teamctl-h1") == why


async def test_a_host_that_answers_garbage_is_a_typed_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = _host(tmp_path, _Side([{"version": "one"}]), monkeypatch)
    with pytest.raises(Exception, match="answered something unexpected") as failed:
        await host.make_cgroup("teamctl-h1", "web.dev", Ceiling(memory_max=64 << 20))
    assert getattr(failed.value, "code", None) == "host_runtime_missing"


def test_doctor_says_of_each_member_on_the_host_whether_its_ceiling_is_held_there(
        tmp_path: Path) -> None:
    """``doctor TEAMFILE --host NAME``: a row per member of that host with a ceiling, from
    what the host said of its cgroups — held (the versions), or why not and the fix."""
    from orchestrator.client.doctor import _ceilings_there
    from orchestrator.config import TeamConfig

    fs = hybrid_v1(tmp_path, controllers=("memory", "pids"))
    support = _ask(_cgroups(fs), op="support")
    assert support["made"] and not support["ok"]  # cpu: none there
    config = TeamConfig.model_validate({
        "team": {"name": "web", "workdir": str(tmp_path)},
        "members": [{"name": "dev", "runtime": "claude", "host": "dev@box",
                     "memory_max": "1G", "pids_max": 64},
                    {"name": "ops", "runtime": "claude", "host": "dev@box", "cpu_weight": 50},
                    {"name": "qa", "runtime": "claude", "host": "dev@box"}]})
    rows = _ceilings_there(config, list(config.members), support)
    assert rows[0] == {"check": "ceiling of dev (memory_max 1 GiB, pids_max 64)", "ok": True,
                       "detail": "held in a cgroup there (v1)"}
    assert rows[1]["check"] == "ceiling of ops (cpu_weight 50)" and not rows[1]["ok"]
    assert rows[1]["detail"].startswith("cannot be held: cgroup v2 at ") and \
        rows[1]["detail"].endswith(f"; {ENABLE}")
    assert len(rows) == 2, "a member without a ceiling has no row"
    failed = {**support, "made": False, "reason": "cannot make the cgroup …: Permission denied"}
    assert not _ceilings_there(config, list(config.members[:1]), failed)[0]["ok"]
