"""``describe_with``: a text-only member receives a labelled description of each image, made by
one side call through the describer's CLI (the fake claude here; the real one in
tests/e2e/test_described_real.py), cached by variant; a failed or hung side call refuses the
message whole; a describer that cannot see is refused at launch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.daemon.describe import INSTRUCTION
from tests.support import images
from tests.support.members import FAKE_CLAUDE, fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl


def describer(**extra: Any) -> dict[str, Any]:
    return {"runtime": "claude", "model": "claude-haiku-4-5", "command": str(FAKE_CLAUDE),
            **extra}


def _transcripts(teamctl: Teamctl) -> list[str]:
    roots = [teamctl.home.parent / "operator" / ".claude", teamctl.home / "members"]
    return sorted(str(p) for root in roots for p in root.rglob("*.jsonl"))


def test_a_text_only_member_receives_the_description_in_place_of_the_image(
        teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [
        fake_member("blind", vision=False, describe_with=describer())])))
    shot = images.save(images.screenshot(640, 400), teamctl.workdir / "shot.png", "PNG")
    text = "what does [Image #1] say?"
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "blind", text)
    [planned] = plan["attachments"]
    assert (planned["described_by"], planned["description_cached"]) == (
        "claude:claude-haiku-4-5", False)
    variant = planned["variants"][0]
    assert variant["purpose"] == "claude-inline-image", "planned for the describer"
    shown = teamctl.run("send", "--dry-run", "--attach", str(shot), "blind", text)
    assert "described by claude:claude-haiku-4-5: the member receives the description" \
        in shown.stdout
    assert not [e for e in teamctl.log_events() if e["event"] == "image_described"], \
        "a dry run makes no side call"

    done = teamctl.run("send", "--attach", str(shot), "blind", text, "--wait")
    assert done.returncode == 0, done.stderr
    label = ("[Image #1, described by claude-haiku-4-5: fake-claude (claude-haiku-4-5) "
             f"received: {INSTRUCTION}\nimage: mime=image/png width={variant['width']} "
             f"height={variant['height']} bytes={variant['bytes']} sha256={variant['sha256']} "
             "declared_mime=image/png]")
    assert done.stdout.strip() == (f"fake-claude (claude-sonnet-4-5) received: {text} | "
                                   f"{label}"), "the member got the text, and no image"
    [message] = teamctl.json("history", "blind")["messages"]
    [ref] = message["attachments"]
    assert ref["described_by"] == "claude:claude-haiku-4-5"
    assert f"sha256={variant['sha256']} " in ref["description"]
    assert len(_transcripts(teamctl)) == 1, "the side call left no session behind"

    again = teamctl.json("send", "--dry-run", "--attach", str(shot), "blind", text)
    assert again["attachments"][0]["description_cached"] is True
    assert teamctl.run("send", "--attach", str(shot), "blind", "and now?", "--wait"
                       ).returncode == 0
    described = [e for e in teamctl.log_events() if e["event"] == "image_described"]
    assert len(described) == 1, "the same variant is described once"
    assert described[0]["describer"] == "claude:claude-haiku-4-5"
    assert described[0]["sha256"] == variant["sha256"]


def test_a_failed_or_hung_side_call_refuses_the_message_whole(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [
        fake_member("blind", vision=False, describe_with=describer(
            env={"FAKE_CLAUDE_API_ERROR_ON_TURN": "1"})),
        fake_member("slow", vision=False, describe_with=describer(
            env={"FAKE_CLAUDE_TURN_DELAY": "3600"}, timeout=1.0)),
    ])))
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    failed = teamctl.run("send", "--attach", str(shot), "blind", "look")
    assert failed.returncode == 3
    assert failed.stderr.startswith("attachment_description_failed: s.png: the describer "
                                    "(claude-haiku-4-5) failed: Invalid API key"), failed.stderr
    hung = teamctl.run("send", "--json", "--attach", str(shot), "slow", "look")
    assert hung.returncode == 3
    import json

    [failure] = json.loads(hung.stdout)["failures"]
    assert failure["code"] == "attachment_description_failed"
    assert "did not answer within 1s" in failure["message"] and failure["retryable"]
    for member in ("blind", "slow"):
        assert teamctl.json("history", member)["messages"] == [], "nothing was sent"


def test_without_the_opt_in_the_refusal_stays(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("blind", vision=False)])))
    shot = images.save(images.screenshot(300, 200), teamctl.workdir / "s.png", "PNG")
    done = teamctl.run("send", "--attach", str(shot), "blind", "look")
    assert done.returncode == 3
    assert done.stderr.startswith("attachment_model_vision_unsupported:")


def test_a_describer_that_cannot_see_or_cannot_describe_is_refused_at_launch(
        teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [
        fake_member("a", vision=False, describe_with={"runtime": "codex",
                                                      "model": "gpt-oss-120b"}),
        fake_member("b", vision=False, describe_with={"runtime": "opencode",
                                                      "model": "openrouter/z-ai/glm-4.5v"}),
        fake_member("c", vision=False, describe_with={"runtime": "claude",
                                                      "model": "claude-unknown-9"}),
    ])
    done = teamctl.run("launch", str(team))
    assert done.returncode == 2, done.stderr
    assert "members[0] (a).describe_with: gpt-oss-120b (codex) cannot see images" in done.stderr
    assert "members[1] (b).describe_with: the opencode runtime cannot describe images yet" \
        in done.stderr
    assert "members[2] (c).describe_with: claude-unknown-9 (claude) is not known to see " \
        "images" in done.stderr
    assert teamctl.run("status").returncode == 4, "nothing was launched, no daemon left up"


def test_the_side_call_is_charged_to_the_member_and_a_spent_budget_stops_it(
        teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [
        fake_member("blind", vision=False, describe_with=describer(), budget_usd=0.015)])))
    shots = [images.save(images.screenshot(300 + i, 200), teamctl.workdir / f"s{i}.png", "PNG")
             for i in (1, 2)]
    first = teamctl.json("send", "--attach", str(shots[0]), "blind", "look")
    rows = teamctl.json("usage", "--by", "model")["rows"]
    haiku = [r for r in rows if r["group"] == "claude-haiku-4-5"]
    assert haiku and haiku[0]["cost_usd"] == 0.01, rows
    refused = teamctl.run("send", "--attach", str(shots[1]), "blind", "and this?")
    assert refused.returncode == 3
    assert refused.stderr.startswith("attachment_description_failed: s2.png: budget reached"), \
        refused.stderr
    [message] = teamctl.json("history", "blind")["messages"]
    assert message["id"] == first["id"]
    described = [e for e in teamctl.log_events() if e["event"] == "image_described"]
    assert len(described) == 1, "no side call once the budget is spent"
