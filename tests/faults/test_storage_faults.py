"""Storage faults: a full disk and a permission error on an artifact write (real ones: a small
tmpfs, and a daemon without CAP_DAC_OVERRIDE), artifacts corrupted on disk, a runtime session
missing on resume. Every message ends answered or failed with a typed reason."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support import images
from tests.support.driver import REPO, LogFollower, Teamctl, queue_behind_a_busy_turn
from tests.support.members import fake_member

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def small_disk(teamctl: Teamctl) -> Iterator[Path]:
    """TEAMCTL_HOME/artifacts on a 256 KiB tmpfs (root can mount; CI runs as root)."""
    artifacts = teamctl.home / "artifacts"
    artifacts.mkdir(parents=True, mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs",
                    str(artifacts)], check=True)
    try:
        yield artifacts
    finally:
        teamctl.run("stop", timeout=120)
        subprocess.run(["umount", "-l", str(artifacts)], check=True)


def test_a_full_disk_refuses_the_message_with_a_retryable_typed_error(
        teamctl: Teamctl, small_disk: Path) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    noise = images.Image.effect_noise((1400, 800), 80).convert("RGB")
    photo = images.save(noise, teamctl.workdir / "photo.png", "PNG")  # > 256 KiB either way
    done = teamctl.json("send", "--attach", str(photo), "rev", "look")
    assert done["ok"] is False
    [failure] = done["failures"]
    assert failure["code"] == "attachment_artifact_write_failed"
    assert failure["retryable"] is True
    assert "free some disk space" in failure["message"]
    assert teamctl.json("history", "rev")["messages"] == []
    small = images.save(images.screenshot(200, 100), teamctl.workdir / "s.png", "PNG")
    again = teamctl.run("send", "--attach", str(small), "rev", "small one", "--wait")
    assert again.returncode == 0, "the daemon is fine and a small image still fits"


def test_a_permission_error_on_the_store_is_typed(teamctl: Teamctl) -> None:
    """Root ignores file modes unless it lacks CAP_DAC_OVERRIDE: run the daemon without it."""
    teamctl.home.mkdir(mode=0o700)
    (teamctl.home / "artifacts").mkdir(mode=0o500)
    daemon = subprocess.Popen(
        ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
         sys.executable, "-m", "orchestrator", "daemon"],
        env=teamctl.env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    teamctl.spawned.append(daemon)
    assert daemon.stdout is not None
    assert "teamctl daemon ready" in daemon.stdout.readline()
    daemon.stdout.close()
    (teamctl.home / "artifacts").chmod(0o500)  # the daemon's start-up made it 0700 again
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    done = teamctl.json("send", "--attach", str(shot), "rev", "look")
    assert done["ok"] is False
    [failure] = done["failures"]
    assert failure["code"] == "attachment_artifact_write_failed"
    assert "Permission denied" in failure["message"]
    (teamctl.home / "artifacts").chmod(0o700)
    assert teamctl.run("send", "--attach", str(shot), "rev", "look", "--wait").returncode == 0


def test_artifacts_corrupted_beyond_rebuild_fail_the_delivery_typed(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    shot = images.save(images.screenshot(), teamctl.workdir / "s.png", "PNG")
    queued, release = queue_behind_a_busy_turn(teamctl, follow_logs, "rev", shot)
    [attachment] = queued["attachments"]
    for sha in (attachment["sha256"], attachment["original_sha256"]):
        (teamctl.home / "artifacts" / sha[:2] / sha).write_bytes(b"bit rot")
    release()
    event = follow_logs.wait_for(lambda e: e["event"] == "delivery_failed"
                                 and e.get("message_id") == queued["id"])
    assert event["code"] == "attachment_artifact_missing" and event["state"] == "failed"
    [failed] = [m for m in teamctl.json("history", "rev")["messages"] if m["id"] == queued["id"]]
    assert failed["state"] == "failed" and failed["error"]["retryable"] is False
    assert teamctl.run("send", "rev", "still working?", "--wait").returncode == 0


def test_a_claude_session_missing_on_resume_starts_fresh_and_says_so(teamctl: Teamctl) -> None:
    forgetful = fake_member("lead", env={"FAKE_CLAUDE_FORGET_SESSIONS": "1"})
    team = teamctl.write_team("web", [forgetful])
    teamctl.run("launch", str(team))
    teamctl.run("send", "lead", "first", "--wait")
    old = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    assert teamctl.run("restart", "lead").returncode == 0
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["session_id"] != old
    assert f"runtime session {old} was lost" in row["note"]
    lost = [e for e in teamctl.log_events() if e["event"] == "session_lost"]
    assert [e["lost_session"] for e in lost] == [old], "said once, never looped on"
    done = teamctl.run("send", "lead", "second", "--wait")
    assert done.returncode == 0 and done.stdout.strip().endswith("received: second")
    assert "lost" in teamctl.run("status").stdout
