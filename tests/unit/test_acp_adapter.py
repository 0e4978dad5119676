"""The ACP adapter against the fake ACP agent (fixtures/bin/fake-acp), without a daemon: the
team file's command line and presets, the profile's answers to permission requests, the login
preflight, the model chosen over ACP, usage into the meter, the liveness probe, and teamctl's
MCP server given at session/new."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.config import TeamConfig, load_team_file
from orchestrator.contracts import (
    ApprovalRequest,
    LaunchSpec,
    McpServer,
    TextPart,
    TokenUsage,
    Turn,
    UsageReading,
)
from orchestrator.daemon.approvals._rules import kept_rule, target_of
from orchestrator.errors import RuntimeNotLoggedIn, TeamFileError
from runtimes.acp.launch import allowed, build_env, check_login, choose_option, mcp_servers
from runtimes.acp.runtime import AcpRuntime
from runtimes.hosts.local.host import LocalHost
from tests.support.driver import REPO

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = pytest.mark.anyio
FAKE_ACP = REPO / "fixtures" / "bin" / "fake-acp"


def _team(tmp_path: Path, member: str) -> TeamConfig:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "t"\n\n[[members]]\nname = "a"\n{member}\n')
    return load_team_file(path)


def test_command_is_a_whole_command_line_and_a_preset_fills_it(tmp_path: Path) -> None:
    """A list ``command`` is the executable and its first arguments; ``acp_agent`` gives the
    preset's line, whose executable a string ``command`` replaces; ``args`` come last; a config
    dumped and validated again (CLI → daemon, the journal) keeps the same line."""
    listed = _team(tmp_path, 'runtime = "acp"\ncommand = ["/opt/a", "--acp"]\nargs = ["-v"]')
    assert listed.members[0].command_line() == ("/opt/a", ("--acp", "-v"))
    preset = _team(tmp_path, 'runtime = "acp"\nacp_agent = "qwen"\nargs = ["-d"]')
    assert preset.members[0].command_line() == (
        "qwen", ("--acp", "--auth-type", "openai", "-d"))
    moved = _team(tmp_path, 'runtime = "acp"\nacp_agent = "gemini"\ncommand = "/x/gemini"')
    assert moved.members[0].command_line() == ("/x/gemini", ("--acp", "--skip-trust"))
    again = TeamConfig.model_validate(preset.model_dump(mode="json"))
    assert again.members[0].command_line() == preset.members[0].command_line()
    plain = _team(tmp_path, 'runtime = "claude"\ncommand = "/bin/claude"\nargs = ["-x"]')
    assert plain.members[0].command_line() == ("/bin/claude", ("-x",))


@pytest.mark.parametrize(("member", "expected"), [
    ('runtime = "acp"', "set acp_agent"),
    ('runtime = "claude"\nacp_agent = "qwen"', "takes no agent preset"),
    ('runtime = "acp"\nacp_agent = "nobody"', "acp_agent"),
    ('runtime = "acp"\ncommand = []', "command"),
])
def test_an_acp_member_without_an_agent_or_a_preset_elsewhere_is_refused(
        tmp_path: Path, member: str, expected: str) -> None:
    with pytest.raises(TeamFileError, match=expected):
        _team(tmp_path, member)


def _spec(tmp_path: Path, agent: str | None = None, **fields: object) -> LaunchSpec:
    """A member's launch; ``agent``: its ACP preset (the ``acp_agent`` of its options)."""
    (tmp_path / "state").mkdir(exist_ok=True)
    base: dict[str, object] = {"team": "t", "member": "m", "executable": str(FAKE_ACP),
                               "model": None, "prompt": None, "workdir": tmp_path,
                               "state_dir": tmp_path / "state", "login": "isolated",
                               "start_timeout": 20.0, "host": LocalHost()}
    options = {} if agent is None else {"acp_agent": agent}
    return LaunchSpec(**(base | {"options": options} | fields))  # type: ignore[arg-type]


