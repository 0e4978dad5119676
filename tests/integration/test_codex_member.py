"""Codex members on the `exec` transport (one `codex exec` per turn) through the fake codex:
turns, threads that continue, images as --image files, failures typed. (The default transport,
one long-lived `codex app-server`, is tests/integration/test_codex_app_server.py.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.support import images
from tests.support.members import codex_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl


def exec_member(name: str, **extra: Any) -> dict[str, Any]:
    return codex_member(name, **{"transport": "exec", **extra})


def test_turns_continue_one_thread_and_survive_a_relaunch(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [exec_member("rev", prompt="You review code.")])
    assert teamctl.run("launch", str(team)).returncode == 0
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert (row["launch"], row["readiness"], row["session_id"]) == ("running", "ready", None)

    first = teamctl.run("send", "rev", "remember kiwi", "--wait")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("fake-codex (gpt-5.4-mini) turn 1 received: You review code.")
    thread = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    assert thread

    second = teamctl.run("send", "rev", "what word?", "--wait")
    assert second.stdout.strip() == "fake-codex (gpt-5.4-mini) turn 2 received: what word?"

    assert teamctl.run("stop", "web").returncode == 0
    assert teamctl.run("launch", str(team)).returncode == 0
    third = teamctl.run("send", "rev", "still there?", "--wait")
    assert "turn 3 received: still there?" in third.stdout
    assert teamctl.json("status")["teams"][0]["members"][0]["session_id"] == thread
    usage = [e for e in teamctl.log_events() if e["event"] == "turn_usage"]
    assert [e["thread_tokens"] for e in usage] == [120, 240, 360]
    per_turn = {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 20,
                "reasoning_output_tokens": 0,
                "cost_usd": 0.000165}  # gpt-5.4-mini: 100 in at $0.75/M + 20 out at $4.50/M
    history = teamctl.json("history", "rev")["messages"]
    assert [m["usage"] for m in history] == [per_turn] * 3, \
        "exec reports the thread's running total: the ledger charges its increase, and keeps" \
        " the thread's baseline in the journal across the relaunch"


def test_images_reach_codex_as_the_planned_files(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [exec_member("rev")])))
    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    photo = images.exif_rotated_jpeg(teamctl.workdir / "photo.jpg")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "--attach", str(photo),
                        "rev", "look")
    planned = [a["variants"][0] for a in plan["attachments"]]
    assert planned[0]["purpose"] == "codex-image-file"
    assert max(planned[0]["width"], planned[0]["height"]) <= 2048
    assert planned[0]["width"] * planned[0]["height"] <= 2_560_000
    done = teamctl.run("send", "--attach", str(shot), "--attach", str(photo), "rev", "look",
                       "--wait")
    assert done.returncode == 0, done.stderr
    got = images.reported(done.stdout)
    assert [(g["mime"], int(g["width"]), int(g["height"]), g["sha256"]) for g in got] == [
        (p["mime"], p["width"], p["height"], p["sha256"]) for p in planned]


def test_a_bad_image_never_reaches_codex(teamctl: Teamctl) -> None:
    """Codex would silently replace it by a note and exit 0: teamctl's refusal is the guard."""
    teamctl.run("launch", str(teamctl.write_team("web", [exec_member("rev")])))
    bad = images.truncated_png(teamctl.workdir / "bad.png")
    done = teamctl.run("send", "--attach", str(bad), "rev", "look")
    assert done.returncode == 3 and "attachment_corrupt_image" in done.stderr
    sessions = teamctl.home / "members" / "web" / "rev" / "runtime" / "codex-home" / "sessions"
    assert not sessions.exists(), "no codex process ran"


def test_a_model_without_vision_is_refused_before_any_process(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [exec_member("rev",
                                                                      model="gpt-oss-120b")])))
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    done = teamctl.run("send", "--attach", str(shot), "rev", "look")
    assert done.returncode == 3
    assert done.stderr.startswith("attachment_model_vision_unsupported: gpt-oss-120b")
    assert not (teamctl.home / "members" / "web" / "rev" / "runtime" / "codex-home"
                / "sessions").exists()


def test_turn_failed_is_a_failed_delivery_with_the_api_message(teamctl: Teamctl) -> None:
    member = exec_member("rev", env={"FAKE_CODEX_FAIL_ON_TURN": "1",
                                      "FAKE_CODEX_RETRY_NOTICE": "1"})
    teamctl.run("launch", str(teamctl.write_team("web", [member])))
    done = teamctl.run("send", "rev", "hello", "--wait")
    assert done.returncode == 1
    assert "turn_failed: unexpected status 401 Unauthorized: Incorrect API key" in done.stderr
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "failed" and message["error"]["retryable"] is False
    notices = [e for e in teamctl.log_events() if e["event"] == "runtime_retry_notice"]
    assert notices, "error events are notices, not the end of the turn"
    again = teamctl.run("send", "rev", "and now?", "--wait")
    assert again.returncode == 0 and "turn 2 received: and now?" in again.stdout


def test_a_turn_killed_mid_way_is_redelivered_on_the_same_thread(teamctl: Teamctl) -> None:
    member = exec_member("rev", env={"FAKE_CODEX_CRASH_ON_TURN": "2"})
    teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert teamctl.run("send", "rev", "one", "--wait").returncode == 0
    thread = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    done = teamctl.run("send", "rev", "two", "--wait")
    assert done.returncode == 0, done.stderr
    assert "turn 3 received: [teamctl] your previous turn on message " in done.stdout, \
        "the cut turn stays in the thread's history, and is continued there, not handed again"
    [_, message] = teamctl.json("history", "rev")["messages"]
    assert message["attempts"] == 2
    assert teamctl.json("status")["teams"][0]["members"][0]["session_id"] == thread


def test_an_unknown_thread_starts_a_new_one_and_says_so(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [exec_member("rev")])
    teamctl.run("launch", str(team))
    teamctl.run("send", "rev", "one", "--wait")
    old = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    teamctl.run("stop", "web")
    sessions = teamctl.home / "members" / "web" / "rev" / "runtime" / "codex-home" / "sessions"
    for rollout in sessions.rglob("*.jsonl"):
        rollout.unlink()
    teamctl.run("launch", str(team))
    done = teamctl.run("send", "rev", "two", "--wait")
    assert done.returncode == 0 and "turn 1 received: two" in done.stdout
    new = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    assert new and new != old
    lost = [e for e in teamctl.log_events() if e["event"] == "session_lost"]
    assert lost and lost[0]["lost_session"] == old


def test_missing_codex_fails_the_member_with_the_fix(teamctl: Teamctl) -> None:
    member = exec_member("rev", command="codex-not-installed-here")
    done = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert done.returncode == 1
    assert "install codex-not-installed-here or set command =" in done.stdout
    assert "TEAMCTL_CODEX_BIN" in done.stdout
