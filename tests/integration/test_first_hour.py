"""The rest of a newcomer's first hour (issue 45, item 7), through a real daemon and the fake
CLIs: a launch that cannot notify is refused, ``--team`` found from a member's name, the hints
teamctl prints run as printed, ``doctor``'s lists, shell completion asked of the daemon."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

from tests.support.asking import next_request
from tests.support.members import FAKE_CLAUDE, fake_member
from tests.support.terminal import Terminal

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


def test_a_launch_whose_notify_cannot_start_is_refused_naming_notify_init(
        teamctl: Teamctl) -> None:
    """A ``[notify]`` with ntfy and no ``teamctl notify init`` was a log line while the team
    ran and nobody was told: the launch now exits 2 naming the command, starts no member
    and leaves no daemon behind; after ``notify init`` the same file launches."""
    path = teamctl.write_team("web", [fake_member("lead")])
    path.write_text(path.read_text() + "\n[notify]\nntfy = { server = \"http://127.0.0.1:9\" }\n")
    refused = teamctl.run("launch", str(path))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "teamctl notify init" in refused.stderr
    assert teamctl.run("status").returncode == 4, "the daemon the refused launch started stays"
    assert teamctl.run("notify", "init", "--server", "http://127.0.0.1:9").returncode == 0
    launched = teamctl.run("launch", str(path))
    assert launched.returncode == 0, launched.stderr


def test_a_member_unique_among_running_teams_needs_no_team(teamctl: Teamctl) -> None:
    """With two teams running, ``send lead`` was refused (``team_ambiguous``, exit 2) though
    only one team has a lead: the team is the one that has the member. A name both teams
    have is refused naming them and the option to add; ``status --team T`` shows T."""
    web = teamctl.write_team("web", [fake_member("lead"), fake_member("rev")])
    api = teamctl.write_team("api", [fake_member("worker"), fake_member("rev")])
    assert teamctl.run("launch", str(web)).returncode == 0
    assert teamctl.run("launch", str(api)).returncode == 0

    sent = teamctl.run("send", "lead", "hello", "--wait")
    assert sent.returncode == 0 and "received: hello" in sent.stdout, sent.stderr
    assert teamctl.json("history", "lead")["team"] == "web"
    assert teamctl.json("history", "worker")["team"] == "api"

    both = teamctl.run("send", "rev", "which one?")
    assert both.returncode == 2
    assert "member 'rev' is in several running teams (web, api); name one with --team web" \
        in both.stderr
    assert teamctl.run("send", "--team", "api", "rev", "this one").returncode == 0
    nobody = teamctl.run("send", "nobody", "x")
    assert nobody.returncode == 1 and "lead, rev, worker" in nobody.stderr

    assert [t["name"] for t in teamctl.json("status", "--team", "api")["teams"]] == ["api"]
    shown = teamctl.run("status", "--team", "web")
    assert shown.returncode == 0 and shown.stdout.startswith("team web ")
    assert "team api" not in shown.stdout
    assert teamctl.run("status", "web", "--team", "api").returncode == 2


def _hints(text: str) -> list[list[str]]:
    return [shlex.split(hint)[1:] for hint in re.findall(r"'(teamctl [^']*)'", text)]


def test_the_hints_a_real_daemon_prints_run_as_printed(teamctl: Teamctl) -> None:
    """The fixes teamctl prints after a reply timeout, a dependency cycle and a launch of a
    changed team file are commands: each runs as printed and does what it says."""
    path = teamctl.write_team("web", [fake_member("lead")])
    assert teamctl.run("launch", str(path)).returncode == 0
    gate = teamctl.workdir / "gate"
    late = teamctl.run("send", "lead", f"GATE {gate}", "--wait", "--timeout", "0.5")
    assert late.returncode == 1 and "reply_timeout" not in late.stdout
    [history, follow] = _hints(late.stderr)
    assert (history, follow) == (["history", "--team", "web", "lead"], ["logs", "-f"])
    shown = teamctl.run(*history)
    assert shown.returncode == 0 and f"GATE {gate}" in shown.stdout
    gate.touch()

    for title, blocked_by in (("one", ()), ("two", ("T1",)), ("three", ("T2",))):
        added = teamctl.run("task", "add", title, *(a for b in blocked_by
                                                    for a in ("--blocked-by", b)))
        assert added.returncode == 0, added.stderr
    cycle = teamctl.run("task", "deps", "T1", "--add", "T3")
    assert cycle.returncode == 2
    [fix] = _hints(cycle.stderr)
    assert fix == ["task", "deps", "T3", "--remove", "T2"]
    assert teamctl.run(*fix).returncode == 0
    assert teamctl.run("task", "deps", "T1", "--add", "T3").returncode == 0, "the cycle is gone"

    path.write_text(path.read_text().replace('"claude-sonnet-4-5"', '"claude-opus-4-1"'))
    changed = teamctl.run("launch", str(path))
    assert changed.returncode == 1
    hints = _hints(changed.stderr)
    assert hints == [["stop", "web"], ["status", "web"]]
    assert teamctl.run(*hints[1]).returncode == 0
    assert teamctl.run(*hints[0]).returncode == 0
    assert teamctl.run("launch", str(path)).returncode == 0, "stopped, then launched again"


def test_doctor_lists_the_runtimes_the_team_file_uses_and_names_the_bubblewrap_install(
        teamctl: Teamctl) -> None:
    """A Claude-only team file was shown every runtime, three of them "not found", and
    ``acp`` as an executable of its own: with a file doctor lists what its members run here
    (each once), without one each runtime and ACP agent teamctl knows, found or not. Where
    bubblewrap is missing it names ``apt-get install bubblewrap``."""
    path = teamctl.write_team("web", [fake_member("lead"), fake_member("rev"),
                                      fake_member("far", host="dev@gpu1")])
    report = teamctl.json("doctor", str(path))
    assert [(r["runtime"], r["command"]) for r in report["runtimes"]] == [
        ("claude", str(FAKE_CLAUDE))]
    assert report["runtimes"][0]["path"] == str(FAKE_CLAUDE)
    alone = teamctl.json("doctor", extra_env={"TEAMCTL_BWRAP": "/nonexistent/bwrap"})
    assert [(r["runtime"], r["acp_agent"]) for r in alone["runtimes"]] == [
        ("claude", None), ("codex", None), ("opencode", None), ("acp", "qwen"),
        ("acp", "gemini")]
    assert alone["sandbox"]["ok"] is False
    assert alone["sandbox"]["fix"].startswith("apt-get install bubblewrap")
    said = teamctl.run("doctor", extra_env={"TEAMCTL_BWRAP": "/nonexistent/bwrap"})
    assert "apt-get install bubblewrap" in said.stdout
    assert "acp qwen" in said.stdout and "\nacp  " not in said.stdout, "no bare acp row"


def test_a_task_is_t3_in_every_output_with_one_state_and_the_operator_finishes_it_through_the_gate(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A task was ``3`` in ``--json``, ``T3`` on screen and in the members' tools, with both
    ``status`` and ``state``: it is ``T3`` everywhere, with one state. ``teamctl task done``
    finishes it as its owner would — the check runs first (a failing one keeps it in
    progress, exit 1) — and the owner is told, by teamctl."""
    check = (f"{shlex.quote(sys.executable)} -c "
             "\"import os, sys; sys.exit(0 if os.path.exists('ok') else 3)\"")
    path = teamctl.write_team("web", [fake_member("dev", claims=True)])
    path.write_text(path.read_text().replace("\n[[members]]", f"\n[board]\ncheck = "
                                             f"{json.dumps(check)}\n\n[[members]]", 1))
    assert teamctl.run("launch", str(path)).returncode == 0
    added = teamctl.json("task", "add", "wire the form")
    assert (added["id"], added["state"], "status" in added) == ("T1", "ready", False)
    follow_logs.wait_for(lambda e: e["event"] == "task_offered")
    listed = teamctl.json("task", "list", "--state", "in_progress")
    assert [t["id"] for t in listed["tasks"]] == ["T1"]
    assert teamctl.run("task", "add", "docs", "--blocked-by", "T1").stdout == "T2\n"
    assert teamctl.json("task", "show", "T2")["task"]["blocked_by"] == ["T1"]
    assert teamctl.json("task", "show", "T1")["dependents"] == ["T2"]
    [handed] = [m for m in teamctl.json("history", "dev")["messages"]
                if "you now own task T1" in m["text"]]
    assert (handed["task_id"], handed["sender"]) == ("T1", "teamctl")
    assert "from teamctl  task T1" in teamctl.run("history", "dev").stdout

    refused = teamctl.run("task", "done", "T1", "--summary", "wired")
    assert refused.returncode == 1
    assert "T1 is not done: its check failed" in refused.stderr
    assert teamctl.json("task", "show", "T1")["task"]["state"] == "in_progress"
    (teamctl.workdir / "ok").touch()
    finished = teamctl.run("task", "done", "T1", "--summary", "wired")
    assert (finished.returncode, finished.stdout) == (0, "T1 completed: done (dev)\n")
    shown = teamctl.json("task", "show", "T1")
    assert (shown["task"]["state"], shown["task"]["summary"]) == ("done", "wired")
    assert [e["actor"] for e in shown["events"] if e["kind"] == "completed"] == ["operator"]
    assert teamctl.json("task", "show", "T2")["task"]["blocked_by"] == [], "T2 unblocked"
    told = [m for m in teamctl.json("history", "dev")["messages"]
            if "task T1 (wire the form) is done" in m["text"]]
    assert [m["sender"] for m in told] == ["teamctl"], "its owner is told, by teamctl"


