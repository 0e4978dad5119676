"""Runtime plumbing: the stderr ring, executable resolution, Claude's argv and environment."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import pytest

from orchestrator.contracts import ExecutableNotFound, ImagePart, LaunchSpec, TextPart, Turn
from runtimes.base import StderrRing, resolve_executable
from runtimes.claude import build_argv, build_env, user_line

if TYPE_CHECKING:
    from pathlib import Path


def test_stderr_ring_is_bounded_and_redacted() -> None:
    ring = StderrRing(max_lines=3, max_line_chars=40)
    ring.feed(b"one\ntwo\nAuthorization: Bearer abcdefghijklmnop\n")
    ring.feed(b"partial ")
    ring.feed(b"line " + b"x" * 100 + b"\n")
    tail = ring.tail()
    assert len(tail) == 3
    assert tail[0] == "two"
    assert "abcdefghijklmnop" not in tail[1]
    assert len(tail[2]) == 40 and tail[2].startswith("partial line")


def test_resolve_executable_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMCTL_CLAUDE_BIN", raising=False)
    with pytest.raises(ExecutableNotFound) as info:
        resolve_executable("lead", "/nope/claude", env_var="TEAMCTL_CLAUDE_BIN", default="claude")
    assert "install /nope/claude or set command =" in info.value.message
    assert "TEAMCTL_CLAUDE_BIN" in info.value.message


def test_env_var_overrides_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    exe = tmp_path / "my-claude"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("TEAMCTL_CLAUDE_BIN", str(exe))
    assert resolve_executable("lead", None, env_var="TEAMCTL_CLAUDE_BIN",
                              default="claude") == str(exe)


def _spec(tmp_path: Path) -> LaunchSpec:
    return LaunchSpec(team="t", member="lead", executable="/bin/claude", model="claude-x",
                      prompt="be brief", workdir=tmp_path, state_dir=tmp_path / "state",
                      args=("--permission-mode", "acceptEdits"), env={"K": "v"},
                      config={"theme": "dark"})


def test_claude_argv_member_args_first_then_protocol(tmp_path: Path) -> None:
    argv = build_argv(_spec(tmp_path), "sid", resume=False)
    assert argv[:3] == ["/bin/claude", "--permission-mode", "acceptEdits"]
    assert argv[3:9] == ["-p", "--input-format", "stream-json", "--output-format",
                         "stream-json", "--verbose"]
    assert argv[9:11] == ["--session-id", "sid"]
    assert argv[11:13] == ["--model", "claude-x"]
    assert argv[-4:] == ["--append-system-prompt", "be brief", "--settings",
                         '{"theme":"dark"}']
    assert build_argv(_spec(tmp_path), "sid", resume=True)[9:11] == ["--resume", "sid"]


def test_claude_env_is_private_and_member_env_wins(tmp_path: Path) -> None:
    dirs = {"config": tmp_path / "c", "tmp": tmp_path / "t", "xdg": tmp_path / "x"}
    env = build_env(_spec(tmp_path), dirs)
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "c")
    assert env["TMPDIR"] == env["CLAUDE_CODE_TMPDIR"] == str(tmp_path / "t")
    assert env["XDG_RUNTIME_DIR"] == str(tmp_path / "x")
    assert env["K"] == "v"


def test_user_line_shape() -> None:
    line = user_line(Turn("01A", (TextPart("hello"),)))
    assert line == {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "hello"}]}, "parent_tool_use_id": None, "session_id": ""}


def test_user_line_puts_image_blocks_after_the_text_as_base64() -> None:
    image = ImagePart("image/png", 1, 1, "ab" * 32, b"\x89PNG-bytes")
    line = user_line(Turn("01A", (TextPart("look"), image)))
    content = line["message"]["content"]
    assert content[0] == {"type": "text", "text": "look"}
    assert content[1] == {"type": "image", "source": {
        "type": "base64", "media_type": "image/png",
        "data": base64.b64encode(b"\x89PNG-bytes").decode()}}
    assert "PNG-bytes" not in content[0]["text"]
