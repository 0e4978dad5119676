"""What teamctl says is what the model saw (issue 26): for every runtime, and for Codex on both
detail modes, the sha256 of the image that reached the (fake) model API is the sha256 of the
variant teamctl planned — realistic retina and 4K screenshots, a tall page, a photo — with the
real pinned CLIs in between. Where a CLI changes an image anyway (Claude Code and an animated
GIF over 500 KiB), the receipt and history say so instead of "as sent".

Each test launches one team and sends the images one message each. Run with ``-s`` to see the
table of planned and API sha256 and sizes (the figures in docs/attachments.md).
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any

import pytest
from PIL import Image, ImageDraw

from tests.support import fake_anthropic, fake_chat, fake_responses, screens
from tests.support.real_members import claude_member, codex_member, opencode_member

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The test images, made once: what people really attach."""
    folder = tmp_path_factory.mktemp("shots")
    made = {
        "retina-2560x1600.png": (screens.screenshot(2560, 1600), "PNG"),
        "retina-2880x1800.png": (screens.screenshot(2880, 1800), "PNG"),
        "4k-3840x2160.png": (screens.screenshot(3840, 2160), "PNG"),
        "tall-1440x9000.png": (screens.tall_page(1440, 9000), "PNG"),
        "photo-4032x3024.jpg": (screens.photo(4032, 3024), "JPEG"),
    }
    paths = {}
    for name, (image, fmt) in made.items():
        paths[name] = folder / name
        image.save(paths[name], fmt, **({"quality": 92} if fmt == "JPEG" else {}))
    return paths


def _row(label: str, name: str, planned: dict[str, Any] | None, api: dict[str, Any] | None,
         note: str = "") -> str:
    def cell(v: dict[str, Any] | None) -> str:
        return "—" if v is None else (f"{v['sha256'][:12]} {v['mime'].removeprefix('image/')} "
                                      f"{v['width']}×{v['height']} {v['bytes']:,} B")
    return f"| {label} | {name} | {cell(planned)} | {cell(api)} | {note} |"


def _print_table(rows: list[str]) -> None:
    print("\n| runtime / model | image | planned (sha256, size) | at the API | note |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))


def _send(teamctl: Teamctl, member: str, path: Path, seen: Callable[[], list[dict[str, Any]]],
          label: str) -> str:
    """Plan, send, and compare the planned variant with what reached the API; one table row."""
    plan = teamctl.run("send", "--dry-run", "--attach", str(path), member, "what is off?",
                       "--json")
    if plan.returncode == 3:  # refused before anything is sent: nothing can differ
        failure = _refusal_code(plan.stdout)
        return _row(label, path.name, None, None, f"refused: {failure}")
    assert plan.returncode == 0, plan.stderr + plan.stdout
    [variant] = _json(plan.stdout)["attachments"][0]["variants"]
    sent = teamctl.run("send", "--attach", str(path), member, "what is off?", "--wait",
                       "--timeout", "180", "--json", timeout=240)
    assert sent.returncode == 0, sent.stderr + sent.stdout
    [ref] = _json(sent.stdout)["attachments"]
    [api] = seen()
    assert (ref["sha256"], ref["bytes"]) == (variant["sha256"], variant["bytes"]), \
        "the send receipt names the planned variant"
    assert api["sha256"] == variant["sha256"], (label, path.name, variant, api)
    assert (api["mime"], api["width"], api["height"], api["bytes"]) == (
        variant["mime"], variant["width"], variant["height"], variant["bytes"])
    assert variant["cli_transform"] is None and ref["cli_transform"] is None, \
        "the CLI passes it through, and teamctl says so"
    [history] = [m for m in teamctl.json("history", member)["messages"]
                 if m["id"] == _json(sent.stdout)["id"]]
    assert history["attachments"][0]["cli_transform"] is None
    return _row(label, path.name, variant, api)


def _json(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(text)
    return doc


def _refusal_code(stdout: str) -> str:
    [failure] = _json(stdout)["failures"]
    return str(failure["code"])


def _newest(requests: Callable[[], list[dict[str, Any]]],
            images: Callable[[dict[str, Any]], list[dict[str, Any]]]
            ) -> Callable[[], list[dict[str, Any]]]:
    return lambda: images(requests()[-1]["body"])


def test_real_claude_api_receives_the_planned_bytes(
    teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic, shots: dict[str, Path]
) -> None:
    """Claude Code re-encodes images over 500 KiB: the plan stays under them (a retina
    screenshot as JPEG quality 90, the choice recorded), so the API gets the planned bytes."""
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", [
        claude_member("rev", claude_bin, anthropic)])))
    assert launched.returncode == 0, launched.stderr + launched.stdout
    seen = _newest(anthropic.message_requests, fake_anthropic.newest_user_images)
    window = screens.screenshot(2880, 1800).convert("RGBA")
    mask = Image.new("L", window.size, 0)
    ImageDraw.Draw(mask).rounded_rectangle((0, 0, 2879, 1799), 48, fill=255)
    window.putalpha(mask)  # a macOS window capture: transparent corners
    window.save(teamctl.workdir / "window-2880x1800.png", "PNG")
    rows = [_send(teamctl, "rev", path, seen, "claude claude-sonnet-4-5")
            for path in [*shots.values(), teamctl.workdir / "window-2880x1800.png"]]
    _print_table(rows)
    assert sum("refused" in row for row in rows) == 1, "only the 9000 px page (crop it)"
    plan = teamctl.json("send", "--dry-run", "--attach", str(shots["retina-2560x1600.png"]),
                        "rev", "x")
    assert any(w.startswith("encoded_to_fit: JPEG quality 90: as PNG it is ")
               for w in plan["attachments"][0]["warnings"]), "the choice is in the plan"


