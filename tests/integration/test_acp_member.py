"""ACP members (runtime = "acp") through a real daemon and the fake ACP agent
(fixtures/bin/fake-acp, shaped on Qwen Code and Gemini CLI): turns on one long-lived process
and one session, images as base64 blocks of the planned bytes, the session loaded again after a
relaunch, permission requests answered by the profile or the operator, and the faults typed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support import images
from tests.support.asking import launch, next_request, reply_to
from tests.support.driver import socket_exchange
from tests.support.members import FAKE_ACP, acp_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl

REPO = Path(__file__).resolve().parents[2]


def _row(teamctl: Teamctl) -> dict[str, Any]:
    [row] = teamctl.json("status")["teams"][0]["members"]
    return row  # type: ignore[no-any-return]


def test_text_turns_run_on_one_process_and_one_session_that_a_relaunch_loads(
        teamctl: Teamctl) -> None:
    """Each turn is a session/prompt on the same agent process and session; the reply is the
    streamed chunks; a relaunch loads the recorded session (session/load) and goes on."""
    team = teamctl.write_team("web", [acp_member("qw")])
    assert teamctl.run("launch", str(team)).returncode == 0
    row = _row(teamctl)
    assert row["readiness"] == "ready" and row["session_id"]
    pid, session = row["pid"], row["session_id"]
    first = teamctl.run("send", "qw", "remember kiwi", "--wait")
    assert first.returncode == 0, first.stderr
    assert "fake-acp (fake-small) turn 1 received: remember kiwi" in first.stdout
    second = teamctl.run("send", "qw", "and again", "--wait")
    assert "turn 2 received: and again" in second.stdout
    assert teamctl.member_pids() == [pid], "one process for every turn"

    assert teamctl.run("stop", "web").returncode == 0
    assert wait_pid_exit(pid, 10)
    assert teamctl.run("launch", str(team)).returncode == 0
    row = _row(teamctl)
    assert row["session_id"] == session and row["pid"] != pid
    third = teamctl.run("send", "qw", "still there?", "--wait")
    assert "turn 3 received: still there?" in third.stdout, "the session was loaded again"


def test_an_image_arrives_as_a_base64_block_of_the_planned_bytes(teamctl: Teamctl) -> None:
    """The planned variant goes as an ACP image block: the agent decodes the same bytes
    (sha256), with its MIME type; nothing of the image is logged."""
    team = teamctl.write_team("web", [acp_member("qw", vision=True)])
    assert teamctl.run("launch", str(team)).returncode == 0
    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "qw", "look")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    assert planned["purpose"] == "acp-image-block"
    done = teamctl.run("send", "--attach", str(shot), "qw", "look", "--wait")
    assert done.returncode == 0, done.stderr
    [got] = images.reported(done.stdout)
    assert (got["mime"], got["declared"], int(got["width"]), int(got["height"]),
            got["sha256"]) == (planned["mime"], planned["mime"], planned["width"],
                               planned["height"], planned["sha256"])
    log_text = (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    assert not re.search(r"[A-Za-z0-9+/]{200,}", log_text), "no base64 in the logs"


def test_an_agent_without_image_input_refuses_an_image_turn_and_goes_on(
        teamctl: Teamctl) -> None:
    """An agent whose promptCapabilities has no image fails an image turn (typed, not
    retried) and takes the next text turn."""
    member = acp_member("qw", vision=True, env={"FAKE_ACP_NO_IMAGE": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    done = teamctl.run("send", "--attach", str(shot), "qw", "look", "--wait")
    assert done.returncode == 1 and "does not take images" in done.stderr
    [message] = teamctl.json("history", "qw")["messages"]
    assert (message["state"], message["error"]["code"]) == ("failed", "turn_failed")
    again = teamctl.run("send", "qw", "text then", "--wait")
    assert "turn 1 received: text then" in again.stdout


def test_the_profile_answers_permission_requests_and_a_refusal_is_noted(
        teamctl: Teamctl) -> None:
    """``read`` allows a read and refuses an edit (reject_once, a permission_denied event and
    a note in history); ``edit`` allows an edit inside the workdir, not outside it; ``full``
    allows anything, a tool kind teamctl never heard of included."""
    team = teamctl.write_team("web", [acp_member("ro", permissions="read"),
                                      acp_member("ed", permissions="edit"),
                                      acp_member("fu", permissions="full")])
    assert teamctl.run("launch", str(team)).returncode == 0
    inside = teamctl.workdir / "notes.md"
    read = teamctl.run("send", "ro", "PERMIT read /etc/hosts\nPERMIT edit " + str(inside),
                       "--wait")
    assert "permission: proceed_once\npermission: cancel" in read.stdout, read.stdout
    [message] = teamctl.json("history", "ro")["messages"]
    assert any(n.startswith("permission denied: edit " + str(inside)) for n in message["notes"])
    assert [e["tool"] for e in teamctl.log_events() if e["event"] == "permission_denied"] == [
        "edit"]
    edit = teamctl.run("send", "ed", f"PERMIT edit {inside}\nPERMIT edit /etc/passwd", "--wait")
    assert "permission: proceed_once\npermission: cancel" in edit.stdout, edit.stdout
    full = teamctl.run("send", "fu", "PERMIT teleport /etc/passwd", "--wait")
    assert "permission: proceed_once" in full.stdout


def test_ask_puts_the_request_in_the_needs_you_queue_and_the_turn_goes_on_once_approved(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """``ask``: an edit request waits in ``teamctl approvals`` (the idle watchdog stands
    still); approved --always, the agent gets allow_always and the turn ends; the approval is
    confirmed as applied."""
    launch(teamctl, "web", acp_member("qw", permissions="ask", turn_idle_timeout=2.0))
    message_id = teamctl.run("send", "qw", "PERMIT execute make test").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["tool"], row["summary"], row["runtime"]) == ("execute", "make test", "acp")
    assert teamctl.run("approve", "--always", row["id"]).returncode == 0
    assert "permission: proceed_always" in reply_to(teamctl, follow_logs, "qw", message_id)
    [settled] = teamctl.json("approvals", "--all")["approvals"]
    assert settled["confirmed_at"], "the agent read the answer"


def test_an_ignored_cancel_kills_the_agent_and_the_loaded_session_takes_the_turn(
        teamctl: Teamctl) -> None:
    member = acp_member("qw", turn_idle_timeout=1.0, interrupt_grace=0.2, backoff=[0.1, 1.0],
                        env={"FAKE_ACP_HANG_ON_TURN": "1", "FAKE_ACP_IGNORE_CANCEL": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    [pid] = teamctl.member_pids()
    done = teamctl.run("send", "qw", "are you there?", "--wait", "--timeout", "90")
    assert done.returncode == 0, done.stderr
    assert "turn 2 received: [teamctl] your previous turn on message " in done.stdout, \
        "the loaded session continues the cut turn"
    assert wait_pid_exit(pid, 10) and teamctl.member_pids() != [pid]
    actions = [e["action"] for e in teamctl.log_events() if e["event"] == "turn_stuck"]
    assert actions == ["interrupt", "kill"]


def test_an_agent_killed_mid_turn_is_restarted_and_the_turn_redelivered(
        teamctl: Teamctl) -> None:
    member = acp_member("qw", backoff=[0.1, 1.0], env={"FAKE_ACP_CRASH_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "qw", "hello", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "turn 2 received:" in done.stdout
    [message] = teamctl.json("history", "qw")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 2)
    assert _row(teamctl)["restarts"] == 1


def test_authentication_required_makes_the_member_fatal_with_the_login_named(
        teamctl: Teamctl) -> None:
    """An agent answering -32000 at session/new is not retried: the member is fatal, its
    error names the preset's login, and the daemon is up."""
    member = acp_member("qw", acp_agent="qwen", login="isolated", backoff=[0.1, 1.0],
                        env={"FAKE_ACP_AUTH_REQUIRED": "1", "OPENAI_API_KEY": "sk-fake"})
    teamctl.run("launch", str(teamctl.write_team("web", [member])))
    row = _row(teamctl)
    assert row["launch"] == "fatal", row
    assert "fake-acp is not logged in for this member: it answered 'Authentication " \
        "required': set OPENAI_API_KEY" in row["error"]
    starts = [e for e in teamctl.log_events() if e["event"] == "runtime_ready"]
    assert starts == [] and row["restarts"] == 0, "never a retry loop"
    assert teamctl.run("status").returncode == 0