def _complete(teamctl: Teamctl, line: str, shell: str = "bash") -> subprocess.CompletedProcess[str]:
    """What a shell's completion function runs on Tab after ``line`` (click's protocol:
    ``_TEAMCTL_COMPLETE``, the words, the index of the one being completed), in a new
    interpreter as the shell starts it."""
    words = line.split()
    index = len(words) if line.endswith(" ") else len(words) - 1
    env = {**teamctl.env, "_TEAMCTL_COMPLETE": f"{shell}_complete", "COMP_WORDS": line,
           "COMP_CWORD": str(index)}
    return subprocess.run([sys.executable, "-m", "orchestrator"], env=env, text=True,
                          capture_output=True, timeout=30, check=False)


def _offered(teamctl: Teamctl, line: str) -> set[str]:
    done = _complete(teamctl, line)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return {row.split(",", 1)[1] for row in done.stdout.splitlines()}


def test_tab_completes_members_task_ids_and_approval_ids_from_the_daemon(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A Tab after ``send``, ``task show``, ``approve`` offers what the running daemon knows
    (zsh sees a description, each shown visibly); with the daemon down, or a socket that
    never answers, it offers nothing and prints nothing."""
    web = teamctl.write_team("web", [fake_member("lead"), fake_member("asker",
                                                                     permissions="ask")])
    assert teamctl.run("launch", str(web)).returncode == 0
    assert teamctl.run("task", "add", "wire the form").returncode == 0
    teamctl.run("send", "asker", "WRITE asked.txt from a test")
    asked = next_request(teamctl, follow_logs)

    assert _offered(teamctl, "teamctl send ") == {"lead", "asker"}
    assert _offered(teamctl, "teamctl send --team web a") == {"asker"}
    assert _offered(teamctl, "teamctl status ") == {"web"}
    assert _offered(teamctl, "teamctl task show ") == {"T1"}
    assert _offered(teamctl, "teamctl task show 1") == {"1"}
    assert _offered(teamctl, "teamctl approve ") == {asked["id"]}
    zsh = _complete(teamctl, "teamctl task assign T1 ", shell="zsh").stdout.splitlines()
    assert zsh[1:3] == ["lead", "web: claude, ready"], zsh

    teamctl.shutdown()
    assert _complete(teamctl, "teamctl send ").stdout.strip() == "", "no daemon: nothing"
    with socket.socket(socket.AF_UNIX) as silent:  # takes the connection, never answers
        silent.bind(str(teamctl.home / "teamctl.sock"))
        silent.listen()
        quiet = _complete(teamctl, "teamctl send ")
        assert (quiet.returncode, quiet.stdout.strip(), quiet.stderr) == (0, "", "")


def test_launch_and_send_wait_show_progress_on_a_terminal_and_nothing_when_piped(
        teamctl: Teamctl) -> None:
    """``launch`` and ``send --wait`` sat silent on a terminal for as long as they took: now
    the terminal reads who is starting and who is ready, then since when the reply is waited
    for (a line redrawn, wiped before the reply prints). Piped, and with ``--json`` on a
    terminal, they print exactly what they printed before."""
    started = teamctl.workdir / "rev-may-start"  # rev's start is held until it exists
    web = teamctl.write_team("web", [fake_member("lead"), fake_member(
        "rev", env={"FAKE_CLAUDE_START_GATE": str(started)})])
    shown = Terminal(teamctl, "launch", str(web))
    shown.until("teamctl: rev is starting\r\n")
    started.touch()
    code, screen = shown.finish()
    assert code == 0, screen
    for name in ("lead", "rev"):
        assert re.search(rf"teamctl: {name} is ready \([0-9.]+ s\)\r\n", screen), screen
    assert screen.index("rev is starting") < screen.index("rev is ready") < screen.index(
        "MEMBER  RUNTIME")

    api = teamctl.write_team("api", [fake_member("worker")])
    piped = teamctl.run("launch", str(api))
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    assert "is starting" not in piped.stdout
    as_json = Terminal(teamctl, "status", "--json")
    json.loads(as_json.finish()[1])  # a terminal: still nothing but the document

    gate = teamctl.workdir / "gate"
    waiting = Terminal(teamctl, "send", "lead", f"GATE {gate}", "--wait")
    waiting.until("teamctl: waiting for lead's reply since ")
    waiting.until("lead busy")
    gate.touch()
    code, screen = waiting.finish()
    assert code == 0, screen
    wiped = screen.rindex("\r\x1b[K")
    assert screen.index(f"received: GATE {gate}") > wiped, "the reply prints on a clean line"
    quiet = teamctl.run("send", "lead", "again", "--wait")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert quiet.stdout.startswith("fake-claude"), quiet.stdout
    json.loads(Terminal(teamctl, "send", "lead", "json", "--wait", "--json").finish()[1])
