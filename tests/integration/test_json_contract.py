"""What the CLI prints with --json is exactly the documents of orchestrator/protocol/ (the CLI
does not import them: these tests hold it to them)."""

from __future__ import annotations

import json

from orchestrator.protocol.doctor import DoctorReport, LogEvent
from orchestrator.protocol.failures import ErrorReply, Refusal
from orchestrator.protocol.messages import DryRunPlan, HistoryDoc, SendResult
from orchestrator.protocol.teams import LaunchResult, StatusDoc
from tests.support import images
from tests.support.driver import REPO, Teamctl
from tests.support.members import fake_member


def test_every_json_output_is_its_wire_document(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [fake_member("lead"), fake_member("rev")])
    LaunchResult.model_validate(teamctl.json("launch", str(team)))
    StatusDoc.model_validate(teamctl.json("status"))
    shot = images.save(images.screenshot(800, 600), teamctl.workdir / "shot.png", "PNG")
    plan = DryRunPlan.model_validate(
        teamctl.json("send", "--dry-run", "--attach", str(shot), "lead", "look"))
    sent = SendResult.model_validate(
        teamctl.json("send", "--attach", str(shot), "lead", "look", "--wait"))
    assert sent.state == "answered"
    assert [a.sha256 for a in sent.attachments] == [plan.attachments[0].variants[0].sha256], \
        "send --wait --json reports the attachments it sent"
    queued = SendResult.model_validate(teamctl.json("send", "rev", "no wait"))
    assert queued.state is None and queued.id
    history = HistoryDoc.model_validate(teamctl.json("history", "lead"))
    assert history.messages[0].attachments == sent.attachments
    bad = teamctl.workdir / "notes.png"
    bad.write_bytes(b"\x00\x01 not an image, not text")
    refusal = Refusal.model_validate(teamctl.json("send", "--attach", str(bad), "lead",
                                                       "x"))
    assert refusal.failures[0].code == "attachment_unsupported_mime"
    error = ErrorReply.model_validate(teamctl.json("send", "nobody", "x"))
    assert error.error.code == "not_found"
    done = teamctl.run("logs", "--json")
    for line in done.stdout.splitlines():
        LogEvent.model_validate(json.loads(line))
    env = {"TEAMCTL_CLAUDE_BIN": str(REPO / "fixtures" / "bin" / "claude")}
    DoctorReport.model_validate(teamctl.json("doctor", extra_env=env))
