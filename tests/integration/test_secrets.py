"""What a member and the other users of the machine can see, with the real daemon and fake
CLIs: no planted secret in any output, a minimal environment of a member's own (sandboxed too),
a role prompt and a Codex config never on a command line, the journal and member directories
private. (Recovery after a crash is tests/integration/test_team_lifecycle.py's.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.contracts import McpServer
from tests.support.members import codex_member, fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

SECRETS = {
    "anthropic": "sk-ant-api03-PLANTEDanthropic0001",
    "openai": "sk-proj-PLANTEDopenai000000002",
    "openrouter": "sk-or-v1-PLANTEDopenrouter003",
    "github": "ghp_PLANTEDgithub0000000000004",
    "slack": "xoxb-PLANTED-slack-0000000005",
    "aws": "AKIAPLANTEDAWS000006",
    "google": "AIzaPLANTEDgoogle00000000000000000007",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.PLANTEDsignature0008",
    "bearer": "PLANTEDbearer0000000009",
    "url": "PLANTEDurlpass000010",
    "shapeless": "hunter2-PLANTED-shapeless-11",
}


def _planted(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


def _shaped(s: dict[str, str]) -> str:
    """Every planted secret in the shape it has in the wild."""
    return (f"{s['anthropic']} {s['openai']} {s['openrouter']} {s['github']} {s['slack']} "
            f"{s['aws']} {s['google']} {s['jwt']} Authorization: Bearer {s['bearer']} "
            f"https://bob:{s['url']}@git.example {s['shapeless']}")


def test_no_planted_secret_reaches_any_output(teamctl: Teamctl) -> None:
    """Secrets planted in a member's env, its stderr, its argv and the message text appear in
    none of: status, history, send --wait, launch output, logs, daemon.out."""
    s = SECRETS
    stderr_line = f"fatal: {_shaped(s)}"
    failing = fake_member("broken", max_restarts=0, env={
        "FAKE_CLAUDE_EXIT_AT_START": "3", "FAKE_CLAUDE_STDERR": stderr_line,
        "SERVICE_TOKEN": s["shapeless"], "ANTHROPIC_API_KEY": s["anthropic"]})
    working = fake_member("lead", args=[f"--fake-flag={s['openai']}"], env={
        "OPENROUTER_API_KEY": s["openrouter"], "SERVICE_TOKEN": s["shapeless"]})
    team = teamctl.write_team("web", [working, failing])
    launched = teamctl.run("launch", str(team), "--timeout", "20")
    text = _shaped(s)
    sent = teamctl.run("send", "lead", f"please keep these: {text}", "--wait")
    assert sent.returncode == 0, sent.stderr
    outputs = {
        "launch": launched.stdout + launched.stderr,
        "send": sent.stdout + sent.stderr,
        "send --json": teamctl.run("send", "lead", text, "--wait", "--json").stdout,
        "status": teamctl.run("status", "--json").stdout + teamctl.run("status").stdout,
        "history": teamctl.run("history", "lead", "--json").stdout
        + teamctl.run("history", "lead").stdout,
        "logs": teamctl.run("logs", "--json").stdout,
    }
    for path in (teamctl.home / "logs").iterdir():
        outputs[path.name] = path.read_text(errors="replace")
    assert "fatal" in outputs["status"], "the failing member's stderr is reported"
    assert "[REDACTED]" in outputs["status"] + outputs["teamctl.jsonl"]
    leaks = {where: _planted(out) for where, out in outputs.items() if _planted(out)}
    assert leaks == {}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


def test_members_get_a_minimal_environment_of_their_own(teamctl: Teamctl) -> None:
    """A daemon started from a shell full of keys hands none of them to members; no member
    sees another's env; TEAMCTL_HOME and the socket are not handed down; pass_env passes."""
    team = teamctl.write_team("web", [
        fake_member("one", env={"ONE_ONLY": "for-one"}),
        fake_member("two", env={"TWO_ONLY": "for-two"}, pass_env=["PASSED_ON"]),
    ])
    shell = {"ANTHROPIC_API_KEY": SECRETS["anthropic"], "TEAMMATE_SHELL_SECRET": "x" * 12,
             "PASSED_ON": "yes", "LC_ALL": "C.UTF-8"}
    assert teamctl.run("launch", str(team), extra_env=shell).returncode == 0
    rows = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    one, two = _environ(rows["one"]["pid"]), _environ(rows["two"]["pid"])
    assert one["ONE_ONLY"] == "for-one" and "TWO_ONLY" not in one
    assert two["TWO_ONLY"] == "for-two" and "ONE_ONLY" not in two
    assert two["PASSED_ON"] == "yes" and "PASSED_ON" not in one
    for env in (one, two):
        assert env["LC_ALL"] == "C.UTF-8" and env["PATH"]
        for name in ("ANTHROPIC_API_KEY", "TEAMMATE_SHELL_SECRET", "TEAMCTL_HOME"):
            assert name not in env
        assert str(teamctl.home / "teamctl.sock") not in json.dumps(env)


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for child in Path(f"/proc/{parent}/task").glob("*/children"):
            kids = [int(k) for k in child.read_text().split()]
            found += kids
            todo += kids
    return found


