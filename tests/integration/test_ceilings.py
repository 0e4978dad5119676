"""A member's ceiling held by a real cgroup of this machine (docs/operations.md, "A ceiling per
teammate"): a member told to allocate past its ``memory_max`` is killed by the kernel alone —
the daemon and its teammate answer, ``member_memory_exceeded`` names the peak, the member
restarts and its turn is continued — and its cgroup is gone once it stops.

These tests need a cgroup the daemon can make (cgroup v1's memory hierarchy writable, as on
this project's CI machines, or a v2 subtree with the memory controller): elsewhere the launch
is refused with ``resource_limits_unavailable`` and they fail saying what to enable — never
skipped (no skipped test stands in for the feature).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.contracts import CGROUPS_MODULE
from runtimes.hosts import remote_side
from runtimes.hosts.local.host import entering
from tests.support.driver import REPO
from tests.support.members import fake_member
from tests.support.processes import cgroup_dir, wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


def _launched(teamctl: Teamctl, team: str, members: list[dict[str, object]]) -> None:
    done = teamctl.run("launch", str(teamctl.write_team(team, members)), "--timeout", "60")
    assert done.returncode == 0, (
        "the launch was refused: this test needs a cgroup the daemon can make (cgroup v1's "
        "memory hierarchy writable, or a v2 subtree with the memory controller delegated): "
        + done.stderr)


def test_a_member_past_its_memory_max_is_killed_alone_and_its_turn_is_continued(
    teamctl: Teamctl, follow_logs: LogFollower
) -> None:
    hog = fake_member("hog", memory_max="64M", backoff=[0.05, 0.5],
                      env={"FAKE_CLAUDE_ALLOCATE_ON_TURN": "1",
                           "FAKE_CLAUDE_ALLOCATE_MIB": "400"})
    _launched(teamctl, "ceil", [hog, fake_member("calm")])
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    by_name = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    hog_pid, calm_pid = by_name["hog"]["pid"], by_name["calm"]["pid"]
    assert by_name["hog"]["ceiling"] == "memory_max 64 MiB"
    assert by_name["calm"]["ceiling"] is None
    group = cgroup_dir(hog_pid)
    assert group.name == "ceil.hog" and group.parent.name.startswith("teamctl-"), group
    assert (group / "memory.limit_in_bytes").exists() or (group / "memory.max").exists()
    limit = group / ("memory.limit_in_bytes" if (group / "memory.limit_in_bytes").exists()
                     else "memory.max")
    assert int(limit.read_text()) == 64 << 20
    # the daemon and the teammate are not in it, nor anywhere under it
    for pid in (daemon, calm_pid):
        assert group.parent not in cgroup_dir(pid).parents, pid

    done = teamctl.run("send", "hog", "hold 400 MiB", "--wait", "--timeout", "90")
    assert done.returncode == 0, done.stderr
    assert wait_pid_exit(hog_pid, 10), "the process past its ceiling was killed"
    [exceeded] = [e for e in teamctl.log_events() if e["event"] == "member_memory_exceeded"]
    assert exceeded["member"] == "hog" and exceeded["oom_kills"] >= 1
    assert exceeded["memory_max"] == 64 << 20
    assert exceeded["peak"] is not None and 32 << 20 < exceeded["peak"] <= 64 << 20
    [exited] = [e for e in teamctl.log_events() if e["event"] == "member_exited"]
    assert exited["member"] == "hog" and exited["signal"] == "SIGKILL"
    assert exited["reason"].startswith("memory_max 64 MiB exceeded")
    [message] = teamctl.json("history", "hog")["messages"]
    assert message["state"] == "answered" and message["attempts"] == 2

    # killed alone: the daemon answers, the teammate kept its process and answers
    assert os.path.exists(f"/proc/{daemon}")
    reply = teamctl.run("send", "calm", "still there?", "--wait", "--timeout", "30")
    assert reply.returncode == 0, reply.stderr
    rows = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    assert rows["calm"]["pid"] == calm_pid and rows["calm"]["restarts"] == 0
    assert rows["hog"]["restarts"] == 1 and rows["hog"]["launch"] == "running"
    assert rows["hog"]["last_exit"]["reason"].startswith("memory_max 64 MiB exceeded")
    text = teamctl.run("status").stdout
    assert "hog: last exit: memory_max 64 MiB exceeded" in text, text
    new_group = cgroup_dir(rows["hog"]["pid"])
    assert new_group == group, "the restarted process is held to the same ceiling"

    teamctl.run("stop", "ceil")
    follow_logs.wait_for(lambda e: e["event"] == "member_stopped" and e["member"] == "hog")
    assert not group.exists(), "the member's cgroup is removed when it stops"



def test_a_sandboxed_member_s_whole_tree_is_held_and_cannot_reach_its_cgroup(
    teamctl: Teamctl, tmp_path: Path
) -> None:
    """bubblewrap and all it starts run in the member's cgroups (memory, cpu, pids), with
    each limit written; from inside, a shell the member runs is in them too, and the
    member's own limit file is out of its reach (the sandbox shows no /sys)."""
    (tmp_path / "box").mkdir()
    box = fake_member("box", workdir=str(tmp_path / "box"), sandbox="process",
                      permissions="full", sandbox_ro=[str(REPO / "fixtures")],
                      memory_max="256M", memory_high="192M", pids_max=64, cpu_weight=50)
    _launched(teamctl, "web", [box])
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["ceiling"] == "memory_max 256 MiB, memory_high 192 MiB, cpu_weight 50, pids_max 64"
    groups = {name: cgroup_dir(row["pid"], name) for name in ("memory", "cpu", "pids")}
    for group in groups.values():
        assert group.name == "web.box" and group.parent.name.startswith("teamctl-"), group
    memory = groups["memory"]
    if (memory / "memory.limit_in_bytes").exists():  # cgroup v1
        assert int((memory / "memory.limit_in_bytes").read_text()) == 256 << 20
        assert int((memory / "memory.soft_limit_in_bytes").read_text()) == 192 << 20
        assert int((groups["cpu"] / "cpu.shares").read_text()) == 512
    else:
        assert int((memory / "memory.max").read_text()) == 256 << 20
        assert int((memory / "memory.high").read_text()) == 192 << 20
        assert int((groups["cpu"] / "cpu.weight").read_text()) == 50
    assert (groups["pids"] / "pids.max").read_text().strip() == "64"
    limit = memory / ("memory.limit_in_bytes" if (memory / "memory.limit_in_bytes").exists()
                      else "memory.max")
    reply = teamctl.run("send", "box", f"TRY run cat /proc/self/cgroup\nTRY write {limit}",
                        "--wait")
    assert reply.returncode == 0, reply.stderr
    assert f"/{groups['memory'].parent.name}/web.box" in reply.stdout, reply.stdout
    assert f"try write {limit}: refused ENOENT" in reply.stdout, reply.stdout
    assert int(limit.read_text()) == 256 << 20


