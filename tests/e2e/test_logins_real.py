"""The operator's own logins reach each real CLI's API — through its own files, never a copy —
and a member whose CLI is not logged in fails at launch (protocols/logins.md)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.fake_provider import fingerprint
from tests.support.real_members import claude_member, codex_member, opencode_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e

OAUTH_ACCESS = "sk-ant-oat01-E2E-OPERATOR-ACCESS-TOKEN"
OAUTH_REFRESH = "sk-ant-ort01-E2E-OPERATOR-REFRESH-TOKEN"
CODEX_KEY = "sk-proj-E2E-OPERATOR-CODEX-LOGIN-KEY"
OPENCODE_KEY = "sk-E2E-OPERATOR-OPENCODE-AUTH-KEY"
STRAY_KEY = "sk-ant-api03-E2E-STRAY-DAEMON-SHELL-KEY"


def _operator(teamctl: Teamctl) -> Path:
    home = Path(teamctl.env["HOME"])
    for name in (".claude", ".codex", ".local/share/opencode"):  # start with no login at all
        target = home / name
        if target.exists():
            subprocess.run(["rm", "-rf", str(target)], check=True)
    return home


def _no_copies_under(root: Path, secrets: list[str]) -> None:
    """No credential was copied into teamctl's home (links are fine: they are not copies)."""
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"{secret[:12]}… copied into {path}"


def test_real_claude_uses_the_operators_subscription_login(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    home = _operator(teamctl)
    (home / ".claude").mkdir()
    credentials = home / ".claude" / ".credentials.json"
    credentials.write_text(json.dumps({"claudeAiOauth": {
        "accessToken": OAUTH_ACCESS, "refreshToken": OAUTH_REFRESH,
        "expiresAt": int((time.time() + 30 * 86400) * 1000),
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}}))
    credentials.chmod(0o600)
    member = claude_member("rev", claude_bin, anthropic)
    member["env"] = {k: v for k, v in member["env"].items()  # type: ignore[attr-defined]
                     if k != "ANTHROPIC_API_KEY"}
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", [member])),
                           extra_env={"ANTHROPIC_API_KEY": STRAY_KEY})
    assert launched.returncode == 0, launched.stdout + launched.stderr
    done = teamctl.run("send", "rev", "hello", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    [request] = anthropic.message_requests()
    assert request["headers"]["authorization"] == fingerprint(f"Bearer {OAUTH_ACCESS}")
    assert "x-api-key" not in request["headers"], "the stray daemon-shell key never arrived"
    assert "oauth-2025-04-20" in request["headers"]["anthropic-beta"]
    assert not credentials.is_symlink() and OAUTH_REFRESH in credentials.read_text()
    _no_copies_under(teamctl.home, [OAUTH_ACCESS, OAUTH_REFRESH])


def test_real_claude_without_a_login_fails_at_launch_with_the_fix(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    _operator(teamctl)
    member = claude_member("rev", claude_bin, anthropic)
    member["env"] = {k: v for k, v in member["env"].items()  # type: ignore[attr-defined]
                     if k != "ANTHROPIC_API_KEY"}
    done = teamctl.run("launch", str(teamctl.write_team("e2e", [member])))
    assert done.returncode == 1
    assert "claude is not logged in for this member" in done.stdout
    assert "claude /login" in done.stdout
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert (row["launch"], row["restarts"]) == ("fatal", 0), "no restart loop"
    assert anthropic.message_requests() == []


def test_real_codex_uses_the_operators_login_made_by_codex_login(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    home = _operator(teamctl)
    (home / ".codex").mkdir()
    login = subprocess.run([str(codex_bin), "login", "--with-api-key"], input=CODEX_KEY + "\n",
                           text=True, capture_output=True, timeout=120, check=False,
                           env={"PATH": os.environ["PATH"], "HOME": str(home),
                                "CODEX_HOME": str(home / ".codex")})
    assert login.returncode == 0, login.stderr
    member = codex_member("rev", codex_bin, responses)
    provider = member["config"]["model_providers"]["fake"]  # type: ignore[index]
    del provider["env_key"]
    provider["requires_openai_auth"] = True
    member["env"] = {}
    assert teamctl.run("launch", str(teamctl.write_team("e2e", [member]))).returncode == 0
    done = teamctl.run("send", "rev", "hello", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    request = responses.requests[-1]
    assert request["headers"]["authorization"] == fingerprint(f"Bearer {CODEX_KEY}")
    linked = teamctl.home / "members" / "e2e" / "rev" / "runtime" / "codex-home" / "auth.json"
    assert linked.is_symlink() and Path(os.readlink(linked)) == home / ".codex" / "auth.json"
    _no_copies_under(teamctl.home, [CODEX_KEY])


def test_real_opencode_uses_the_operators_auth_json(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat) -> None:
    home = _operator(teamctl)
    data = home / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    (data / "auth.json").write_text(json.dumps({"fake": {"type": "api", "key": OPENCODE_KEY}}))
    (data / "auth.json").chmod(0o600)
    member = opencode_member("des", opencode_bin, chat, model="fake/text-model", vision=False)
    del member["config"]["provider"]["fake"]["options"]["apiKey"]  # type: ignore[index]
    assert teamctl.run("launch", str(teamctl.write_team("e2e", [member]))).returncode == 0
    done = teamctl.run("send", "des", "hello", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    [request] = [r for r in chat.requests if r["path"].endswith("/chat/completions")]
    assert request["headers"]["authorization"] == fingerprint(f"Bearer {OPENCODE_KEY}")
    _no_copies_under(teamctl.home, [OPENCODE_KEY])
