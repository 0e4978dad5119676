"""Sandboxed members (``sandbox = "process"``, docs/security.md "Sandbox") with the real CLIs
against the fake APIs and the real bubblewrap: the turn works, a write (the CLI's own write
tool, and a command) inside the workdir lands, a write outside it — the operator's home, a
directory of this machine — never reaches the disk, with ``permissions = "full"`` (the CLI's
own checks off: the sandbox is the boundary)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.driver import REPO
from tests.support.real_members import claude_member, codex_member, opencode_member
from tests.support.sandboxed import SANDBOXED, escape_command, send_waited

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory of this machine outside the workdir (and outside /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="teamctl-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _writes_stay_inside(teamctl: Teamctl, member: str, outside: Path) -> dict[str, str]:
    """The member's turn answered; its write tool and a command write inside its workdir;
    the same to the operator's home and to ``outside`` never land. The replies, by step."""
    replies = {"turn": send_waited(teamctl, member, "hello from outside")}
    assert "hello from outside" in replies["turn"], replies["turn"]
    home = Path(teamctl.env["HOME"])
    inside, by_bash = teamctl.workdir / "inside.txt", teamctl.workdir / "inside-bash.txt"
    replies["write"] = send_waited(teamctl, member, f"DO_WRITE {inside}")
    replies["bash"] = send_waited(teamctl, member, f"DO_BASH touch {by_bash}")
    assert inside.exists(), replies["write"]
    assert by_bash.exists(), replies["bash"]
    for target in (home / "escape.txt", outside / "escape.txt"):
        replies[f"write {target}"] = send_waited(teamctl, member, f"DO_WRITE {target}")
        replies[f"bash {target}"] = send_waited(teamctl, member, f"DO_BASH touch {target}-bash")
        assert not target.exists(), replies[f"write {target}"]
        assert not Path(f"{target}-bash").exists(), replies[f"bash {target}"]
    return replies


def test_real_claude_sandboxed_writes_only_its_workdir(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic, outside: Path) -> None:
    """Claude in bypassPermissions inside the sandbox: its Write and Bash land in the workdir
    only."""
    member = claude_member("c", claude_bin, anthropic, **SANDBOXED)
    assert teamctl.run("launch", str(teamctl.write_team("e2e", [member]))).returncode == 0
    _writes_stay_inside(teamctl, "c", outside)


def test_real_codex_sandboxed_writes_only_its_workdir(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses, outside: Path) -> None:
    """Codex with --dangerously-bypass-approvals-and-sandbox inside ours (its own bubblewrap
    cannot start in our user namespace): its write and command land in the workdir only."""
    member = codex_member("x", codex_bin, responses, **SANDBOXED)
    assert teamctl.run("launch", str(teamctl.write_team("e2e", [member]))).returncode == 0
    _writes_stay_inside(teamctl, "x", outside)


def test_real_opencode_sandboxed_writes_only_its_workdir(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat, outside: Path) -> None:
    """OpenCode with external_directory = "allow" inside the sandbox: its write and bash
    tools land in the workdir only."""
    member = opencode_member("o", opencode_bin, chat, model="fake/text-model", vision=False,
                             **SANDBOXED)
    assert teamctl.run("launch", str(teamctl.write_team("e2e", [member]))).returncode == 0
    _writes_stay_inside(teamctl, "o", outside)


def test_real_claude_with_an_allowlist_reaches_its_api_through_the_proxy_only(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    """``network = "allowlist"``: the real Claude in an empty network namespace answers its
    turns (its fake API at 127.0.0.1:PORT, through the relay and its egress proxy); a command
    it runs is refused a host outside the list by the proxy (403, ``egress_denied`` logged)
    and cannot open a TCP connection out at all."""
    member = claude_member("c", claude_bin, anthropic, network="allowlist",
                           allow_hosts=["pypi.org"], sandbox_ro=[str(REPO / "fixtures")],
                           **SANDBOXED)
    assert teamctl.run("launch", str(teamctl.write_team("e2e", [member]))).returncode == 0
    assert "pong: through the proxy" in send_waited(teamctl, "c", "through the proxy")
    reply = send_waited(teamctl, "c", f"DO_BASH {escape_command('TRY proxy example.com:443')}")
    assert "try proxy example.com:443: ok HTTP/1.1 403" in reply, reply
    reply = send_waited(teamctl, "c", f"DO_BASH {escape_command('TRY tcp 1.1.1.1:443')}")
    assert "try tcp 1.1.1.1:443: refused ENETUNREACH" in reply, reply
    denied = [e for e in teamctl.log_events() if e.get("event") == "egress_denied"]
    assert [(e["member"], e["host"]) for e in denied] == [("c", "example.com")], denied


def test_real_codex_sandboxed_edit_and_read_run_commands(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses, outside: Path) -> None:
    """Codex's own bubblewrap cannot start inside ours ("setting up uid map: Operation not
    permitted": every command failed), so inside a sandbox ``edit`` and ``read`` run
    danger-full-access with teamctl's boundary deciding: ``edit`` writes and runs commands
    in its workdir and nowhere else; ``read`` runs commands but its workdir is read-only."""
    members = [codex_member(name, codex_bin, responses, sandbox="process", permissions=name)
               for name in ("edit", "read")]
    assert teamctl.run("launch", str(teamctl.write_team("e2e", members))).returncode == 0
    replies = _writes_stay_inside(teamctl, "edit", outside)
    assert "uid map" not in "".join(replies.values()), replies
    target = teamctl.workdir / "read.txt"
    reply = send_waited(teamctl, "read", f"DO_BASH echo ran-$((6 * 7)) && touch {target}")
    assert "ran-42" in reply and "Read-only file system" in reply, reply
    assert not target.exists()
