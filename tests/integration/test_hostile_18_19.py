"""Hostile input on what issues 18 and 19 added — the ``export`` socket method, ``send`` with
markers and pasted files, a teammate's ``send_message`` with a bad marker, ``doctor --host``,
``describe_with`` — is refused typed; the daemon stays up and a message queued behind a busy
turn is answered."""

from __future__ import annotations

import json

from tests import images
from tests.conftest import Teamctl, fake_member


def test_hostile_calls_are_refused_and_nothing_queued_is_lost(teamctl: Teamctl) -> None:
    gate = teamctl.workdir / "gate"  # lead's turn stays in flight through the hostile calls
    team = teamctl.write_team("web", [fake_member("lead", env={"FAKE_CLAUDE_TURN_GATE": str(gate)}),
                                      fake_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0
    queued = teamctl.run("send", "lead", "kept through it all").stdout.strip()
    shot = images.save(images.screenshot(200, 100), teamctl.workdir / "s.png", "PNG")
    for params in ({"member": "../lead"}, {"member": ["lead"]}, {"team": "../etc"},
                   {"member": "lead", "all": True}, {"member": "lead" * 40}):
        answer = teamctl.rpc("export", params)
        assert answer["error"]["code"] == "usage_error", (params, answer)
    assert teamctl.rpc("export", {"member": "nobody"})["error"]["code"] == "not_found"
    for text in ("[Image #0]", "[Image #2]", "[Image #999999999]", "[Image #1][Image #-1]"
                 "[Image #3]"):
        answer = teamctl.rpc("send", {"member": "rev", "text": text,
                                      "attachments": [str(shot)]})
        assert answer["error"]["code"] == "attachment_refused", (text, answer)
        codes = [f["code"] for f in answer["error"]["data"]["details"]["failures"]]
        assert codes == ["attachment_marker_unknown"], (text, codes)
    staged = teamctl.home / "paste" / "x" / "clipboard.png"  # what --paste would stage
    staged.parent.mkdir(parents=True)
    staged.write_text("not an image at all")
    answer = teamctl.rpc("send", {"member": "rev", "text": "[Image #1]",
                                  "attachments": [str(staged)]})
    assert answer["error"]["code"] == "attachment_refused"
    assert teamctl.json("history", "rev")["messages"] == [], "nothing was journaled"

    gate.touch()
    args = json.dumps({"to": "rev", "text": "see [Image #4]", "attachments": [str(shot)]})
    done = teamctl.run("send", "lead", f"MCP send_message {args}", "--wait")
    assert done.returncode == 0, done.stderr
    assert "attachment_marker_unknown" in done.stdout, done.stdout
    assert teamctl.json("history", "rev")["messages"] == [], "the teammate's message was refused"

    hostile = teamctl.run("doctor", str(team), "--host", "-oProxyCommand=touch /tmp/pwned")
    assert hostile.returncode == 2
    assert "neither a [hosts.NAME] of the team file" in hostile.stderr
    assert teamctl.run("status").returncode == 0, "the daemon is up"
    states = {m["id"]: m["state"] for m in teamctl.json("history", "lead")["messages"]}
    assert states[queued] == "answered", "the queued message was not lost"


def test_hostile_describe_with_settings_are_refused_with_their_key(teamctl: Teamctl) -> None:
    for describe, key in (({"runtime": "gpt", "model": "x"}, "describe_with.runtime"),
                          ({"runtime": "claude", "model": ""}, "describe_with.model"),
                          ({"runtime": "claude", "model": "m", "timeout": -1},
                           "describe_with.timeout"),
                          ({"runtime": "claude", "model": "m", "tools": ["Bash"]},
                           "describe_with.tools")):
        team = teamctl.write_team("web", [fake_member("blind", vision=False,
                                                      describe_with=describe)])
        done = teamctl.run("launch", str(team))
        assert done.returncode == 2, (describe, done.stderr)
        assert f"members[0].{key}" in done.stderr, done.stderr