def test_the_trampoline_writes_the_program_s_own_pid_into_each_file_before_it_runs(
        tmp_path: Path) -> None:
    """The pid written is the program's (``exec`` keeps it), into every file, before the
    program's first line; its arguments arrive as they were (no shell reads them)."""
    procs = [tmp_path / "memory.procs", tmp_path / "pids.procs"]
    for path in procs:
        path.write_text("")
    hostile = ["a b", "$(touch x)", "'", "\"", "; exit 3", "-n"]
    program = ("import json, os, sys; from pathlib import Path; print(json.dumps([os.getpid(), "
               f"[Path(p).read_text() for p in {list(map(str, procs))!r}], sys.argv[1:]]))")
    done = subprocess.run(entering(procs, [sys.executable, "-c", program, *hostile]),
                          capture_output=True, text=True, cwd=tmp_path, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    pid, seen, args = json.loads(done.stdout)
    assert seen == [f"{pid}\n", f"{pid}\n"]
    assert args == hostile and not (tmp_path / "x").exists()


def test_a_cgroup_the_trampoline_cannot_enter_ends_the_start_before_the_program(
        tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    done = subprocess.run(entering([tmp_path / "gone" / "cgroup.procs"], ["touch", str(ran)]),
                          capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 125
    assert f"teamctl: cannot enter the cgroup {tmp_path / 'gone' / 'cgroup.procs'}" in done.stderr
    assert not ran.exists()


def test_no_cgroup_leaves_the_command_as_it_is() -> None:
    assert entering([], ["claude", "-p"]) == ["claude", "-p"]


# -- on an SSH host: the remote side, run here as the host runs it (no sshd: tests/e2e/) ----------

SIDE = Path(remote_side.__file__)


def _side(mode: str, stdin: bytes, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, str(SIDE), mode], input=stdin, capture_output=True,
                          timeout=60, check=False,
                          env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]})


