"""``teamctl send --paste`` on a real X server (Xvfb) with the real xclip: the screenshot on the
clipboard arrives at the member as the planned bytes, numbered where it was given; an empty
clipboard, a text clipboard and a missing reader each give their code and send nothing."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import pytest

from tests.support import images
from tests.support.members import fake_member
from tests.support.xserver import clipboard_owner, x_server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import Teamctl

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    with x_server() as name:
        yield name


def test_a_pasted_screenshot_arrives_as_the_planned_bytes(teamctl: Teamctl,
                                                          display: str) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    png = images.png_bytes(images.screenshot(1600, 900))
    first = images.save(images.screenshot(300, 200), teamctl.workdir / "first.png", "PNG")
    env = {"DISPLAY": display}
    with clipboard_owner(display, png, "image/png"):
        plan = teamctl.json("send", "--dry-run", "--attach", str(first), "--paste", "rev",
                            "is [Image #2] the same page as [Image #1]?", extra_env=env)
        done = teamctl.run("send", "--attach", str(first), "--paste", "rev",
                           "is [Image #2] the same page as [Image #1]?", "--wait",
                           extra_env=env)
    assert done.returncode == 0, done.stderr
    assert [(a["number"], a["name"]) for a in plan["attachments"]] == [
        (1, "first.png"), (2, "clipboard.png")]
    planned = [a["variants"][0]["sha256"] for a in plan["attachments"]]
    assert plan["attachments"][1]["original"]["sha256"] == hashlib.sha256(png).hexdigest()
    assert [r["sha256"] for r in images.reported(done.stdout)] == [planned[1], planned[0]], \
        "marker order: [Image #2] first"
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["attachments"][1]["original_sha256"] == hashlib.sha256(png).hexdigest()
    assert not any((teamctl.home / "paste").iterdir()), "the staged clipboard file is removed"


def test_nothing_usable_on_the_clipboard_refuses_with_its_code(teamctl: Teamctl,
                                                               display: str) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")])))
    env = {"DISPLAY": display}
    empty = teamctl.run("send", "--paste", "rev", "look", extra_env=env)
    assert empty.returncode == 3
    assert empty.stderr.startswith("clipboard_empty: "), empty.stderr
    with clipboard_owner(display, b"just some copied text", None):
        text = teamctl.run("send", "--json", "--paste", "rev", "look", extra_env=env)
    assert text.returncode == 3
    [failure] = json.loads(text.stdout)["failures"]
    assert failure["code"] == "clipboard_no_image"
    assert "UTF8_STRING" in failure["message"]
    missing = teamctl.run("send", "--paste", "rev", "look",
                          extra_env={**env, "PATH": str(teamctl.workdir)})
    assert missing.returncode == 3
    assert missing.stderr.startswith("clipboard_reader_missing: --paste needs xclip"), \
        missing.stderr
    assert teamctl.json("history", "rev")["messages"] == [], "nothing was sent"