def test_an_agent_that_never_answers_initialize_or_speaks_another_version_fails_its_start(
        teamctl: Teamctl) -> None:
    """Each is a typed start failure with its reason; the daemon stays up."""
    team = teamctl.write_team("web", [
        acp_member("mute", start_timeout=0.5, max_restarts=0,
                   env={"FAKE_ACP_NO_INIT": "1"}),
        acp_member("v2", max_restarts=0, env={"FAKE_ACP_PROTOCOL": "2"})])
    teamctl.run("launch", str(team))
    rows = {r["name"]: r for r in teamctl.json("status")["teams"][0]["members"]}
    assert "the agent did not answer initialize within 0.5s" in rows["mute"]["error"]
    assert "the agent speaks ACP protocol version 2; teamctl speaks 1" in rows["v2"]["error"]
    assert {r["pid"] for r in rows.values()} == {None}
    assert teamctl.run("status").returncode == 0


def test_a_flood_of_updates_and_a_malformed_line_do_not_break_the_turn(
        teamctl: Teamctl) -> None:
    """Thousands of session/update lines are activity, not memory; a malformed line and a
    non-JSON line are logged and skipped; the reply is intact."""
    assert teamctl.run("launch", str(teamctl.write_team("web", [acp_member("qw")]))
                       ).returncode == 0
    done = teamctl.run("send", "qw", "FLOOD 5000\nGARBAGE\nhi", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fake-acp (fake-small) turn 1 received: FLOOD 5000")
    events = [e["event"] for e in teamctl.log_events()]
    assert "runtime_corrupt_line" in events and "runtime_noise" in events


def test_doctor_runs_each_acp_members_own_command_and_names_its_presets_key(
        teamctl: Teamctl) -> None:
    """doctor TEAMFILE looks up an ACP member's command line (a list, or a preset's with its
    executable replaced) and says which of its preset's keys its env holds, never the key."""
    secret = "sk-DOCTOR-NEVER-SHOWS-THIS-ACP-KEY"
    team = teamctl.write_team("web", [
        acp_member("plain"),
        acp_member("qw", command=str(FAKE_ACP), acp_agent="qwen", login="isolated",
                   env={"OPENAI_API_KEY": secret}),
        acp_member("gm", command=str(FAKE_ACP), acp_agent="gemini", login="isolated")])
    done = teamctl.run("doctor", str(team), "--json")
    assert secret not in done.stdout
    rows = {r["member"]: r for r in json.loads(done.stdout)["members"]}
    assert {rows[m]["path"] for m in rows} == {str(FAKE_ACP)}
    assert rows["qw"]["credential"] == "API key"
    assert rows["qw"]["source"].startswith("the member's env OPENAI_API_KEY (qwen reads")
    assert rows["gm"]["credential"] == "none" and "GEMINI_API_KEY" in rows["gm"]["source"]
    assert rows["plain"]["credential"] == "unknown"


def test_a_qwen_member_is_ready_only_once_it_listed_teamctls_mcp_tools(
        teamctl: Teamctl) -> None:
    """Qwen Code lists a session's MCP servers in the background and does not wait for them
    before a prompt: teamctl's ``teamctl mcp`` tells the daemon after its first tools/list,
    and the member is ready only then — so its first turn has teamctl's tools (here the fake
    agent lists them a second after session/new, as the real one can on a busy machine)."""
    member = acp_member("qw", acp_agent="qwen", login="isolated",
                        env={"OPENAI_API_KEY": "sk-fake", "FAKE_ACP_MCP_LATE": "1.0"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "qw", "TOOLS", "--wait")
    assert done.returncode == 0, done.stderr
    [tools] = [line for line in done.stdout.splitlines() if line.startswith("tools: ")]
    assert "send_message" in tools.split(": ", 1)[1].split(","), done.stdout
    [listed] = [e for e in teamctl.log_events() if e["event"] == "acp_mcp_tools_listed"]
    assert listed["member"] == "qw"


def test_an_agent_that_never_lists_its_tools_is_ready_at_the_deadline_saying_so(
        teamctl: Teamctl) -> None:
    """The wait is bounded (half the start deadline here): past it the member is ready anyway
    — its turn answered — and the log says its first turn may lack the tools."""
    member = acp_member("qw", acp_agent="qwen", login="isolated", start_timeout=2.0,
                        env={"OPENAI_API_KEY": "sk-fake", "FAKE_ACP_MCP_LATE": "3600"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "qw", "TOOLS", "--wait")
    assert done.returncode == 0, done.stderr
    assert "tools: none yet" in done.stdout
    [late] = [e for e in teamctl.log_events() if e["event"] == "acp_mcp_tools_late"]
    assert late["member"] == "qw" and late["deadline"] == 1.0


def test_hostile_tools_listed_calls_leave_the_daemon_up_and_nothing_queued_lost(
        teamctl: Teamctl) -> None:
    """``member.tools_listed`` with a forged, short, huge or mistyped token: typed errors, the
    daemon up, a queued message still answered. (The fake lists its tools at once, as the
    real one does: else the start waits out the 15 s list deadline.)"""
    member = acp_member("qw", acp_agent="qwen", login="isolated",
                        env={"OPENAI_API_KEY": "sk-fake", "FAKE_ACP_MCP_LATE": "0"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    sent = teamctl.run("send", "qw", "still here")
    assert sent.returncode == 0, sent.stderr

    def call(params: object) -> dict[str, Any]:
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "member.tools_listed",
                           "params": params}).encode() + b"\n"
        return dict(json.loads(socket_exchange(teamctl.home / "teamctl.sock", line)))

    assert call({"token": "A" * 32})["error"]["data"]["code"] == "messaging_token_unknown"
    for params in ({"token": "short"}, {"token": "A" * 100_000}, {"token": ["A" * 32]},
                   {"token": "A" * 32, "extra": 1}, {}):
        assert call(params)["error"]["data"]["code"] == "usage_error", params
    assert teamctl.run("status").returncode == 0
    done = teamctl.run("send", "qw", "and this", "--wait")
    assert done.returncode == 0, done.stderr
    states = [m["state"] for m in teamctl.json("history", "qw")["messages"]]
    assert states == ["answered", "answered"], states
