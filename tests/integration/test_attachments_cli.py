"""``teamctl send --attach``: planned, delivered intact to the fake claude, or refused whole."""

from __future__ import annotations

import hashlib
import re

from tests.support import images
from tests.support.driver import REPO, LogFollower, Teamctl, queue_behind_a_busy_turn
from tests.support.members import fake_member


def test_dry_run_plan_matches_what_the_runtime_receives(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    shot = images.save(images.screenshot(), teamctl.workdir / "shot.png", "PNG")
    alpha = images.transparent_png(teamctl.workdir / "alpha.png")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "--attach", str(alpha),
                        "rev", "why is this button misaligned?")
    assert plan["ok"] is True
    variants = [a["variants"][0] for a in plan["attachments"]]
    assert [a["name"] for a in plan["attachments"]] == ["shot.png", "alpha.png"]
    assert variants[0]["purpose"] == "claude-inline-image"
    assert teamctl.json("history", "rev")["messages"] == [], "a dry run journals nothing"

    done = teamctl.run("send", "--attach", str(shot), "--attach", str(alpha), "rev",
                       "why is this button misaligned?", "--wait")
    assert done.returncode == 0, done.stderr
    received = images.reported(done.stdout)
    assert [(r["mime"], int(r["width"]), int(r["height"]), int(r["bytes"]), r["sha256"])
            for r in received] == [(v["mime"], v["width"], v["height"], v["bytes"], v["sha256"])
                                   for v in variants]
    [message] = teamctl.json("history", "rev")["messages"]
    assert [a["sha256"] for a in message["attachments"]] == [v["sha256"] for v in variants]
    assert message["attachments"][0]["original_sha256"] == hashlib.sha256(
        shot.read_bytes()).hexdigest()


def test_one_bad_attachment_refuses_the_whole_message(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    good = images.save(images.screenshot(300, 200), teamctl.workdir / "good.png", "PNG")
    bad = teamctl.workdir / "notes.png"
    bad.write_bytes(b"\x00\x01 binary named .png")
    done = teamctl.run("send", "--attach", str(good), "--attach", str(bad), "rev", "look")
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "attachment_unsupported_mime: notes.png: is not an image, a PDF or UTF-8 text (its "
        "bytes match no known format); teamctl sends PNG, JPEG, GIF and WebP (BMP/TIFF are "
        "converted), PDFs and text: export it as one of those"]
    assert teamctl.json("history", "rev")["messages"] == []
    assert not [e for e in teamctl.log_events() if e["event"] == "message_queued"]
    refused = [e for e in teamctl.log_events() if e["event"] == "attachments_refused"]
    assert refused[0]["codes"] == ["attachment_unsupported_mime"]


def test_a_text_file_named_png_was_sent_as_text_without_a_word(teamctl: Teamctl) -> None:
    """README and the demo said a text file named .png is refused (exit 3); it was sent as
    ``[Doc #1] notes.png — text`` with no warning. It is sent as what its bytes are, and the
    dry-run, the send's receipt and history say so: ``notes.png holds text: sent as text``."""
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    notes = REPO / "fixtures" / "images" / "notes.png"
    warning = "warning: notes.png holds text: sent as text"
    plan = teamctl.run("send", "--dry-run", "--attach", str(notes), "rev", "read [Doc #1]")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines()[0].startswith("[Doc #1] notes.png — native:")
    assert f"  {warning}" in plan.stdout.splitlines()
    sent = teamctl.run("send", "--attach", str(notes), "rev", "read [Doc #1]", "--wait")
    assert sent.returncode == 0, sent.stderr
    assert sent.stderr.splitlines() == [warning], "the receipt says it"
    sha256 = hashlib.sha256(notes.read_bytes()).hexdigest()
    assert f"document: mime=text/plain bytes=28 sha256={sha256}" in sent.stdout, \
        "the text itself reached the runtime"
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["attachments"][0]["name_warning"] == "notes.png holds text: sent as text"
    assert message["attachments"][0]["kind"] == "text"
    shown = teamctl.run("history", "rev").stdout
    assert "[Doc #1] notes.png — native: text/plain 28 bytes sha256=" in shown
    assert shown.count(warning) == 1