def _cgroup(request: dict[str, object], tmp_path: Path) -> dict[str, object]:
    done = _side("cgroup", json.dumps({"source": CGROUPS_MODULE.read_text(),
                                       "machine": "host box", **request}).encode(), tmp_path)
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_the_ssh_remote_side_holds_a_runtime_to_its_ceiling_on_a_real_cgroup(
        tmp_path: Path) -> None:
    """orchestrator/cgroups.py shipped to the remote side makes the member's cgroup with its
    limit (under the side's own cgroup, as on a host); the start's trampoline puts the runtime
    in it before its program runs; past the limit the kernel kills it there; the end reads
    the OOM kill and the peak and removes the cgroup. Needs a cgroup this user can make (as
    the daemon's tests above)."""
    top = f"teamctl-itest{os.getpid()}"
    made = _cgroup({"op": "make", "top": top, "name": "web.hog", "controllers": ["memory"],
                    "ceiling": {"memory_max": 64 << 20}}, tmp_path)
    assert "problem" not in made, ("this test needs a cgroup this user can make (cgroup v1's "
                                   f"memory hierarchy writable, or v2 with memory): {made}")
    procs = [Path(p) for p in made["procs"]]  # type: ignore[attr-defined]
    memory = procs[0].parent
    assert memory.name == "web.hog" and memory.parent.name == top
    assert memory.parent.parent == cgroup_dir(os.getpid()) or memory.parent.parent == \
        cgroup_dir(os.getpid()).parent, "beside or under the side's own cgroup"
    hog = ("import os, sys; print(open('/proc/self/cgroup').read(), flush=True); "
           "held = [b'x' * (1 << 20) for _ in range(400)]; print('survived', flush=True)")
    # its stdin ends with the header: the grace outlasts the allocation (it is killed first)
    header = {"root": str(tmp_path / "mirror"), "argv": [sys.executable, "-c", hog],
              "cwd": str(tmp_path), "env": {}, "grace": 60, "enter": entering(procs, [])}
    done = _side("run", json.dumps(header).encode() + b"\n", tmp_path)
    assert done.returncode == 128 + 9, (done.returncode, done.stderr)
    assert f"/{top}/web.hog" in done.stdout.decode() and b"survived" not in done.stdout
    closed = _cgroup({"op": "close", "top": top, "name": "web.hog",
                      "group": {"version": made["version"], "dirs": made["dirs"]},
                      "deadline": 5}, tmp_path)
    assert closed["oom_kills"] >= 1, closed  # type: ignore[operator]
    assert 32 << 20 < closed["peak"] <= 64 << 20, closed  # type: ignore[operator]
    assert closed["removed"] is True and closed["left"] == []
    assert not memory.exists() and not memory.parent.exists()


def test_a_malformed_cgroup_request_ends_the_remote_side_with_2_and_makes_nothing(
        tmp_path: Path) -> None:
    for request in (b"not json", json.dumps({"op": "make"}).encode(),
                    json.dumps({"source": CGROUPS_MODULE.read_text(), "op": "make",
                                "top": "../x", "name": "y"}).encode()):
        done = _side("cgroup", request, tmp_path)
        assert done.returncode == 2 and b"a malformed cgroup request" in done.stderr
