"""Runtime plumbing: the stderr ring, executable resolution, argv, files and environments."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import tomllib
from pathlib import Path

import anyio
import pytest

from orchestrator.contracts import ExecutableNotFound, ImagePart, LaunchSpec, TextPart, Turn
from runtimes.claude.launch import write_files as _write_files
from runtimes.claude.runtime import build_argv, build_env, user_line
from runtimes.codex._shared import build_env as codex_env
from runtimes.codex.exec import build_exec_argv
from runtimes.hosts.local.host import LocalHost
from runtimes.kit.base import BASE_ENV_NAMES, StderrRing, resolve_executable

ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio


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
                      config={"theme": "dark"}, host=LocalHost())


def test_claude_argv_member_args_first_then_protocol(tmp_path: Path) -> None:
    files = {"prompt": tmp_path / "p.md", "settings": tmp_path / "s.json"}
    argv = build_argv(_spec(tmp_path), "sid", resume=False, files=files)
    assert argv[:3] == ["/bin/claude", "--permission-mode", "acceptEdits"]
    assert argv[3:9] == ["-p", "--input-format", "stream-json", "--output-format",
                         "stream-json", "--verbose"]
    assert argv[9:11] == ["--session-id", "sid"]
    assert argv[11:13] == ["--model", "claude-x"]
    assert argv[13:17] == ["--append-system-prompt-file", str(tmp_path / "p.md"), "--settings",
                           str(tmp_path / "s.json")]
    assert argv[17:] == ["--permission-mode", "dontAsk", "--allowedTools",
                         "Read,Glob,Grep,LS,NotebookRead,TodoWrite,Write(./**),Edit(./**),"
                         "MultiEdit(./**),NotebookEdit(./**),Bash"], "the default profile: edit"
    assert build_argv(_spec(tmp_path), "sid", resume=True, files={})[9:11] == ["--resume",
                                                                              "sid"]


def test_prompt_and_settings_never_reach_the_command_line(tmp_path: Path) -> None:
    """A role prompt of any size and the member's settings go to 0600 files (``ps`` shows
    every argv to every local user; a 200 KB argument fails with E2BIG)."""
    big = "be thorough. " * 20_000
    spec = LaunchSpec(team="t", member="lead", executable="/bin/claude", model=None,
                      prompt=big, workdir=tmp_path, state_dir=tmp_path,
                      config={"apiKeyHelper": "/secret/helper"}, host=LocalHost())
    files = _write_files(spec)
    argv = build_argv(spec, "sid", resume=False, files=files)
    assert big not in " ".join(argv) and "/secret/helper" not in " ".join(argv)
    assert files["prompt"].read_text() == big
    assert json.loads(files["settings"].read_text()) == {"apiKeyHelper": "/secret/helper"}
    for path in files.values():
        assert path.stat().st_mode & 0o777 == 0o600


def test_codex_config_goes_to_its_home_not_argv(tmp_path: Path) -> None:
    spec = LaunchSpec(team="t", member="rev", executable="/bin/codex", model="gpt-5.4-mini",
                      prompt=None, workdir=tmp_path, state_dir=tmp_path, host=LocalHost(),
                      config={"model_provider": "fake", "model_providers": {"fake": {
                          "base_url": "http://127.0.0.1:1/v1", "env_key": "K"}},
                          "odd key": [1, True]})
    env = codex_env(spec)
    argv = build_exec_argv(spec, thread_id=None, images=[])
    assert "-c" not in argv and "fake" not in " ".join(argv)
    written = Path(env["CODEX_HOME"]) / "config.toml"
    assert written.stat().st_mode & 0o777 == 0o600
    assert tomllib.loads(written.read_text()) == {
        **spec.config, "sandbox_mode": "workspace-write", "approval_policy": "never"}


def test_claude_env_is_private_minimal_and_member_env_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A member inherits PATH, HOME, the locale and proxies — not the daemon's credentials,
    TEAMCTL_HOME, or whatever else the daemon's shell exported."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-daemon-shell")
    monkeypatch.setenv("TEAMCTL_HOME", "/operators/home")
    monkeypatch.setenv("SOME_TEAMMATE_VAR", "x")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    dirs = {"config": tmp_path / "c", "tmp": tmp_path / "t", "xdg": tmp_path / "x"}
    env = build_env(_spec(tmp_path), dirs)
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "c")
    assert env["TMPDIR"] == env["CLAUDE_CODE_TMPDIR"] == str(tmp_path / "t")
    assert env["XDG_RUNTIME_DIR"] == str(tmp_path / "x")
    assert env["K"] == "v"
    assert env["LC_ALL"] == "C.UTF-8" and env["HTTPS_PROXY"] == "http://proxy:3128"
    assert env["PATH"] == os.environ["PATH"]
    for name in ("ANTHROPIC_API_KEY", "TEAMCTL_HOME", "SOME_TEAMMATE_VAR"):
        assert name not in env
    # the locale is inherited whole: Python itself sets LC_CTYPE where none is (PEP 538)
    locale = {name for name in env if name.startswith("LC_")}
    assert set(env) <= BASE_ENV_NAMES | locale | {"K", "CLAUDE_CONFIG_DIR", "TMPDIR",
                                                  "CLAUDE_CODE_TMPDIR", "XDG_RUNTIME_DIR"}


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


def test_the_registry_has_one_adapter_per_row_of_the_runtime_table() -> None:
    from orchestrator.runtime_table import RUNTIMES
    from runtimes.registry import default_runtimes

    adapters = default_runtimes()
    assert list(adapters) == [r.name for r in RUNTIMES]
    for row in RUNTIMES:
        adapter = adapters[row.name]
        assert (adapter.name, adapter.env_var, adapter.default_executable) == (
            row.name, row.env_var, row.default_executable)


def test_a_runtimes_own_keys_reach_its_adapter_as_options_it_types(tmp_path: Path) -> None:
    """The per-runtime keys of a member (Codex's ``transport``, ACP's ``acp_agent``) are named
    once, in the runtime table's ``options``; the core hands them on as ``LaunchSpec.options``
    and the adapter types them — a key or value it does not know is refused, never ignored."""
    from orchestrator.config import MemberConfig
    from orchestrator.runtime_table import RUNTIMES
    from runtimes.acp.launch import AcpOptions
    from runtimes.codex.runtime import CodexOptions

    for row in RUNTIMES:
        assert set(row.options) <= set(MemberConfig.model_fields), row.name
    spec = dataclasses.replace(_spec(tmp_path), options={"transport": "exec"})
    assert CodexOptions.of(spec).transport == "exec"
    assert CodexOptions.of(_spec(tmp_path)).transport == "app-server"  # the team file's default
    assert AcpOptions.of(dataclasses.replace(spec, options={"acp_agent": "qwen"})).acp_agent \
        == "qwen"
    for wrong in ({"transport": "pipe"}, {"transport": "exec", "acp_agent": "qwen"}):
        with pytest.raises(TypeError):
            CodexOptions.of(dataclasses.replace(spec, options=wrong))
    with pytest.raises(TypeError):
        AcpOptions.of(dataclasses.replace(spec, options={"transport": "exec"}))


def test_user_line_places_each_image_right_after_the_marker_that_names_it() -> None:
    text = "compare [Image #2] with [Image #1], then tell me"
    second = ImagePart("image/png", 1, 1, "b" * 64, b"two", number=2,
                       anchor=text.index("[Image #2]") + len("[Image #2]"))
    first = ImagePart("image/png", 1, 1, "a" * 64, b"one", number=1,
                      anchor=text.index("[Image #1]") + len("[Image #1]"))
    unnamed = ImagePart("image/png", 1, 1, "c" * 64, b"three", number=3)
    content = user_line(Turn("01A", (TextPart(text), second, first, unnamed)))["message"][
        "content"]
    kinds = [block.get("text") or base64.b64decode(block["source"]["data"]).decode()
             for block in content]
    assert kinds == ["compare [Image #2]", "two", " with [Image #1]", "one", ", then tell me",
                     "three"]
    assert "".join(b["text"] for b in content if b["type"] == "text") == text


class _Unkillable:
    """A process that outlives SIGKILL (as one stuck in the kernel, D state, does): its
    signals go to a real child of the test, its ``wait`` returns only once released."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = None
        self.release = anyio.Event()

    async def wait(self) -> int | None:
        await self.release.wait()
        return self.returncode


@pytest.mark.anyio
async def test_stop_process_returns_when_the_process_outlives_sigkill() -> None:
    """The stop ladder is bounded after SIGKILL too: a process that has still not exited
    ``kill_timeout`` after it is logged and left, and stop_process returns (None) instead of
    hanging the member's task (and the daemon's shutdown) forever."""
    from runtimes.kit.base import stop_process

    child = await anyio.open_process(["sleep", "60"], start_new_session=True)
    stuck = _Unkillable(child.pid)
    returned: list[int | None] = []
    done = anyio.Event()

    async def stop() -> None:
        returned.append(await stop_process(stuck, eof_timeout=0.01, term_timeout=0.01,  # type: ignore[arg-type]
                                           kill_timeout=0.05))
        done.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop)
            with anyio.move_on_after(10):
                await done.wait()
            outcome = list(returned)
            stuck.release.set()  # a hung stop_process ends too, so the test reports
    finally:
        with anyio.fail_after(10):
            await child.wait()  # SIGKILLed by the ladder
    assert outcome == [None], "stop_process must give up on a process SIGKILL cannot end"
