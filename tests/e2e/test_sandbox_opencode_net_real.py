"""The real OpenCode (opencode-ai 1.18.33) sandboxed with its network cut (``network = "off" |
"allowlist"``, docs/security.md "The network boundary"), against the fake chat API on this
machine's loopback: teamctl reaches its ``opencode serve`` through the relay's Unix socket;
OpenCode reaches its provider only through the member's egress proxy; anything else is
refused and shown in ``teamctl logs``; the member stops clean and starts again."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from tests.support.driver import REPO
from tests.support.processes import wait_pid_exit
from tests.support.real_members import opencode_member
from tests.support.sandboxed import SANDBOXED, escape_command, send_waited

if TYPE_CHECKING:
    from tests.support.driver import Teamctl
    from tests.support.fake_chat import FakeChat

pytestmark = pytest.mark.e2e


def _member(opencode_bin: Path, chat: FakeChat, network: str) -> dict[str, object]:
    api = urlsplit(chat.base_url).netloc  # 127.0.0.1:PORT
    extra: dict[str, object] = {"allow_hosts": [api]} if network == "allowlist" else {}
    return opencode_member("o", opencode_bin, chat, model="fake/text-model", vision=False,
                           network=network, sandbox_ro=[str(REPO / "fixtures")],
                           **SANDBOXED, **extra)


def _ready_inbound(teamctl: Teamctl) -> list[str]:
    return [e["inbound"] for e in teamctl.log_events()
            if e["event"] == "runtime_ready" and e.get("member") == "o"]


def _sandbox_pids(teamctl: Teamctl) -> list[int]:
    """The processes of ``o``'s launch (bubblewrap, the relay, OpenCode and its children),
    by the private data dir in their environment."""
    marker = (f"XDG_DATA_HOME={teamctl.home / 'members' / 'e2e' / 'o' / 'runtime' / 'xdg'}"
              f"/data").encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("network", ["off", "allowlist"])
def test_real_opencode_with_its_network_cut_answers_through_the_relay_and_its_proxy(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat, network: str) -> None:
    """The turn answers (teamctl → relay socket → ``opencode serve`` in the empty namespace;
    OpenCode → its proxy → the fake API); every API request went through the proxy (its
    allowed count covers them); a command's CONNECT to a host off the list is denied (403,
    ``egress_denied`` in ``teamctl logs``) and a direct TCP connection out is unreachable;
    after ``teamctl restart`` and after a stop and a new launch it answers again, and the
    stop leaves no process of the sandbox and no socket."""
    team = teamctl.write_team("e2e", [_member(opencode_bin, chat, network)])
    launched = teamctl.run("launch", str(team), timeout=180)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["sandbox"] == f"process, network {network}"

    assert "pong: hello through the relay" in send_waited(teamctl, "o", "hello through the relay")
    calls = len(chat.recorded("/chat/completions"))
    assert calls >= 1
    egress = teamctl.json("status")["teams"][0]["members"][0]["egress"]
    assert egress["allowed"] >= calls, (egress, calls)

    reply = send_waited(teamctl, "o", f"DO_BASH {escape_command('TRY proxy example.com:443')}")
    assert "try proxy example.com:443: ok HTTP/1.1 403" in reply, reply
    reply = send_waited(teamctl, "o", f"DO_BASH {escape_command('TRY tcp 1.1.1.1:443')}")
    assert "try tcp 1.1.1.1:443: refused ENETUNREACH" in reply, reply
    logs = teamctl.run("logs")
    assert logs.returncode == 0
    assert any("egress_denied" in line and "example.com" in line
               for line in logs.stdout.splitlines()), logs.stdout[-2000:]

    restarted = teamctl.run("restart", "o", timeout=180)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert "pong: after a restart" in send_waited(teamctl, "o", "after a restart")

    pids, [*_, inbound] = _sandbox_pids(teamctl), _ready_inbound(teamctl)
    assert pids and Path(inbound).exists()
    stopped = teamctl.run("stop", "e2e", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert all(wait_pid_exit(pid, 30.0) for pid in pids)
    assert not Path(inbound).exists() and not Path(inbound).parent.exists()

    assert teamctl.run("launch", str(team), timeout=180).returncode == 0
    assert "pong: launched again" in send_waited(teamctl, "o", "launched again")