def test_each_profile_answers_a_tool_kind_as_documented(tmp_path: Path) -> None:
    """read: reading tools only; edit: those, commands, and edits inside the workdir; full:
    all, a kind never heard of included; ask: the reads, the rest to the operator."""
    inside, outside = str(tmp_path / "a.py"), "/etc/passwd"
    table = {(p, k, path): allowed(_spec(tmp_path, permissions=p), k, [path] if path else [])
             for p in ("read", "edit", "full", "ask")
             for k, path in (("read", outside), ("edit", inside), ("edit", outside),
                             ("edit", ""), ("execute", ""), ("teleport", ""))}
    assert [table["read", k, p] for k, p in (("read", outside), ("edit", inside),
                                             ("execute", ""))] == [True, False, False]
    assert [table["edit", k, p] for k, p in (("edit", inside), ("edit", outside), ("edit", ""),
                                             ("execute", ""), ("teleport", ""))] == [
        True, False, False, True, False]
    assert {table["full", k, p] for (prof, k, p) in table if prof == "full"} == {True}
    assert [table["ask", k, p] for k, p in (("read", outside), ("edit", inside),
                                            ("teleport", ""))] == [True, None, None]


def test_the_option_chosen_is_the_kind_wanted_else_its_other_duration() -> None:
    options = [{"optionId": "y", "kind": "allow_once"}, {"optionId": "Y", "kind": "allow_always"},
               {"optionId": "n", "kind": "reject_once"}]
    assert [choose_option(options, True), choose_option(options, True, True),
            choose_option(options, False), choose_option(options, False, True)] == [
        "y", "Y", "n", "n"]
    assert choose_option([{"optionId": "z", "kind": "reject_always"}], True) is None
    assert choose_option("garbage", True) is None


def test_approve_always_of_an_acp_command_keeps_its_exact_argv(tmp_path: Path) -> None:
    """ACP's ``execute`` kind is a command tool: --always keeps the exact argv, and a command
    with a shell operator keeps no rule."""
    request = ApprovalRequest("permission", "execute", "make test")
    kept = kept_rule(request, target_of(request, str(tmp_path)), "m")
    assert str(kept.rule) == "execute(make test)"


def test_an_isolated_preset_member_needs_one_of_its_keys(tmp_path: Path) -> None:
    with pytest.raises(RuntimeNotLoggedIn, match="set GEMINI_API_KEY or GOOGLE_API_KEY"):
        check_login(_spec(tmp_path, agent="gemini"))
    check_login(_spec(tmp_path, agent="gemini", env={"GOOGLE_API_KEY": "k"}))
    check_login(_spec(tmp_path, agent="gemini", login="operator"))
    check_login(_spec(tmp_path))  # no preset: the agent says so at session/new


def test_the_environment_has_a_private_home_and_the_presets_model_variable(
        tmp_path: Path) -> None:
    env = build_env(_spec(tmp_path, agent="qwen", model="qwen3-coder",
                          env={"OPENAI_API_KEY": "k"}))
    assert env["HOME"] == str(tmp_path / "state" / "runtime" / "home")
    assert (env["OPENAI_MODEL"], env["OPENAI_API_KEY"]) == ("qwen3-coder", "k")
    operator = build_env(_spec(tmp_path, login="operator"))
    assert operator.get("HOME") != str(tmp_path / "state" / "runtime" / "home"), \
        "the operator's own HOME"


def test_a_preset_keeps_its_agent_in_one_process_unless_the_members_env_says_otherwise(
        tmp_path: Path) -> None:
    """Qwen Code and Gemini CLI start themselves again as a child on the same stdio unless
    told not to: the presets tell them; the member's env still decides."""
    gemini = build_env(_spec(tmp_path, agent="gemini", env={"GEMINI_API_KEY": "k"}))
    qwen = build_env(_spec(tmp_path, agent="qwen", env={"QWEN_CODE_NO_RELAUNCH": ""}))
    assert (gemini["GEMINI_CLI_NO_RELAUNCH"], qwen["QWEN_CODE_NO_RELAUNCH"]) == ("true", "")
    assert "GEMINI_CLI_NO_RELAUNCH" not in build_env(_spec(tmp_path))


