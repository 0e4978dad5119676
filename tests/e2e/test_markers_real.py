"""``[Image #N]`` markers through the real CLIs: the images reach the provider API in the order
the text names them — at the fake Anthropic API each image block right after the text that
names it, at the fake Responses API the input images in that order, the marker text kept."""

from __future__ import annotations

import base64
import hashlib
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
TEXT = "is [Image #3] wider than [Image #1]?"


def _send_three(teamctl: Teamctl, member: str) -> list[str]:
    """Three screenshots, named in the order 3, 1 (2 unnamed); the planned variants' sha256."""
    shots = [images.save(images.screenshot(300 + 50 * i, 200), teamctl.workdir / f"s{i}.png",
                         "PNG") for i in (1, 2, 3)]
    attach = [a for s in shots for a in ("--attach", str(s))]
    plan = teamctl.json("send", "--dry-run", *attach, member, TEXT)
    done = teamctl.run("send", *attach, member, TEXT, "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    return [a["variants"][0]["sha256"] for a in plan["attachments"]]


def _digest(block: dict[str, Any], key: str) -> str:
    data = block["source"]["data"] if key == "anthropic" else \
        str(block["image_url"]).partition(",")[2]
    return hashlib.sha256(base64.b64decode(data)).hexdigest()


def test_claude_gets_each_image_block_right_after_the_text_naming_it(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [
        claude_member("rev", claude_bin, anthropic)])))
    sha = _send_three(teamctl, "rev")
    [body] = [r["body"] for r in anthropic.message_requests()
              if any(isinstance(m["content"], list) and any(b.get("type") == "image"
                                                            for b in m["content"])
                     for m in r["body"]["messages"])][-1:]
    user = next(m for m in reversed(body["messages"]) if m["role"] == "user"
                and any(b.get("type") == "image" for b in m["content"]))
    # the CLI adds an "[Image: source: …]" text block after each image (protocols/claude.md)
    shape = [(b["type"], b.get("text") if b["type"] == "text" else _digest(b, "anthropic"))
             for b in user["content"] if b["type"] in ("text", "image")
             and not str(b.get("text", "")).startswith(("<system-reminder>", "[Image: source:"))]
    assert shape == [("text", "is [Image #3]"), ("image", sha[2]),
                     ("text", " wider than [Image #1]"), ("image", sha[0]),
                     ("text", "?"), ("image", sha[1])]


def test_codex_gets_the_images_in_marker_order_with_the_text_kept(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [
        codex_member("rev", codex_bin, responses)])))
    sha = _send_three(teamctl, "rev")
    [body] = [r["body"] for r in responses.response_requests()
              if "input_image" in str(r["body"])][-1:]
    user = [item for item in body["input"] if item.get("role") == "user"][-1]
    parts = user["content"]
    assert [_digest(p, "responses") for p in parts if p["type"] == "input_image"] == [
        sha[2], sha[0], sha[1]]
    assert any(p.get("text") == TEXT for p in parts if p["type"] == "input_text"), parts
    # codex names them by their order (<image name=[Image #1]>): the turn maps its names onto
    # the text's, so the model's [Image #1] is known to be the text's [Image #3]
    texts = " ".join(p.get("text", "") for p in parts if p["type"] == "input_text")
    assert "[Image #1] is the text's [Image #3]; [Image #2] is the text's [Image #1]" in texts
