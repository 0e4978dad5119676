"""Bad input gets a clear error, the documented exit code, and loses nothing."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO, Teamctl, fake_member, socket_exchange, wait_pid_exit


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