def test_refusal_json_document(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [
        fake_member("rev", model="openrouter-ish/unknown-model")])))
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    done = teamctl.run("send", "--json", "--attach", str(shot), "--attach",
                       str(teamctl.workdir), "rev", "look")
    assert done.returncode == 3
    import json

    doc = json.loads(done.stdout)
    assert doc["ok"] is False
    codes = [(f["code"], f["attachment"], f["member"], f["retryable"]) for f in doc["failures"]]
    assert codes == [
        ("attachment_model_vision_unknown", None, "rev", False),
        ("attachment_not_a_regular_file", "work", "rev", False),
    ]
    assert "vision = true" in doc["failures"][0]["message"]


def test_operator_vision_override(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [
        fake_member("blind", model="claude-sonnet-4-5", vision=False),
        fake_member("seer", model="claude-next-preview", vision=True),
    ])
    teamctl.run("launch", str(team))
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    blind = teamctl.run("send", "--attach", str(shot), "blind", "look")
    assert blind.returncode == 3
    assert blind.stderr.startswith("attachment_model_vision_unsupported: ")
    assert "source: operator" in blind.stderr
    seer = teamctl.run("send", "--attach", str(shot), "seer", "look", "--wait")
    assert seer.returncode == 0 and images.reported(seer.stdout)[0]["mime"] == "image/png"


def test_fifo_attachment_never_blocks(teamctl: Teamctl) -> None:
    import os

    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    fifo = teamctl.workdir / "pipe.png"
    os.mkfifo(fifo)
    done = teamctl.run("send", "--attach", str(fifo), "rev", "look", timeout=30)
    assert done.returncode == 3 and "attachment_not_a_regular_file" in done.stderr


def test_a_deleted_variant_is_rebuilt_before_delivery(teamctl: Teamctl,
                                                      follow_logs: LogFollower) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    shot = images.save(images.screenshot(), teamctl.workdir / "s.png", "PNG")
    queued, release = queue_behind_a_busy_turn(teamctl, follow_logs, "rev", shot)
    sha = queued["attachments"][0]["sha256"]
    artifact = teamctl.home / "artifacts" / sha[:2] / sha
    artifact.unlink()
    release()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == queued["id"])
    [answered] = [m for m in teamctl.json("history", "rev")["messages"]
                  if m["id"] == queued["id"]]
    assert images.reported(answered["reply"])[0]["sha256"] == sha
    assert hashlib.sha256(artifact.read_bytes()).hexdigest() == sha


def test_no_base64_reaches_the_logs(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    shot = images.save(images.screenshot(800, 600), teamctl.workdir / "s.png", "PNG")
    assert teamctl.run("send", "--attach", str(shot), "rev", "look", "--wait").returncode == 0
    text = (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    assert not re.search(r"[A-Za-z0-9+/]{200,}", text)
    assert "data:image" not in text
    planned = [e for e in teamctl.log_events() if e["event"] == "attachments_planned"]
    assert planned[0]["variants"][0]["mime"] == "image/png"


def test_images_reach_the_runtime_in_marker_order_and_unknown_markers_refuse(
        teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    shots = [images.save(images.screenshot(200 + 10 * i, 100), teamctl.workdir / f"s{i}.png",
                         "PNG") for i in (1, 2, 3)]
    attach = [arg for shot in shots for arg in ("--attach", str(shot))]
    text = "is [Image #3] wider than [Image #1]?"
    plan = teamctl.json("send", "--dry-run", *attach, "rev", text)
    assert [a["number"] for a in plan["attachments"]] == [1, 2, 3]
    sha = [a["variants"][0]["sha256"] for a in plan["attachments"]]
    done = teamctl.run("send", *attach, "rev", text, "--wait")
    assert done.returncode == 0, done.stderr
    assert [r["sha256"] for r in images.reported(done.stdout)] == [sha[2], sha[0], sha[1]]
    [message] = teamctl.json("history", "rev")["messages"]
    assert [(a["number"], a["sha256"]) for a in message["attachments"]] == [
        (1, sha[0]), (2, sha[1]), (3, sha[2])]

    for bad in ("[Image #0]", "[Image #99]"):
        refused = teamctl.run("send", *attach, "rev", f"look at {bad}")
        assert refused.returncode == 3
        assert refused.stderr.startswith(f"attachment_marker_unknown: the text names {bad}, "
                                         "but the message has 3 attachments"), refused.stderr
    plain = teamctl.run("send", "rev", "the log line says [Image #99]", "--wait")
    assert plain.returncode == 0, plain.stderr
    assert len(teamctl.json("history", "rev")["messages"]) == 2, "refusals journal nothing"
