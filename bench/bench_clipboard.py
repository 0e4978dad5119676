"""Issue 18 figures. (1) ``send --paste``: from starting ``teamctl send --paste`` to the line
on the member's stdin (the daemon's ``delivery_sent``), a new 1920×1080 screenshot on a real X
clipboard (Xvfb + xclip) each time, against the same screenshot sent with ``--attach`` (the
clipboard read's own share, median of 20). (2) The describer's side call: the real Claude Code
CLI describing a new screenshot against a local fake Anthropic API (the ``image_described``
event's seconds, median of 10), and what it adds to ``send`` for a text-only member.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

from _harness import FAKE_CLAUDE, REPO, figure, home, median, teamctl

ROUNDS = 20
DESCRIBES = 10
CLAUDE = Path(os.environ.get("TEAMCTL_E2E_CLAUDE")
              or REPO / ".cache/e2e/claude/node_modules/.bin/claude")


def _events(env: dict[str, str], name: str) -> list[dict[str, object]]:
    path = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e.get("event") == name]


def _sent_at(env: dict[str, str], message_id: str) -> float:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for event in _events(env, "delivery_sent"):
            if event.get("message_id") == message_id:
                return datetime.fromisoformat(str(event["ts"])).timestamp()
        time.sleep(0.01)  # a benchmark polls; tests wait on events
    raise SystemExit(f"{message_id} never reached the member's stdin")


def _shot(index: int) -> bytes:
    from tests.support import images

    image = images.screenshot(1920, 1080)
    image.putpixel((index % 1900, index // 1900), (index % 256, 7, 0))  # new every round
    return images.png_bytes(image)


def paste() -> tuple[list[float], list[float], list[float]]:
    from orchestrator.client.clipboard import read_clipboard
    from tests.support.xserver import clipboard_owner, x_server

    pasted, attached, reads = [], [], []
    with home() as env, x_server() as display:
        work = Path(env["TEAMCTL_BENCH_DIR"])
        team = work / "paste.toml"
        team.write_text(f'[team]\nname = "paste"\nworkdir = "{work}"\n\n[[members]]\n'
                        f'name = "m0"\nruntime = "claude"\nmodel = "claude-sonnet-4-5"\n'
                        f'command = "{FAKE_CLAUDE}"\n')
        teamctl(env, "launch", str(team))
        env = dict(env, DISPLAY=display)
        for i in range(ROUNDS):
            data = _shot(i)
            with clipboard_owner(display, data, "image/png"):
                start = time.perf_counter()
                read_clipboard(environ=env)
                reads.append((time.perf_counter() - start) * 1000)
                began = time.time()
                message_id = teamctl(env, "send", "--paste", "m0", "[Image #1]?").strip()
                pasted.append((_sent_at(env, message_id) - began) * 1000)
            shot = work / f"shot{i}.png"
            shot.write_bytes(_shot(i + 1000))
            began = time.time()
            message_id = teamctl(env, "send", "--attach", str(shot), "m0", "[Image #1]?").strip()
            attached.append((_sent_at(env, message_id) - began) * 1000)
    return pasted, attached, reads


def describe() -> tuple[list[float], list[float], list[float]]:
    from tests.support.driver import team_toml
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.real_members import claude_member

    side: list[float] = []
    described: list[float] = []
    plain: list[float] = []
    with home() as env, FakeAnthropic() as api:
        work = Path(env["TEAMCTL_BENCH_DIR"])
        seer = claude_member("seer", CLAUDE, api)
        blind = claude_member("blind", CLAUDE, api, vision=False, describe_with={
            "runtime": "claude", "model": "claude-haiku-4-5", "command": str(CLAUDE),
            "env": seer["env"], "login": "isolated"})
        for member in (seer, blind):
            member["workdir"] = str(work)
        team = work / "describe.toml"
        team.write_text(team_toml("describe", [seer, blind]))
        teamctl(env, "launch", str(team))
        for i in range(DESCRIBES):
            for name, into in (("blind", described), ("seer", plain)):
                shot = work / f"{name}{i}.png"
                shot.write_bytes(_shot(i + 2000 + (100 if name == "seer" else 0)))
                start = time.perf_counter()
                teamctl(env, "send", "--attach", str(shot), name, "what is [Image #1]?")
                into.append((time.perf_counter() - start) * 1000)
        side = [float(e["seconds"]) * 1000 for e in _events(env, "image_described")]  # type: ignore[arg-type]
    return side, described, plain


def main() -> None:
    pasted, attached, reads = paste()
    print(f"send --paste → the member's stdin: median {median(pasted):.0f} ms "
          f"(--attach of the same size: {median(attached):.0f} ms; the clipboard read itself: "
          f"median {median(reads):.0f} ms; 1920x1080 PNG, {ROUNDS} rounds, Xvfb + xclip)")
    figure("paste_to_stdin_ms", median(pasted))
    figure("attach_to_stdin_ms", median(attached))
    figure("clipboard_read_ms", median(reads))
    if not CLAUDE.exists():
        raise SystemExit(f"the real Claude CLI is not at {CLAUDE}: run 'make e2e' first")
    side, described, plain = describe()
    print(f"describer side call (real Claude Code CLI, fake API): median {median(side):.0f} ms;"
          f" send to the text-only member {median(described):.0f} ms against "
          f"{median(plain):.0f} ms to a vision member ({DESCRIBES} new screenshots each)")
    figure("describe_side_call_ms", median(side))
    figure("send_described_ms", median(described))
    figure("send_vision_ms", median(plain))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