def test_real_claude_reencoding_an_animated_gif_is_said_not_hidden(
    teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic
) -> None:
    """An animated GIF is passed whole (teamctl does not flatten it), and Claude Code turns one
    over 500 KiB into a JPEG: the receipt, history and the live view say "re-encoded by the
    CLI to a JPEG", never "as sent"."""
    gif = _noisy_gif(teamctl.workdir / "spinner.gif")
    assert gif.stat().st_size > 512_000
    teamctl.run("launch", str(teamctl.write_team("e2e", [
        claude_member("rev", claude_bin, anthropic)])))
    sent = teamctl.json("send", "--attach", str(gif), "rev", "does it spin?", "--wait",
                        "--timeout", "180", timeout=240)
    [ref] = sent["attachments"]
    [api] = fake_anthropic.newest_user_images(anthropic.message_requests()[-1]["body"])
    assert (ref["mime"], api["mime"]) == ("image/gif", "image/jpeg")
    assert api["bytes"] <= 512_000 and (api["width"], api["height"]) == (ref["width"],
                                                                          ref["height"])
    expected = f"re-encoded by the CLI to a JPEG of {ref['width']}×{ref['height']} under 500 KiB"
    assert ref["cli_transform"].startswith(expected)
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["attachments"][0]["cli_transform"] == ref["cli_transform"]
    _print_table([_row("claude claude-sonnet-4-5", gif.name, ref, api, ref["cli_transform"])])


def _noisy_gif(path: Path) -> Path:
    rng = random.Random(7)
    frames = [Image.frombytes("L", (420, 320), rng.randbytes(420 * 320)).convert("P")
              for _ in range(5)]
    frames[0].save(path, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return path


def test_real_codex_api_receives_the_planned_bytes_on_both_detail_modes(
    teamctl: Teamctl, codex_bin: Path, responses: FakeResponses, shots: dict[str, Path]
) -> None:
    """codex resizes over 2048 px or 2,500 patches of 32 px (detail high, gpt-5.4-mini) and
    keeps up to 6000 px / 10,000 patches (detail original, gpt-5.5): the plan fits inside, so
    the API gets the planned bytes (a 2560×1600 screenshot is 1997×1248, not 2023×1264)."""
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", [
        codex_member("mini", codex_bin, responses),
        codex_member("full", codex_bin, responses, model="gpt-5.5")])))
    assert launched.returncode == 0, launched.stderr + launched.stdout
    rows = []
    for member, model, detail in (("mini", "gpt-5.4-mini", "high"),
                                  ("full", "gpt-5.5", "original")):
        def seen(model: str = model, detail: str = detail) -> list[dict[str, Any]]:
            [request] = [r for r in responses.response_requests()
                         if r["body"]["model"] == model][-1:]
            images = fake_responses.newest_user_images(request["body"])
            assert [i["detail"] for i in images] == [detail], "the catalog's detail mode"
            return images

        rows += [_send(teamctl, member, path, seen, f"codex {model}") for path in shots.values()]
    _print_table(rows)
    assert "1997×1248" in rows[0], "the patch rule, not 2023×1264"


def test_real_opencode_api_receives_the_planned_bytes(
    teamctl: Teamctl, opencode_bin: Path, chat: FakeChat, shots: dict[str, Path]
) -> None:
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", [
        opencode_member("des", opencode_bin, chat, model="fake/vision-model", vision=True)])),
        timeout=180)
    assert launched.returncode == 0, launched.stderr + launched.stdout
    seen = _newest(chat.chat_requests, fake_chat.newest_user_images)
    _print_table([_send(teamctl, "des", path, seen, "opencode fake/vision-model")
                  for path in shots.values()])