def test_qwen_is_given_teamctls_tools_visible_from_the_first_turn_in_a_private_file(
        tmp_path: Path) -> None:
    """Qwen Code hides MCP tools behind its tool-search bridge: the preset names teamctl's
    tools visible in a 0600 settings-defaults file (no token in it) and discovers them before
    session/new answers; no MCP server, no file; Gemini CLI declares them by itself."""
    mcp = McpServer(("teamctl", "mcp"), {"TEAMCTL_MEMBER_TOKEN": "s" * 32})
    env = build_env(_spec(tmp_path, agent="qwen", env={"OPENAI_API_KEY": "k"}, mcp=mcp))
    defaults = Path(env["QWEN_CODE_SYSTEM_DEFAULTS_PATH"])
    assert defaults.parent == tmp_path / "state" and defaults.stat().st_mode & 0o777 == 0o600
    visible = json.loads(defaults.read_text())["tools"]["visible"]
    assert visible == [f"mcp__teamctl__{t}" for t in McpServer.TOOLS]
    assert "s" * 32 not in defaults.read_text()
    assert env["QWEN_CODE_LEGACY_MCP_BLOCKING"] == "1"
    assert "QWEN_CODE_SYSTEM_DEFAULTS_PATH" not in build_env(_spec(tmp_path, agent="qwen"))
    gemini = build_env(_spec(tmp_path, agent="gemini", mcp=mcp))
    assert not any(k.endswith("DEFAULTS_PATH") for k in gemini)


class _Meter:
    def __init__(self) -> None:
        self.readings: list[UsageReading] = []

    def reading(self, message_id: str, reading: UsageReading) -> bool:
        self.readings.append(reading)
        return False

    def rate_limited(self, until: float | None, message: str) -> None:
        raise AssertionError(message)

    def counted(self, counter: str) -> float:
        return 0.0

    def on_stop(self, message_id: str, stop: Callable[[], None]) -> None:
        pass


async def _one_turn(spec: LaunchSpec, text: str = "hi") -> tuple[str, Any]:
    async def sent() -> None:
        pass

    async with AcpRuntime().open(spec) as agent:
        assert await agent.probe(5.0), "an error answer to _teamctl/ping is an answer"
        result = await agent.run_turn(Turn("msg_1", (TextPart(text),)), on_sent=sent)
    return result.reply, agent


async def test_the_model_is_chosen_with_set_model_and_usage_reaches_the_meter(
        tmp_path: Path) -> None:
    """A model the agent advertises is set with session/set_model; the chunks' _meta.usage
    is the turn's own usage (estimate, then final)."""
    meter = _Meter()
    reply, _ = await _one_turn(_spec(tmp_path, model="fake-large", meter=meter))
    assert reply.startswith("fake-acp (fake-large) turn 1 received: hi")
    turn = TokenUsage(input_tokens=100, cached_input_tokens=10, output_tokens=20)
    assert [(r.tokens, r.estimate, r.counter) for r in meter.readings] == [
        (turn, True, None), (turn, False, None)]


async def test_a_session_cost_from_usage_update_is_a_running_total(tmp_path: Path) -> None:
    meter = _Meter()
    await _one_turn(_spec(tmp_path, meter=meter, env={"FAKE_ACP_USAGE": "update"}))
    [final] = meter.readings
    assert (final.cost_usd, final.turn_tokens) == (0.25, True)
    assert final.counter is not None and final.counter.startswith("acp-session:")


async def test_teamctls_mcp_server_is_given_at_session_new_with_its_token_in_env(
        tmp_path: Path) -> None:
    """The server goes as an ACP stdio server; its token only in that server's env."""
    log = tmp_path / "received.jsonl"
    mcp = McpServer(("/usr/bin/python3", "-m", "orchestrator", "mcp"),
                    {"TEAMCTL_MEMBER_TOKEN": "tok-123"})
    spec = _spec(tmp_path, mcp=mcp, env={"FAKE_ACP_LOG": str(log)})
    await _one_turn(spec)
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    [new] = [m for m in sent if m.get("method") == "session/new"]
    assert new["params"]["mcpServers"] == mcp_servers(spec) == [{
        "name": "teamctl", "command": "/usr/bin/python3", "args": ["-m", "orchestrator", "mcp"],
        "env": [{"name": "TEAMCTL_MEMBER_TOKEN", "value": "tok-123"}]}]
    [init] = [m for m in sent if m.get("method") == "initialize"]
    assert init["params"]["protocolVersion"] == 1
    assert init["params"]["clientCapabilities"]["fs"] == {"readTextFile": False,
                                                          "writeTextFile": False}
    assert "tok-123" not in " ".join(str(m) for m in sent if m.get("method") != "session/new")
