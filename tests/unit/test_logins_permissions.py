"""Logins and permission profiles as each runtime is started with them: the operator's own
login reached without a copy, an isolated member kept apart, each profile's flags or config,
and the preflight's typed errors with the fix."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from orchestrator.config import TeamConfig
from orchestrator.contracts import LaunchSpec, RuntimeNotLoggedIn
from runtimes.claude import runtime as claude
from runtimes.codex import _shared as codex
from runtimes.codex import exec as codex_exec
from runtimes.hosts.local.host import LocalHost
from runtimes.opencode import runtime as opencode
from runtimes.opencode.message import denial_notes
from tests.support.driver import operator_home


@pytest.fixture
def operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = operator_home(tmp_path / "operator")
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    return home


def _spec(tmp_path: Path, **overrides: object) -> LaunchSpec:
    fields: dict[str, object] = {
        "team": "t", "member": "m", "executable": "/bin/x", "model": None, "prompt": None,
        "workdir": tmp_path, "state_dir": tmp_path / "state", "host": LocalHost()}
    fields.update(overrides)
    (tmp_path / "state").mkdir(exist_ok=True)
    return LaunchSpec(**fields)  # type: ignore[arg-type]


# -- claude ------------------------------------------------------------------------------------

def test_claude_operator_login_uses_the_operators_config_dir(tmp_path: Path,
                                                              operator: Path) -> None:
    """No private CLAUDE_CONFIG_DIR (the CLI's own lock serializes refreshes; ~/.claude.json
    with user MCP servers stays where it is); nothing copied or linked."""
    spec = _spec(tmp_path, login="operator")
    dirs = claude.private_dirs(spec)
    env = claude.build_env(spec, dirs)
    assert "CLAUDE_CONFIG_DIR" not in env
    assert dirs["config"] == operator / ".claude"
    assert not any(p.name == ".credentials.json" for p in spec.state_dir.rglob("*"))


def test_claude_isolated_login_keeps_a_private_config_dir(tmp_path: Path,
                                                           operator: Path) -> None:
    spec = _spec(tmp_path, login="isolated")
    env = claude.build_env(spec, claude.private_dirs(spec))
    assert env["CLAUDE_CONFIG_DIR"] == str(spec.runtime_home / "config")


@pytest.mark.parametrize(("profile", "expected"), [
    ("read", ["--permission-mode", "dontAsk", "--allowedTools", claude.READ_TOOLS]),
    ("edit", ["--permission-mode", "dontAsk", "--allowedTools", claude.EDIT_TOOLS]),
    ("full", ["--permission-mode", "bypassPermissions"]),
])
def test_claude_permission_profiles(tmp_path: Path, profile: str, expected: list[str]) -> None:
    spec = _spec(tmp_path, permissions=profile)
    argv = claude.build_argv(spec, "sid", resume=False, files={})
    assert argv[-len(expected):] == expected
    assert not {"Write", "Edit", "Bash"} & set(claude.READ_TOOLS.split(","))
    env = claude.build_env(spec, claude.private_dirs(spec))
    assert ("IS_SANDBOX" in env) == (profile == "full" and os.geteuid() == 0)


# -- codex -------------------------------------------------------------------------------------

def test_codex_operator_login_links_the_operators_auth_json(tmp_path: Path,
                                                             operator: Path) -> None:
    (operator / ".codex" / "AGENTS.md").write_text("operator's instructions")
    (operator / ".codex" / "config.toml").write_text(
        'model_reasoning_effort = "high"\nforced_login_method = "api"\n[tui]\ntheme = "x"\n')
    spec = _spec(tmp_path, login="operator", config={"tui": {"animations": False}})
    env = codex.build_env(spec)
    home = Path(env["CODEX_HOME"])
    auth = home / "auth.json"
    assert auth.is_symlink() and Path(os.readlink(auth)) == operator / ".codex" / "auth.json"
    assert (home / "AGENTS.md").is_symlink()
    written = tomllib.loads((home / "config.toml").read_text())
    assert written["model_reasoning_effort"] == "high"
    assert written["tui"] == {"theme": "x", "animations": False}
    assert "forced_login_method" not in written, "it would delete the operator's login"
    codex.check_login(spec, home)  # logged in through the link


def test_codex_isolated_member_gets_nothing_of_the_operators(tmp_path: Path,
                                                             operator: Path) -> None:
    codex.build_env(_spec(tmp_path, login="operator"))
    spec = _spec(tmp_path, login="isolated")
    home = Path(codex.build_env(spec)["CODEX_HOME"])
    assert not (home / "auth.json").exists() and not (home / "auth.json").is_symlink()
    with pytest.raises(RuntimeNotLoggedIn, match="set CODEX_API_KEY in its env"):
        codex.check_login(spec, home)
    codex.check_login(_spec(tmp_path, login="isolated", env={"CODEX_API_KEY": "k"}), home)


def test_codex_not_logged_in_says_how(tmp_path: Path, operator: Path) -> None:
    (operator / ".codex" / "auth.json").unlink()
    spec = _spec(tmp_path, login="operator")
    home = codex.codex_member_home(spec)
    with pytest.raises(RuntimeNotLoggedIn, match="run 'codex login'"):
        codex.check_login(spec, home)
    (operator / ".codex" / "config.toml").write_text('cli_auth_credentials_store = "keyring"\n')
    with pytest.raises(RuntimeNotLoggedIn, match="OS keyring"):
        codex.check_login(spec, home)


def test_an_unreadable_codex_login_is_not_a_login(tmp_path: Path, operator: Path) -> None:
    (operator / ".codex" / "auth.json").write_text("{not json")
    spec = _spec(tmp_path, login="operator")
    with pytest.raises(RuntimeNotLoggedIn, match="unreadable or holds no login"):
        codex.check_login(spec, codex.codex_member_home(spec))


def test_codex_custom_provider_needs_its_env_key(tmp_path: Path, operator: Path) -> None:
    config = {"model_provider": "fake", "model_providers": {"fake": {"env_key": "FAKE_KEY"}}}
    spec = _spec(tmp_path, config=config)
    with pytest.raises(RuntimeNotLoggedIn, match="reads FAKE_KEY"):
        codex.check_login(spec, codex.codex_member_home(spec))
    keyless = _spec(tmp_path, config={"model_provider": "local",
                                      "model_providers": {"local": {"base_url": "http://x"}}})
    codex.check_login(keyless, codex.codex_member_home(keyless))


@pytest.mark.parametrize(("profile", "sandbox", "flag"), [
    ("read", "read-only", False), ("edit", "workspace-write", False), ("full", None, True)])
def test_codex_permission_profiles(tmp_path: Path, profile: str, sandbox: str | None,
                                   flag: bool) -> None:
    spec = _spec(tmp_path, permissions=profile, config={"sandbox_mode": "danger-full-access"})
    config = codex.effective_config(spec)
    if sandbox:
        assert config["sandbox_mode"] == sandbox, "the profile wins over the member's config"
    argv = codex_exec.build_exec_argv(spec, thread_id="th", images=[])
    assert ("--dangerously-bypass-approvals-and-sandbox" in argv) == flag
    assert argv.index("exec") < argv.index("resume")


# -- opencode ----------------------------------------------------------------------------------

def test_opencode_operator_login_links_auth_and_config_dir(tmp_path: Path,
                                                           operator: Path) -> None:
    (operator / ".config" / "opencode").mkdir(parents=True)
    spec = _spec(tmp_path, login="operator", model="openrouter/moonshotai/kimi-k2.6")
    env = opencode.build_env(spec, "pw")
    auth = opencode.member_auth_file(spec)
    assert auth.is_symlink()
    assert Path(os.readlink(auth)) == operator / ".local/share/opencode/auth.json"
    assert env["OPENCODE_CONFIG_DIR"] == str(operator / ".config" / "opencode")
    opencode.check_login(spec)


def test_opencode_preflight_names_the_providers_variable(tmp_path: Path,
                                                          operator: Path) -> None:
    spec = _spec(tmp_path, login="isolated", model="openrouter/moonshotai/kimi-k2.6")
    opencode.build_env(spec, "pw")
    with pytest.raises(RuntimeNotLoggedIn, match="set OPENROUTER_API_KEY in its env"):
        opencode.check_login(spec)
    opencode.check_login(_spec(tmp_path, login="isolated", model="openrouter/x",
                               env={"OPENROUTER_API_KEY": "k"}))
    opencode.check_login(_spec(tmp_path, login="isolated", model="fake/vision-model"))


@pytest.mark.parametrize(("profile", "expected"), [
    ("read", {"edit": "deny", "bash": "deny", "external_directory": "deny"}),
    ("edit", {"external_directory": "deny"}),
    ("full", {"external_directory": "allow"}),
])
def test_opencode_permission_profiles(tmp_path: Path, profile: str,
                                      expected: dict[str, str]) -> None:
    spec = _spec(tmp_path, permissions=profile,
                 config={"permission": {"webfetch": "deny", "external_directory": "ask"}})
    config = opencode.build_config(spec)
    assert config["permission"] == {"webfetch": "deny", **expected}
    assert json.loads(opencode.build_env(spec, "pw")["OPENCODE_CONFIG_CONTENT"]) == config


# -- the team file -----------------------------------------------------------------------------

def _team(tmp_path: Path, team: dict[str, object], member: dict[str, object]) -> TeamConfig:
    return TeamConfig.model_validate({"team": {"name": "t", "workdir": str(tmp_path), **team},
                                      "members": [{"name": "m", "runtime": "claude",
                                                   **member}]})


def test_profiles_and_logins_default_from_the_team(tmp_path: Path) -> None:
    config = _team(tmp_path, {"permissions": "read", "login": "isolated"}, {})
    [member] = config.members
    assert config.resolved(member).permissions == "read"
    assert config.resolved(member).login == "isolated"
    config = _team(tmp_path, {"permissions": "read"}, {"permissions": "full"})
    assert config.resolved(config.members[0]).permissions == "full"
    default = _team(tmp_path, {}, {})
    assert (default.resolved(default.members[0]).permissions,
            default.resolved(default.members[0]).login) == ("edit", "operator")


def test_ask_needs_a_runtime_that_can_ask_and_rules_have_one_form(tmp_path: Path) -> None:
    assert _team(tmp_path, {}, {"permissions": "ask"}).members[0].permissions == "ask"
    with pytest.raises(ValueError, match='needs transport = "app-server"'):
        _team(tmp_path, {}, {"permissions": "ask", "runtime": "codex", "transport": "exec"})
    with pytest.raises(ValueError, match=r"Input should be"):
        _team(tmp_path, {}, {"permissions": "root"})
    config = _team(tmp_path, {"allow": ["Write"]}, {"allow": ["Bash(npm test*)"]})
    assert config.resolved(config.members[0]).allow == ["Write", "Bash(npm test*)"]
    for bad in ("Bash(rm (x))", "", "1tool"):
        with pytest.raises(ValueError, match="should match pattern"):
            _team(tmp_path, {}, {"allow": [bad]})
    with pytest.raises(ValueError, match="at most 500 characters between its parentheses"):
        _team(tmp_path, {}, {"allow": ["Write(" + "x" * 600 + ")"]})
    for key in ("recycle_turns", "recycle_rss_mb", "recycle_children"):
        with pytest.raises(ValueError, match="greater than or equal to 0"):
            _team(tmp_path, {}, {key: -1})
        with pytest.raises(ValueError, match="valid integer"):
            _team(tmp_path, {}, {key: "lots"})
    with pytest.raises(ValueError, match="'exec' or 'app-server'"):
        _team(tmp_path, {}, {"runtime": "codex", "transport": "ssh"})


def test_codex_sandbox_refusals_become_notes(tmp_path: Path) -> None:
    member = codex_exec.CodexMember(_spec(tmp_path, permissions="read"), None, "0.171.0")  # type: ignore[arg-type]
    state = codex_exec._Turn()
    member._on_item({"type": "command_execution", "command": "/bin/bash -lc 'touch b.txt'",
                     "aggregated_output": "touch: cannot touch 'b.txt': Read-only file system\n",
                     "exit_code": 1, "status": "failed"}, state)
    member._on_item({"type": "command_execution", "command": "false",
                     "aggregated_output": "", "exit_code": 1}, state)
    assert state.notes == ["permission denied: command /bin/bash -lc 'touch b.txt': refused "
                           "by the read profile's sandbox"]


def test_opencode_refused_tool_calls_become_notes(tmp_path: Path) -> None:
    parts = [
        {"type": "tool", "tool": "invalid", "state": {"status": "error", "error":
         "Model tried to call unavailable tool 'write'."}},
        {"type": "tool", "tool": "bash", "state": {"status": "error", "error":
         "The user rejected permission to use this specific tool call."}},
        {"type": "tool", "tool": "bash", "state": {"status": "error", "error": "exit 1"}},
        {"type": "text", "text": "done"},
    ]
    notes = denial_notes(_spec(tmp_path), parts)
    assert notes == ("permission denied: invalid: Model tried to call unavailable tool "
                     "'write'.", "permission denied: bash: The user rejected permission to "
                     "use this specific tool call.")


def test_the_native_codex_of_an_npm_install_is_found(tmp_path: Path) -> None:
    import platform

    from runtimes.codex.app_server import native_binary

    package = tmp_path / "node_modules" / "@openai" / "codex"
    (package / "bin").mkdir(parents=True)
    (package / "bin" / "codex.js").write_text("#!/usr/bin/env node\n")
    arch = platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    native = (tmp_path / "node_modules" / "@openai" / "codex-linux-x"
              / "vendor" / f"{arch}-unknown-linux-musl" / "bin" / "codex")
    assert native_binary(str(package / "bin" / "codex.js")) == (
        str(package / "bin" / "codex.js"), {}), "no native binary: the wrapper"
    native.parent.mkdir(parents=True)
    native.write_text("#!/bin/sh\n")
    native.chmod(0o755)
    link = tmp_path / "node_modules" / ".bin" / "codex"
    link.parent.mkdir()
    link.symlink_to(package / "bin" / "codex.js")
    found, env = native_binary(str(link))
    assert found == str(native)
    assert env == {"CODEX_MANAGED_BY_NPM": "1", "CODEX_MANAGED_PACKAGE_ROOT": str(package)}
    assert native_binary("/usr/bin/codex") == ("/usr/bin/codex", {})


def test_opencode_is_told_the_model_reads_pdfs_when_teamctl_sends_it_pdfs(tmp_path: Path) -> None:
    """OpenCode replaces a file part of a modality its model config does not list by an
    "ERROR: Cannot read" text (seen with the real 1.18.33): when teamctl sends a member PDFs
    natively, the config it writes lists pdf — and only then."""
    from orchestrator.config import MemberConfig
    from orchestrator.daemon.members._launch import native_pdfs

    model = "anthropic/claude-sonnet-4-5"
    member = MemberConfig(name="d", runtime="opencode", model=model)
    assert native_pdfs(member)  # the catalog: this model reads PDFs
    spec = _spec(tmp_path, model=model, image_input=True, pdf_input=native_pdfs(member))
    entry = opencode.build_config(spec)["provider"]["anthropic"]["models"]["claude-sonnet-4-5"]
    assert entry["modalities"]["input"] == ["text", "image", "pdf"]
    pages = MemberConfig(name="d", runtime="opencode", model=model, documents="pages")
    spec = _spec(tmp_path, model=model, image_input=True, pdf_input=native_pdfs(pages))
    entry = opencode.build_config(spec)["provider"]["anthropic"]["models"]["claude-sonnet-4-5"]
    assert entry["modalities"]["input"] == ["text", "image"]
    unknown = MemberConfig(name="d", runtime="opencode", model="openrouter/moonshotai/kimi-k2.6")
    assert not native_pdfs(unknown)
