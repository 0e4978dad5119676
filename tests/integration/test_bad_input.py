"""Bad input gets a clear error, the documented exit code, and loses nothing — hostile calls on
every socket method and team-file key too (export, markers, ``describe_with``, approvals paging,
the strict budget call): refused typed, the daemon up, a queued message answered."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support import images
from tests.support.driver import REPO, Teamctl, socket_exchange
from tests.support.members import fake_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


def test_invalid_team_file_names_file_line_key_and_exits_2(teamctl: Teamctl) -> None:
    path = teamctl.workdir / "bad.toml"
    path.write_text(
        '[team]\nname = "web"\n\n[[members]]\nname = "lead"\nruntime = "claud"\n'
        'modle = "x"\nstart_timeout = -1\n'
    )
    done = teamctl.run("launch", str(path))
    assert done.returncode == 2
    assert f"{path}:6: members[0].runtime" in done.stderr
    assert f"{path}:7: members[0].modle: unknown key" in done.stderr
    assert f"{path}:8: members[0].start_timeout" in done.stderr
    assert not (teamctl.home / "teamctl.sock").exists(), "no daemon for an invalid file"


def test_team_file_that_is_not_toml_exits_2(teamctl: Teamctl) -> None:
    path = teamctl.workdir / "bad.toml"
    path.write_text("[team\nname=")
    done = teamctl.run("launch", str(path))
    assert done.returncode == 2 and "not valid TOML" in done.stderr


def test_duplicate_member_names_are_refused(teamctl: Teamctl) -> None:
    path = teamctl.write_team("web", [fake_member("a"), fake_member("a")])
    done = teamctl.run("launch", str(path))
    assert done.returncode == 2 and "two members are named 'a'" in done.stderr


def test_commands_without_a_daemon_exit_4_and_say_how_to_start_one(teamctl: Teamctl) -> None:
    for args in (("status",), ("send", "lead", "hi"), ("history", "lead"), ("stop",),
                 ("restart", "lead")):
        done = teamctl.run(*args)
        assert done.returncode == 4, args
        assert "teamctl launch" in done.stderr
    assert teamctl.daemon_pid() is None


def test_unknown_member_and_team_name_those_that_exist(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead"),
                                                          fake_member("rev")])))
    done = teamctl.run("send", "nobody", "hi")
    assert done.returncode == 1
    assert "no member named 'nobody'; members: lead, rev" in done.stderr
    done = teamctl.run("send", "--team", "other", "lead", "hi")
    assert done.returncode == 1 and "running teams: web" in done.stderr
    doc = teamctl.json("send", "nobody", "hi")
    assert doc == {"ok": False, "error": {"code": "not_found", "message": doc["error"]["message"],
                                          "retryable": False}}


def test_two_teams_require_team(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("one", [fake_member("lead")])))
    teamctl.run("launch", str(teamctl.write_team("two", [fake_member("lead")])))
    done = teamctl.run("send", "lead", "hi")
    assert done.returncode == 2 and "--team" in done.stderr
    done = teamctl.run("send", "--team", "two", "lead", "hi", "--wait")
    assert done.returncode == 0


def test_second_launch_of_a_running_team_says_so_or_names_the_differences(
        teamctl: Teamctl) -> None:
    """The same file again: exit 0, "already running". A changed file: exit 1, with what
    differs and how to apply it — never a silent restart."""
    path = teamctl.write_team("web", [fake_member("lead")])
    assert teamctl.run("launch", str(path)).returncode == 0
    done = teamctl.run("launch", str(path))
    assert done.returncode == 0, done.stderr
    assert "team web already running, from this same file" in done.stdout
    changed = teamctl.write_team("web", [fake_member("lead", model="claude-opus-4-1"),
                                         fake_member("rev")])
    done = teamctl.run("launch", str(changed))
    assert done.returncode == 1
    assert "team 'web' is already running" in done.stderr
    assert "members added: rev" in done.stderr and "lead: model changed" in done.stderr
    assert "teamctl stop web" in done.stderr


def test_missing_executable_fails_that_member_only(teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [
        fake_member("good"),
        fake_member("bad", command="/nonexistent/claude"),
    ])
    done = teamctl.run("launch", str(team))
    assert done.returncode == 1
    assert "install /nonexistent/claude or set command =" in done.stdout
    rows = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    assert rows["bad"]["launch"] == "fatal"
    assert rows["good"]["launch"] == "running"
    assert teamctl.run("send", "good", "hi", "--wait").returncode == 0


def test_member_that_exits_at_start_reports_its_redacted_stderr(teamctl: Teamctl) -> None:
    secret = "sk-ant-api03-supersecretvalue"
    member = fake_member("bad", max_restarts=1, backoff=[0.05, 0.1], env={
        "FAKE_CLAUDE_EXIT_AT_START": "3",
        "FAKE_CLAUDE_STDERR": f"boom: ANTHROPIC_API_KEY={secret} is wrong",
        "ANTHROPIC_API_KEY": secret,
    })
    done = teamctl.run("launch", str(teamctl.write_team("web", [member])), "--timeout", "10")
    assert done.returncode == 1
    log_text = (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    assert secret not in log_text
    failures = [e for e in teamctl.log_events() if e["event"] == "member_start_failed"]
    assert failures and "exited 3" in failures[0]["error"]
    assert any("boom: ANTHROPIC_API_KEY=[REDACTED]" in line
               for line in failures[0]["stderr_tail"])


def test_second_daemon_on_the_same_home_refuses(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")])))
    done = teamctl.run("daemon", timeout=30)
    assert done.returncode == 1
    assert "already runs" in done.stderr
    assert teamctl.run("status").returncode == 0


def test_foreground_daemon_exits_0_on_sigterm(teamctl: Teamctl) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "daemon"], env=teamctl.env, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    assert "teamctl daemon ready" in process.stdout.readline()
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")])))
    member = teamctl.member_pids()
    process.terminate()
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert wait_pid_exit(member[0], 5)


def test_control_socket_bounds_requests_and_rejects_garbage(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")])))
    def exchange(payload: bytes) -> dict[str, object]:
        return dict(json.loads(socket_exchange(teamctl.home / "teamctl.sock", payload)))

    assert exchange(b"not json\n")["error"]["code"] == -32700  # type: ignore[index]
    unknown = exchange(b'{"jsonrpc":"2.0","id":1,"method":"nope"}\n')
    assert unknown["error"]["code"] == -32601  # type: ignore[index]
    extra = exchange(b'{"jsonrpc":"2.0","id":2,"method":"status","params":{"x":1}}\n')
    assert extra["error"]["code"] == -32602  # type: ignore[index]
    huge = exchange(b'{"jsonrpc":"2.0","id":3,"method":"send","params":{"text":"'
                    + b"a" * (2 * 1024 * 1024) + b'"}}\n')
    assert huge["error"]["data"]["code"] == "request_too_large"  # type: ignore[index]
    assert teamctl.run("status").returncode == 0, "the daemon is fine"


def test_doctor_reports_runtimes_catalog_and_daemon(teamctl: Teamctl) -> None:
    fake_bin = REPO / "fixtures" / "bin"
    env = {"TEAMCTL_CLAUDE_BIN": str(fake_bin / "claude"),
           "TEAMCTL_CODEX_BIN": str(fake_bin / "codex"),
           "TEAMCTL_OPENCODE_BIN": "/nonexistent/opencode"}
    report = teamctl.json("doctor", extra_env=env)
    rows = {r["runtime"]: r for r in report["runtimes"]}
    assert rows["claude"]["version"] == "2.1.332 (Claude Code)"
    assert rows["codex"]["version"] == "codex-cli 0.171.0"
    assert rows["opencode"]["path"] is None
    assert report["vision_catalog"]["checked"] == "2026-11-29"
    assert report["daemon_running"] is False and report["home"] == str(teamctl.home)
    text = teamctl.run("doctor", extra_env=env).stdout
    assert "not found (install it, or set TEAMCTL_OPENCODE_BIN)" in text


def test_every_bad_input_is_one_line_with_its_exit_code_and_loses_nothing(
        teamctl: Teamctl) -> None:
    """Invalid UTF-8, absurd timeouts, too many or special attachments, bad names: each is
    refused with one line and exit 2 (or 3), no traceback, and nothing is journaled."""
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))
                       ).returncode == 0
    image = REPO / "fixtures" / "images" / "screenshot-1920x1080.png"
    attach33 = [arg for _ in range(33) for arg in ("--attach", str(image))]
    cases: list[tuple[list[str], int, str]] = [
        (["send", "lead", "x", "--wait", "--timeout", "inf"], 2, "not between 0 and"),
        (["send", "lead", "x", "--wait", "--timeout", "nan"], 2, "not between 0 and"),
        (["send", "lead", "x", "--wait", "--timeout", "1e308"], 2, "not between 0 and"),
        (["send", "lead", "x", "--timeout", "-1"], 2, "not between 0 and"),
        (["launch", "nope.toml", "--timeout", "0"], 2, "not between 0 and"),
        (["send", "lead", "x", *attach33], 2, "at most 32 attachments"),
        (["send", "bad name!", "x"], 2, "is not a name"),
        (["send", "--team", "../etc", "lead", "x"], 2, "is not a name"),
        (["history", "lead", "--before", "not-an-id"], 2, "is not a message id"),
        (["history", "lead", "--limit", "0"], 2, "0"),
        (["send", "--attach", "/proc/self/mem", "lead", "x"], 3,
         "attachment_not_a_regular_file"),
        (["send", "--attach", "/dev/zero", "lead", "x"], 3, "attachment_not_a_regular_file"),
    ]
    for args, code, says in cases:
        done = teamctl.run(*args)
        assert done.returncode == code, (args, done.stderr)
        assert says in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout, args
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert len(lines) <= 3, (args, lines)  # click's usage line + hint + the error
    invalid = subprocess.run(
        [sys.executable, "-m", "orchestrator", "send", "lead", b"caf\xe9 \xff"],
        capture_output=True, env=teamctl.env, cwd=teamctl.workdir, timeout=60, check=False)
    assert invalid.returncode == 2 and b"not valid UTF-8" in invalid.stderr
    assert b"Traceback" not in invalid.stderr
    from_stdin = subprocess.run(
        [sys.executable, "-m", "orchestrator", "send", "lead", "-"], input=b"\xff\xfe\x00bad",
        capture_output=True, env=teamctl.env, cwd=teamctl.workdir, timeout=60, check=False)
    assert from_stdin.returncode == 2 and b"stdin is not valid UTF-8" in from_stdin.stderr
    huge = teamctl.run("send", "lead", "-", input="x" * (2 * 1024 * 1024))
    assert huge.returncode == 2, "a >1 MiB send was misreported as no daemon (exit 4)"
    assert "over the control socket's 1 MiB limit" in huge.stderr
    assert teamctl.json("history", "lead")["messages"] == [], "nothing was journaled"
    assert teamctl.run("send", "lead", "still fine", "--wait").returncode == 0


def test_team_file_with_nul_or_a_missing_workdir_exits_2_naming_the_key(
        teamctl: Teamctl) -> None:
    nul = teamctl.workdir / "nul.toml"
    nul.write_text('[team]\nname = "web"\n\n[[members]]\nname = "lead"\nruntime = "claude"\n'
                   'prompt = "be \\u0000 brief"\n')
    done = teamctl.run("launch", str(nul))
    assert done.returncode == 2 and "members[0].prompt: contains a NUL" in done.stderr
    raw = teamctl.workdir / "raw-nul.toml"
    raw.write_bytes(b'[team]\nname = "w\x00eb"\n')
    done = teamctl.run("launch", str(raw))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    gone = teamctl.write_team("web", [fake_member("lead")], workdir="does/not/exist")
    done = teamctl.run("launch", str(gone))
    assert done.returncode == 2 and "team.workdir:" in done.stderr
    assert "is not a directory" in done.stderr
    member_gone = teamctl.write_team("web", [fake_member("lead", workdir="missing-sub")])
    done = teamctl.run("launch", str(member_gone))
    assert done.returncode == 2 and "members[0].workdir:" in done.stderr
    assert not (teamctl.home / "teamctl.sock").exists(), "no daemon for an invalid file"


def test_send_wait_to_a_fatal_member_says_so_and_keeps_the_message(teamctl: Teamctl) -> None:
    member = fake_member("lead", max_restarts=0, env={"FAKE_CLAUDE_EXIT_AT_START": "1"})
    teamctl.run("launch", str(teamctl.write_team("web", [member])), "--timeout", "10")
    done = teamctl.run("send", "lead", "anyone there?", "--wait", "--timeout", "3600",
                       timeout=60)
    assert done.returncode == 1
    assert "member 'lead' is fatal" in done.stderr and "stays queued" in done.stderr
    assert "teamctl restart lead" in done.stderr
    [message] = teamctl.json("history", "lead")["messages"]
    assert message["state"] == "queued"


def test_hostile_calls_are_refused_and_nothing_queued_is_lost(teamctl: Teamctl) -> None:
    gate = teamctl.workdir / "gate"  # lead's turn stays in flight through the hostile calls
    team = teamctl.write_team("web", [fake_member("lead", env={"FAKE_CLAUDE_TURN_GATE": str(gate)}),
                                      fake_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0
    queued = teamctl.run("send", "lead", "kept through it all").stdout.strip()
    shot = images.save(images.screenshot(200, 100), teamctl.workdir / "s.png", "PNG")
    for params in ({"member": "../lead"}, {"member": ["lead"]}, {"team": "../etc"},
                   {"member": "lead", "all": True}, {"member": "lead" * 40}):
        answer = teamctl.rpc("export", params)
        assert answer["error"]["code"] == "usage_error", (params, answer)
    assert teamctl.rpc("export", {"member": "nobody"})["error"]["code"] == "not_found"
    for text in ("[Image #0]", "[Image #2]", "[Image #999999999]", "[Image #1][Image #-1]"
                 "[Image #3]"):
        answer = teamctl.rpc("send", {"member": "rev", "text": text,
                                      "attachments": [str(shot)]})
        assert answer["error"]["code"] == "attachment_refused", (text, answer)
        codes = [f["code"] for f in answer["error"]["data"]["details"]["failures"]]
        assert codes == ["attachment_marker_unknown"], (text, codes)
    staged = teamctl.home / "paste" / "x" / "clipboard.png"  # what --paste would stage
    staged.parent.mkdir(parents=True)
    staged.write_text("not an image at all")
    answer = teamctl.rpc("send", {"member": "rev", "text": "[Image #1]",
                                  "attachments": [str(staged)]})
    assert answer["error"]["code"] == "attachment_refused"
    assert teamctl.json("history", "rev")["messages"] == [], "nothing was journaled"

    gate.touch()
    args = json.dumps({"to": "rev", "text": "see [Image #4]", "attachments": [str(shot)]})
    done = teamctl.run("send", "lead", f"MCP send_message {args}", "--wait")
    assert done.returncode == 0, done.stderr
    assert "attachment_marker_unknown" in done.stdout, done.stdout
    assert teamctl.json("history", "rev")["messages"] == [], "the teammate's message was refused"

    hostile = teamctl.run("doctor", str(team), "--host", "-oProxyCommand=touch /tmp/pwned")
    assert hostile.returncode == 2
    assert "neither a [hosts.NAME] of the team file" in hostile.stderr
    assert teamctl.run("status").returncode == 0, "the daemon is up"
    states = {m["id"]: m["state"] for m in teamctl.json("history", "lead")["messages"]}
    assert states[queued] == "answered", "the queued message was not lost"


def test_hostile_describe_with_settings_are_refused_with_their_key(teamctl: Teamctl) -> None:
    for describe, key in (({"runtime": "gpt", "model": "x"}, "describe_with.runtime"),
                          ({"runtime": "claude", "model": ""}, "describe_with.model"),
                          ({"runtime": "claude", "model": "m", "timeout": -1},
                           "describe_with.timeout"),
                          ({"runtime": "claude", "model": "m", "tools": ["Bash"]},
                           "describe_with.tools")):
        team = teamctl.write_team("web", [fake_member("blind", vision=False,
                                                      describe_with=describe)])
        done = teamctl.run("launch", str(team))
        assert done.returncode == 2, (describe, done.stderr)
        assert f"members[0].{key}" in done.stderr, done.stderr


def test_hostile_calls_on_the_new_socket_methods_are_refused_and_nothing_is_lost(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))) \
        .returncode == 0
    gate = teamctl.workdir / "gate"
    teamctl.run("send", "lead", f"GATE {gate}")
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent")
    queued = teamctl.run("send", "lead", "kept through it all").stdout.strip()
    apv = "apv_" + "A" * 26
    for method, params in (
            ("approvals", {"limit": 0}), ("approvals", {"limit": 10**6}),
            ("approvals", {"offset": -1}), ("approvals", {"offset": 2**80}),
            ("approvals", {"limit": "all"}), ("approvals", {"offset": 1.5}),
            ("approval_rules", {"member": "../lead"}), ("approval_rules", {"all": "maybe"}),
            ("approval_rules", {"member": ["lead"]}),
            ("revoke_rule", {"rule": ""}), ("revoke_rule", {"rule": "W" * 10_000}),
            ("revoke_rule", {"rule": None}), ("revoke_rule", {"member": "-x", "rule": "Write"}),
            ("approve", {"id": apv, "preview": "maybe"}),
            ("approve", {"id": apv, "always": True, "rule": "x" * 5000}),
            ("approve", {"id": "apv_../../x"}),
            ("budget", {"member": "lead", "usd": "5"}), ("budget", {"member": "lead",
                                                                    "usd": True}),
            ("budget", {"member": "lead", "tokens": 2**70}),
            # issue 47-49's methods: the merge queue and the accounts
            ("queue", {"pause": True, "resume": True}), ("queue", {"pause": "yes"}),
            ("queue", {"team": "../web"}), ("integrate", {"id": 0}),
            ("integrate", {"id": "T1; rm -rf /"}), ("integrate", {"id": 2**80}),
            ("integrate", {}), ("accounts", {"team": "-x"}), ("accounts", {"team": ["web"]}),
            # issue 51's trace: an id that is no message id, of another type, none, huge
            ("trace", {"id": "../../journal.db"}), ("trace", {"id": 5}), ("trace", {}),
            ("trace", {"id": "0" * 10_000}), ("trace", {"id": "01J\x1b[2J"})):
        answer = teamctl.rpc(method, params)
        assert answer["error"]["code"] == "usage_error", (method, params, answer)
    unknown = teamctl.rpc("revoke_rule", {"rule": "Write(docs/**)"})  # nothing kept: no-op
    assert unknown.get("error", {}).get("code") != "internal_error", unknown
    assert teamctl.run("status").returncode == 0, "the daemon is up"
    gate.touch()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == queued)
    states = {m["id"]: m["state"] for m in teamctl.json("history", "lead")["messages"]}
    assert states[queued] == "answered", "the queued message was not lost"


@pytest.mark.parametrize(("key", "value"), [
    ("interrupt_grace", -1.0), ("interrupt_grace", "soon"), ("liveness_deadline", 0),
    ("liveness_deadline", float("inf")), ("recycle_check_interval", -5.0),
    ("recycle_check_interval", 1e9), ("liveness_interval", "fast")])
def test_hostile_values_of_the_new_member_keys_are_refused_naming_the_key(
        teamctl: Teamctl, key: str, value: object) -> None:
    team = teamctl.write_team("web", [fake_member("lead", **{key: value})])
    done = teamctl.run("launch", str(team))
    assert done.returncode == 2, done.stderr
    assert f"members[0].{key}" in done.stderr
    assert teamctl.run("status").returncode == 4, "nothing was started for it"