def test_a_sandboxed_member_behind_the_egress_relay_gets_its_own_minimal_environment(
        teamctl: Teamctl) -> None:
    """With its network cut, a sandboxed member is started by the in-sandbox relay, which
    passes on its own environment: that must be the member's minimal one (built by the
    adapter), never the daemon's — a daemon started from a shell full of keys hands none of
    them down, only the member's own env and the proxy the relay adds."""
    member = fake_member("boxed", sandbox="process", network="off",
                         env={"BOXED_ONLY": "for-boxed"})
    shell = {"ANTHROPIC_API_KEY": SECRETS["anthropic"], "TEAMMATE_SHELL_SECRET": "x" * 12}
    launched = teamctl.run("launch", str(teamctl.write_team("web", [member])), extra_env=shell)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [row] = teamctl.json("status")["teams"][0]["members"]
    runtime = [pid for pid in [row["pid"], *_descendants(row["pid"])]
               if b"fixtures/bin/claude" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert runtime, "the fake runtime runs under the sandbox's relay"
    env = _environ(runtime[-1])
    assert env["BOXED_ONLY"] == "for-boxed" and env["HTTPS_PROXY"].startswith("http://127.")
    for name in ("ANTHROPIC_API_KEY", "TEAMMATE_SHELL_SECRET", "TEAMCTL_HOME"):
        assert name not in env, name
    assert str(teamctl.home / "teamctl.sock") not in json.dumps(env)


def test_a_200kb_role_prompt_works_and_is_never_on_the_command_line(teamctl: Teamctl) -> None:
    """The prompt went on argv: visible in ps, and 200 KB failed with E2BIG into a backoff
    loop. Now it reaches the runtime through a 0600 file, whatever its size."""
    prompt = "You review code carefully. " * 8000
    member = fake_member("lead", prompt=prompt, config={"theme": "dark"},
                         env={"FAKE_CLAUDE_ECHO_PROMPT": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "lead", "hello", "--wait")
    assert done.returncode == 0, done.stderr
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    assert f"prompt: chars={len(prompt)} sha256={digest}" in done.stdout
    [pid] = teamctl.member_pids()
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
    assert "You review code" not in argv and "dark" not in argv
    member_dir = teamctl.home / "members" / "web" / "lead"
    for name in ("system-prompt.md", "settings.json"):
        assert (member_dir / name).stat().st_mode & 0o777 == 0o600


def test_codex_member_config_reaches_codex_through_its_home_not_argv(
        teamctl: Teamctl) -> None:
    member = codex_member("rev", config={"model_reasoning_effort": "low",
                                         "features": {"plugins": False}},
                          env={"FAKE_CODEX_ECHO_CONFIG": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "rev", "hello", "--wait")
    assert done.returncode == 0, done.stderr
    config_line = next(ln for ln in done.stdout.splitlines() if ln.startswith("config: "))
    config = json.loads(config_line.removeprefix("config: "))
    teamctl_server = config.pop("mcp_servers")["teamctl"]  # messaging, on by default
    assert config == {
        "features": {"plugins": False, "multi_agent": False}, "model_reasoning_effort": "low",
        "sandbox_mode": "workspace-write", "approval_policy": "never"}  # the "edit" profile
    assert teamctl_server["required"] is True
    assert teamctl_server["args"] == ["-I", "-S", str(McpServer.RELAY)]  # the relay, isolated
    assert "TEAMCTL_MEMBER_TOKEN" in teamctl_server["env"]


def test_journal_and_member_dirs_are_private(teamctl: Teamctl) -> None:
    """The journal's -wal/-shm were 0644 and a team's members dir took the umask: every
    directory teamctl creates is 0700 and every file it writes 0600 (what a runtime creates
    inside its 0700 member dir is out of other users' reach whatever its mode)."""
    member = fake_member("lead", prompt="be brief", config={"theme": "dark"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    assert teamctl.run("send", "lead", "hello", "--wait").returncode == 0
    for name in ("state.db", "state.db-wal", "state.db-shm", "daemon.pid",
                 "logs/teamctl.jsonl", "members/web/lead/settings.json",
                 "members/web/lead/system-prompt.md"):
        assert (teamctl.home / name).stat().st_mode & 0o777 == 0o600, name
    for name in ("", "logs", "artifacts", "members", "members/web", "members/web/lead",
                 "members/web/lead/runtime", "members/web/lead/runtime/config",
                 "members/web/lead/runtime/tmp"):
        assert (teamctl.home / name).stat().st_mode & 0o777 == 0o700, name


