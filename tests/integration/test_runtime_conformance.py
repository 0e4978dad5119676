"""What every runtime adapter promises, the same check run on each of the four (claude, codex on
its app-server, opencode, acp) through a real daemon and the adapter's fake CLI (fixtures/bin/):
ready once its handshake is done, a turn answered, an image that arrives byte for byte as
planned, a stuck turn interrupted and then continued, a stopped member's late probe answered
once it goes on, an exit mid-turn restarted with the turn continued, no login refused at launch
with its fix; and, of the three that speak lines on stdio, a corrupt line skipped and a line past
the bound a protocol error. What only one runtime does stays in its own module
(test_codex_member.py, test_codex_app_server.py, test_opencode_member.py, test_acp_member.py;
the host contract: tests/unit/test_hosts.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.support import images
from tests.support.daemon import stopped
from tests.support.members import acp_member, codex_member, fake_member, opencode_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.driver import LogFollower, Teamctl

# each runtime: its member on its fake, and the prefix of the fake's switches (FAKE_X_...)
RUNTIMES: dict[str, tuple[Callable[..., dict[str, Any]], str]] = {
    "claude": (fake_member, "FAKE_CLAUDE"),
    "codex": (codex_member, "FAKE_CODEX"),
    "opencode": (opencode_member, "FAKE_OPENCODE"),
    "acp": (acp_member, "FAKE_ACP"),
}
# what the reply of a turn that was cut and delivered again starts its text with
CONTINUED = "received: [teamctl] your previous turn on message "

every_runtime = pytest.mark.parametrize("runtime", list(RUNTIMES))


def _launch(teamctl: Teamctl, runtime: str, *, switches: dict[str, str] | None = None,
            **extra: Any) -> dict[str, Any]:
    """The one member ``m`` of ``runtime`` launched on its fake (``switches``: the fake's
    environment variables, named without their prefix); its ``status`` row."""
    build, prefix = RUNTIMES[runtime]
    env = {f"{prefix}_{name}": value for name, value in (switches or {}).items()}
    member = build("m", **({"env": env} if env else {}), **extra)
    launched = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    return _row(teamctl)


def _row(teamctl: Teamctl) -> dict[str, Any]:
    [row] = teamctl.rpc("status", {"team": None})["result"]["teams"][0]["members"]
    return row  # type: ignore[no-any-return]


def _message(teamctl: Teamctl) -> dict[str, Any]:
    [message] = teamctl.json("history", "m")["messages"]
    return message  # type: ignore[no-any-return]


@every_runtime
def test_a_member_is_ready_once_its_handshake_is_done(teamctl: Teamctl, runtime: str) -> None:
    """``launch`` returns once the CLI answered its handshake: running, alive, ready, on a
    process of its own, in its first epoch."""
    row = _launch(teamctl, runtime)
    assert (row["launch"], row["liveness"], row["readiness"]) == ("running", "alive", "ready")
    assert (row["epoch"], row["restarts"]) == (1, 0)
    assert row["pid"] and teamctl.member_pids() == [row["pid"]]


@every_runtime
def test_a_turn_is_answered_with_what_it_was_sent(teamctl: Teamctl, runtime: str) -> None:
    """The message reaches the CLI as sent and its reply is the answer, on the first attempt."""
    _launch(teamctl, runtime)
    done = teamctl.run("send", "m", "remember kiwi", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "received: remember kiwi" in done.stdout
    message = _message(teamctl)
    assert (message["state"], message["attempts"]) == ("answered", 1)


@every_runtime
def test_an_image_arrives_as_the_planned_bytes(teamctl: Teamctl, runtime: str) -> None:
    """The variant the plan names (``send --dry-run``) is what the CLI reads: its MIME type,
    its size and its sha256, whichever way the adapter carries it (a stream-json block, a
    file, a file part, a base64 block)."""
    _launch(teamctl, runtime, vision=True)
    shot = images.save(images.screenshot(800, 450), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "m", "look")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    done = teamctl.run("send", "--attach", str(shot), "m", "look", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    [got] = images.reported(done.stdout)
    assert (got["mime"], int(got["width"]), int(got["height"]), got["sha256"]) == (
        planned["mime"], planned["width"], planned["height"], planned["sha256"])


@every_runtime
def test_a_stuck_turn_is_interrupted_then_continued_on_the_same_process(
        teamctl: Teamctl, runtime: str) -> None:
    """A turn silent past ``turn_idle_timeout`` is interrupted (not killed): the message is
    delivered again on the same process, told that its previous turn was cut, and answered."""
    pid = _launch(teamctl, runtime, turn_idle_timeout=1.0, switches={"HANG_ON_TURN": "1"})["pid"]
    done = teamctl.run("send", "m", "are you there?", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert CONTINUED in done.stdout, "the interrupted turn is continued, not handed again"
    message = _message(teamctl)
    assert (message["state"], message["attempts"]) == ("answered", 2)
    assert teamctl.member_pids() == [pid], "the interrupt ended the turn: no restart"
    events = teamctl.log_events()
    assert [e["action"] for e in events if e["event"] == "turn_stuck"] == ["interrupt"]
    assert [e.get("code") for e in events if e["event"] == "delivery_failed"] == ["runtime_stuck"]


@every_runtime
def test_a_stopped_members_late_probe_is_answered_once_it_goes_on(
        teamctl: Teamctl, follow_logs: LogFollower, runtime: str) -> None:
    """The liveness probe of a stopped member is late, not failed, while the deadline holds:
    continued, the member answers it and stays — same process, same epoch, no restart."""
    pid = _launch(teamctl, runtime, liveness_interval=0.3, liveness_deadline=3.0)["pid"]
    with stopped(pid):
        late = follow_logs.wait_for(lambda e: e["event"] == "member_probe_late")
        assert late["pid"] == pid
    follow_logs.wait_for(lambda e: e["event"] == "member_probe_recovered")
    row = _row(teamctl)
    assert (row["pid"], row["epoch"], row["restarts"], row["liveness"]) == (pid, 1, 0, "alive")
    assert not [e for e in teamctl.log_events() if e["event"] == "member_unresponsive"]
    done = teamctl.run("send", "m", "still there?", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert _row(teamctl)["pid"] == pid


@every_runtime
def test_an_exit_mid_turn_is_restarted_and_the_turn_continued(
        teamctl: Teamctl, runtime: str) -> None:
    """The CLI exits in the middle of its second turn: restarted once, its session found again,
    and the cut turn continued there — told it was cut, answered on the second attempt."""
    first = _launch(teamctl, runtime, backoff=[0.1, 1.0], switches={"CRASH_ON_TURN": "2"})
    one = teamctl.run("send", "m", "one", "--wait", "--timeout", "60")
    assert one.returncode == 0, one.stderr
    session = _row(teamctl)["session_id"]
    done = teamctl.run("send", "m", "two", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert CONTINUED in done.stdout, "the resumed session continues the cut turn"
    assert done.stdout.strip().endswith("(not a new request):\n\ntwo"), "the message, as a reminder"
    messages = teamctl.json("history", "m")["messages"]
    assert [(m["state"], m["attempts"]) for m in messages] == [("answered", 1), ("answered", 2)]
    after = _row(teamctl)
    assert (after["restarts"], after["session_id"]) == (1, session)
    assert after["pid"] != first["pid"]


# an isolated member with no credentials of its own: what makes each runtime need one, and the
# fix its refusal names
NO_LOGIN: dict[str, tuple[dict[str, Any], str]] = {
    "claude": ({}, "set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN"),
    "codex": ({}, "set CODEX_API_KEY in its env"),
    "opencode": ({}, "set OPENROUTER_API_KEY in its env"),  # the model's provider's key
    "acp": ({"acp_agent": "qwen"}, "set OPENAI_API_KEY in the member's env"),
}


@every_runtime
def test_a_member_with_no_login_fails_its_launch_with_the_fix_and_is_not_retried(
        teamctl: Teamctl, runtime: str) -> None:
    """Not logged in is a typed start failure, found before a first message: ``launch`` exits
    1 naming what to set, the member is fatal with no process and no restart loop, and the
    daemon stays up."""
    extra, fix = NO_LOGIN[runtime]
    member = RUNTIMES[runtime][0]("m", login="isolated", backoff=[0.1, 1.0], **extra)
    done = teamctl.run("launch", str(teamctl.write_team("web", [member])), "--timeout", "30")
    assert done.returncode == 1
    assert fix in done.stdout
    row = _row(teamctl)
    assert (row["launch"], row["pid"], row["restarts"]) == ("fatal", None, 0)
    assert fix in row["error"]
    failed = [e for e in teamctl.log_events() if e["event"] == "member_start_failed"]
    assert [e["code"] for e in failed] == ["runtime_not_logged_in"]


# The two cases below are of the runtimes that speak lines on the CLI's stdio; OpenCode's
# adapter reads an HTTP server (its own bounds: tests/integration/test_opencode_member.py).
LINES = ["claude", "codex", "acp"]
# the switch that makes each fake write one line past teamctl's bound in its first turn
HUGE = {"claude": "HUGE_LINE_ON_TURN", "codex": "HUGE_ON_TURN", "acp": "HUGE_ON_TURN"}
# the event a skipped line is logged as: Claude's stdout may carry a CLI's own noise; a JSON-RPC
# peer's line that is not JSON-RPC is corrupt
SKIPPED = {"claude": "runtime_noise", "codex": "runtime_corrupt_line",
           "acp": "runtime_corrupt_line"}


@pytest.mark.parametrize("runtime", LINES)
def test_a_corrupt_line_is_skipped_and_the_turn_answered_on_the_same_process(
        teamctl: Teamctl, runtime: str) -> None:
    """Lines that are not the protocol (not JSON, malformed) are logged and skipped: the turn
    is answered on its first attempt by the same process."""
    pid = _launch(teamctl, runtime, switches={"GARBAGE": "1"})["pid"]
    done = teamctl.run("send", "m", "hello", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "received: hello" in done.stdout
    assert teamctl.member_pids() == [pid]
    assert _message(teamctl)["attempts"] == 1
    assert SKIPPED[runtime] in [e["event"] for e in teamctl.log_events()], "the line is logged"


@pytest.mark.parametrize("runtime", LINES)
def test_a_line_past_the_bound_is_a_protocol_error_and_the_turn_continued(
        teamctl: Teamctl, runtime: str) -> None:
    """A line past the 16 MiB bound is a protocol error, never an unbounded buffer: the CLI is
    killed, restarted once, and the cut turn continued in the session found again."""
    pid = _launch(teamctl, runtime, backoff=[0.1, 1.0], switches={HUGE[runtime]: "1"})["pid"]
    done = teamctl.run("send", "m", "say a lot", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert CONTINUED in done.stdout, "the cut turn is continued, not handed again"
    [error] = [e for e in teamctl.log_events() if e["event"] == "runtime_protocol_error"]
    assert error["code"] == "protocol_line_too_long"
    assert _message(teamctl)["attempts"] == 2
    assert wait_pid_exit(pid, 10) and _row(teamctl)["restarts"] == 1
