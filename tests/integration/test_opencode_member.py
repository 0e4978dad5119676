"""OpenCode members through the fake `opencode serve`: sessions, file parts, the vision gate
where provider is not model, events as liveness, failures typed."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tests.support import images
from tests.support.members import opencode_member

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


def test_text_and_image_turns_on_one_session_that_survives_a_relaunch(
        teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [opencode_member("des")])
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert (row["launch"], row["liveness"], row["readiness"]) == ("running", "alive", "ready")
    session = row["session_id"]
    assert session.startswith("ses_")

    text = teamctl.run("send", "des", "hello", "--wait")
    assert text.stdout.strip() == (
        "fake-opencode (openrouter/moonshotai/kimi-k2.6) received: hello")

    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "des", "look")
    [planned] = [a["variants"][0] for a in plan["attachments"]]
    assert planned["purpose"] == "opencode-file-part"
    done = teamctl.run("send", "--attach", str(shot), "des", "look", "--wait")
    assert done.returncode == 0, done.stderr
    [got] = images.reported(done.stdout)
    assert (got["mime"], int(got["width"]), int(got["height"]), got["sha256"]) == (
        planned["mime"], planned["width"], planned["height"], planned["sha256"])

    teamctl.run("stop", "web")
    teamctl.run("launch", str(team))
    assert teamctl.json("status")["teams"][0]["members"][0]["session_id"] == session
    ready = [e for e in teamctl.log_events() if e["event"] == "runtime_ready"]
    assert [e["resumed"] for e in ready] == [False, True]
    log_text = (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    assert "data:image" not in log_text and not re.search(r"[A-Za-z0-9+/]{200,}", log_text)


def test_provider_is_not_model_glm_5_1_is_refused_before_send(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [
        opencode_member("vision", model="openrouter/z-ai/glm-4.5v"),
        opencode_member("text", model="openrouter/z-ai/glm-5.1"),
        opencode_member("new", model="openrouter/acme/brand-new"),
    ])))
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    ok = teamctl.run("send", "--attach", str(shot), "vision", "look", "--wait")
    assert ok.returncode == 0 and images.reported(ok.stdout)[0]["mime"] == "image/png"
    refused = teamctl.run("send", "--attach", str(shot), "text", "look")
    assert refused.returncode == 3
    assert refused.stderr.startswith(
        "attachment_model_vision_unsupported: openrouter/z-ai/glm-5.1")
    unknown = teamctl.run("send", "--attach", str(shot), "new", "look")
    assert unknown.returncode == 3
    assert "attachment_model_vision_unknown" in unknown.stderr
    assert "vision = true on member 'new'" in unknown.stderr
    assert teamctl.json("history", "text")["messages"] == []


def test_the_generated_config_makes_opencode_agree_with_the_catalog(teamctl: Teamctl) -> None:
    """The operator says this custom model sees images: teamctl writes modalities.input with
    "image" into OpenCode's config, so OpenCode does not replace the image by an ERROR text."""
    teamctl.run("launch", str(teamctl.write_team("web", [
        opencode_member("des", model="local/my-vlm", vision=True),
    ])))
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    done = teamctl.run("send", "--attach", str(shot), "des", "look", "--wait")
    assert done.returncode == 0
    assert "ERROR: Cannot read" not in done.stdout
    assert images.reported(done.stdout)[0]["sha256"]


def test_api_error_is_a_failed_delivery_and_retries_are_activity(
        teamctl: Teamctl) -> None:
    member = opencode_member("des", env={"FAKE_OPENCODE_API_ERROR_ON_TURN": "1",
                                         "FAKE_OPENCODE_RETRY_ON_TURN": "2"})
    teamctl.run("launch", str(teamctl.write_team("web", [member])))
    failed = teamctl.run("send", "des", "hello", "--wait")
    assert failed.returncode == 1
    assert failed.stderr.strip() == "turn_failed: Incorrect API key provided (fake)"
    retried = teamctl.run("send", "des", "again", "--wait")
    assert retried.returncode == 0 and "received: again" in retried.stdout
    notices = [e for e in teamctl.log_events() if e["event"] == "runtime_retry_notice"]
    assert notices and notices[0]["attempt"] == 1
    states = [m["state"] for m in teamctl.json("history", "des")["messages"]]
    assert states == ["failed", "answered"]


def test_a_server_killed_mid_turn_is_restarted_and_the_turn_redelivered(
        teamctl: Teamctl) -> None:
    member = opencode_member("des", backoff=[0.1, 1.0], env={"FAKE_OPENCODE_CRASH_ON_TURN": "1"})
    teamctl.run("launch", str(teamctl.write_team("web", [member])))
    session = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    done = teamctl.run("send", "des", "hello", "--wait")
    assert done.returncode == 0, done.stderr
    assert "received: [teamctl] your previous turn on message " in done.stdout, \
        "the session found again continues the cut turn, not handed it again"
    [message] = teamctl.json("history", "des")["messages"]
    assert message["attempts"] == 2
    assert teamctl.json("status")["teams"][0]["members"][0]["session_id"] == session


def test_missing_heartbeats_make_the_member_not_alive_then_restarted(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    member = opencode_member("des", backoff=[0.1, 1.0], env={
        "FAKE_OPENCODE_HEARTBEAT": "0.3", "FAKE_OPENCODE_MUTE_AFTER": "1"})
    done = teamctl.run("launch", str(teamctl.write_team("web", [member])),
                       extra_env={"TEAMCTL_OPENCODE_HEARTBEAT_GRACE": "1.5"})
    assert done.returncode == 0, done.stdout
    first_pid = teamctl.json("status")["teams"][0]["members"][0]["pid"]
    follow_logs.wait_for(lambda e: e["event"] == "runtime_unhealthy")
    follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e["pid"] != first_pid)
    exited = [e for e in follow_logs.seen if e["event"] == "member_exited"]
    assert exited and exited[0]["exit"] == -9


def test_retry_events_show_as_activity_in_status(teamctl: Teamctl,
                                                 follow_logs: LogFollower) -> None:
    gate = teamctl.workdir / "gate"  # the turn answers once the test has read the status
    member = opencode_member("des", env={"FAKE_OPENCODE_RETRY_ON_TURN": "1",
                                         "FAKE_OPENCODE_TURN_GATE": str(gate)})
    teamctl.run("launch", str(teamctl.write_team("web", [member])))
    message_id = teamctl.run("send", "des", "hello").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "runtime_retry_notice")
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert (row["readiness"], row["activity"]) == ("busy", "retrying (attempt 1)")
    assert "des: retrying (attempt 1)" in teamctl.run("status").stdout
    gate.touch()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id)
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["activity"] is None and row["readiness"] == "ready"


def test_each_steps_tokens_and_cost_are_the_turns_usage_and_a_budget_holds_the_next(
        teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [opencode_member("des", budget_usd=0.003)])
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "des", "one", "--wait").returncode == 0
    [message] = teamctl.json("history", "des")["messages"]
    assert message["usage"] == {
        "input_tokens": 1400, "cached_input_tokens": 400, "output_tokens": 210,
        "reasoning_output_tokens": 10, "cost_usd": 0.002}, \
        "OpenCode's step-finish: input + cache reads, output + reasoning, its own cost"
    assert teamctl.run("send", "des", "two", "--wait").returncode == 0  # $0.004 ≥ $0.003
    held = teamctl.run("send", "des", "three", "--wait")
    assert held.returncode == 1 and "member_held" not in held.stdout
    assert "is paused (budget reached: member 'des' spent $0.0040 of $0.0030" in held.stderr
    assert teamctl.json("history", "des")["messages"][-1]["state"] == "queued"
