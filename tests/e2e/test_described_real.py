"""Described images through the real CLIs: a text-only member with ``describe_with`` names a
real Claude Code (or Codex) as its describer, both against local fake provider APIs. The
describer's one request carries the planned variant and no tools; the member's request carries
the labelled description and no image; the side call leaves no session behind."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import images
from tests.support.real_members import claude_member, codex_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


def _describer(member: dict[str, Any], model: str) -> dict[str, Any]:
    """``describe_with`` from a member table of the e2e helpers (its command and env)."""
    return {"runtime": member["runtime"], "model": model, "command": member["command"],
            "env": member["env"], "login": "isolated", "timeout": 90.0}


def test_a_real_claude_describes_for_a_text_only_claude_member(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    describer = _describer(claude_member("d", claude_bin, anthropic), "claude-haiku-4-5")
    launched = teamctl.run("launch", str(teamctl.write_team("web", [claude_member(
        "blind", claude_bin, anthropic, vision=False, describe_with=describer)])))
    assert launched.returncode == 0, launched.stderr
    shot = images.save(images.screenshot(900, 500), teamctl.workdir / "shot.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "blind",
                        "what does [Image #1] show?")
    variant = plan["attachments"][0]["variants"][0]
    done = teamctl.run("send", "--attach", str(shot), "blind", "what does [Image #1] show?",
                       "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr

    by_model: dict[str, list[dict[str, Any]]] = {}
    for request in anthropic.message_requests():
        by_model.setdefault(request["body"]["model"], []).append(request["body"])
    [asked] = [b for b in by_model["claude-haiku-4-5"]
               if any(blk.get("type") == "image" for m in b["messages"]
                      if isinstance(m["content"], list) for blk in m["content"])]
    assert not asked.get("tools"), "the side call offers the model no tools"
    seen = (f"a screenshot: image/png {variant['width']}x{variant['height']} "
            f"sha256={variant['sha256']}")
    member_bodies = json.dumps(by_model["claude-sonnet-4-5"])
    assert f"[Image #1, described by claude-haiku-4-5: {seen}]" in member_bodies
    assert '"type": "image"' not in member_bodies, "the text-only member got no image"
    describer_dir = teamctl.home / "members" / "web" / "blind" / "describer"
    assert describer_dir.is_dir()
    assert not list(describer_dir.rglob("*.jsonl")), "no session was kept"
    [event] = [e for e in teamctl.log_events() if e["event"] == "image_described"]
    assert event["seconds"] > 0 and event["tokens"] == 15


def test_a_real_codex_describes_with_an_ephemeral_exec(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses, claude_bin: Path,
        anthropic: FakeAnthropic) -> None:
    codex = codex_member("d", codex_bin, responses)
    describer = _describer(codex, "gpt-5.4-mini")
    describer["args"] = _config_args(codex["config"])
    launched = teamctl.run("launch", str(teamctl.write_team("web", [claude_member(
        "blind", claude_bin, anthropic, vision=False, describe_with=describer)])))
    assert launched.returncode == 0, launched.stderr
    shot = images.save(images.screenshot(700, 300), teamctl.workdir / "shot.png", "PNG")
    done = teamctl.run("send", "--attach", str(shot), "blind", "and [Image #1]?", "--wait",
                       "--timeout", "120")
    assert done.returncode == 0, done.stderr
    [message] = teamctl.json("history", "blind")["messages"]
    [ref] = message["attachments"]
    assert ref["described_by"] == "codex:gpt-5.4-mini"
    assert ref["description"] == (f"a screenshot: image/png {ref['width']}x{ref['height']} "
                                  f"sha256={ref['sha256']}")
    [asked] = [r for r in responses.response_requests() if "input_image" in json.dumps(r)]
    assert asked["body"]["model"] == "gpt-5.4-mini"
    codex_home = (teamctl.home / "members" / "web" / "blind" / "describer" / "runtime"
                  / "codex-home")
    assert not list(codex_home.rglob("rollout-*.jsonl")), "--ephemeral: no rollout kept"


def _config_args(config: dict[str, Any], prefix: str = "") -> list[str]:
    """A member's ``config`` table as codex ``-c key=value`` flags (values as TOML)."""
    args: list[str] = []
    for key, value in config.items():
        if isinstance(value, dict):
            args += _config_args(value, f"{prefix}{key}.")
        else:
            args += ["-c", f"{prefix}{key}={json.dumps(value)}"]
    return args
