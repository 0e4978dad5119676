"""An OpenCode member in an empty network namespace (``network = "off"``, docs/security.md "The
network boundary"): a real daemon, the real bubblewrap, the fake ``opencode serve``. The daemon
reaches the server, on the sandbox's own loopback, through the relay's Unix socket (a 0700
directory bound in, the socket 0600); the member reaches nothing outside but its provider,
through its egress proxy. Its fake bash tool makes the escape attempts (fixtures/escape.py)
and writes their answers to a file of its workdir."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.contracts import TextPart, Turn
from runtimes.opencode.runtime import OpenCodeRuntime
from tests.support.driver import REPO
from tests.support.http_servers import api_servers
from tests.support.members import opencode_member
from tests.support.opencode_sandbox import sandbox_host, spec
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import Teamctl


def _member(tmp_path: Path, api: int, **extra: object) -> dict[str, object]:
    """``o``: the fake OpenCode, sandboxed with its network off, its provider's base URL the
    local fake API (the one host its proxy allows)."""
    (tmp_path / "o").mkdir(exist_ok=True)
    return opencode_member(
        "o", workdir=str(tmp_path / "o"), sandbox="process", permissions="full",
        network="off", sandbox_ro=[str(REPO / "fixtures")],
        config={"provider": {"openrouter": {"options": {
            "baseURL": f"http://127.0.0.1:{api}/v1"}}}}, **extra)


def _reply(teamctl: Teamctl, text: str) -> str:
    done = teamctl.run("send", "o", text, "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _tries(teamctl: Teamctl, workdir: Path, *steps: str) -> list[str]:
    """Each ``TRY`` step run by the member's bash tool inside its sandbox: the answers."""
    out = workdir / "tries.txt"
    code = (f"import sys; sys.path.insert(0, {str(REPO / 'fixtures')!r}); import escape; "
            f"print('\\n'.join(escape.attempt(s) for s in {list(steps)!r}))")
    reply = _reply(teamctl, f"BASH {shlex.join(['python3', '-c', code])} > {out}")
    assert "bash ran: exit 0" in reply, reply
    return out.read_text().splitlines()


def _member_processes(teamctl: Teamctl) -> dict[int, str]:
    """The processes of ``o``'s launch (bubblewrap, the relay, the server), by the private
    data dir in their environment: pid → command line."""
    marker = f"XDG_DATA_HOME={teamctl.home / 'members' / 'web' / 'o' / 'runtime' / 'xdg' / 'data'}"
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        if marker.encode() in environ:
            found[int(entry.name)] = cmdline
    return found


def _inbound(teamctl: Teamctl) -> list[str | None]:
    return [e.get("inbound") for e in teamctl.log_events()
            if e["event"] == "runtime_ready" and e.get("member") == "o"]


def test_a_sandboxed_opencode_with_network_off_answers_through_the_relays_socket(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``network = "off"``: the daemon's requests reach ``opencode serve`` through the
    relay's socket (a 0600 socket in a 0700 directory), a turn answers; from inside, a TCP
    connection to an outside host is unreachable, to this machine's loopback refused (the
    namespace's own is empty), and the proxy denies anything but the provider."""
    with api_servers() as (api, other):
        team = teamctl.write_team("web", [_member(tmp_path, api)])
        launched = teamctl.run("launch", str(team))
        assert launched.returncode == 0, launched.stdout + launched.stderr
        [row] = teamctl.json("status")["teams"][0]["members"]
        assert (row["readiness"], row["sandbox"]) == ("ready", "process, network off")
        [inbound] = _inbound(teamctl)
        assert inbound is not None
        socket = Path(inbound)
        assert stat.S_ISSOCK(socket.stat().st_mode)
        assert stat.S_IMODE(socket.stat().st_mode) == 0o600
        assert stat.S_IMODE(socket.parent.stat().st_mode) == 0o700
        assert _reply(teamctl, "hello").strip() == (
            "fake-opencode (openrouter/moonshotai/kimi-k2.6) received: hello")
        lines = _tries(teamctl, tmp_path / "o", "TRY tcp 1.1.1.1:443",
                       f"TRY tcp 127.0.0.1:{other}", f"TRY proxy 127.0.0.1:{other}",
                       f"TRY http http://127.0.0.1:{api}/v1/models")
        assert lines == [
            "try tcp 1.1.1.1:443: refused ENETUNREACH",
            f"try tcp 127.0.0.1:{other}: refused ECONNREFUSED",
            f"try proxy 127.0.0.1:{other}: ok HTTP/1.1 403 Forbidden",
            f"try http http://127.0.0.1:{api}/v1/models: ok 200 api on {api}"]
    denied = [(e["member"], e["host"], e["port"]) for e in teamctl.log_events()
              if e.get("event") == "egress_denied"]
    assert denied == [("o", "127.0.0.1", other)]


def test_a_sandboxed_opencode_with_network_off_stops_clean_and_restarts(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """Its relay and its server go with the member (no process of its launch is left) and so
    does the relay's socket and its directory; a restart (``teamctl restart``) makes a new
    socket and answers; so does a new launch after ``teamctl stop``, on the same session."""
    with api_servers() as (api, _other):
        team = teamctl.write_team("web", [_member(tmp_path, api)])
        assert teamctl.run("launch", str(team)).returncode == 0
        running = _member_processes(teamctl)
        assert any("--inbound" in line for line in running.values()), running
        assert any("opencode serve" in line for line in running.values()), running
        session = teamctl.json("status")["teams"][0]["members"][0]["session_id"]

        restarted = teamctl.run("restart", "o")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        for pid in running:
            assert wait_pid_exit(pid, 30.0), (pid, running[pid])
        assert "received: after a restart" in _reply(teamctl, "after a restart")
        first, second = _inbound(teamctl)
        assert first == second and second is not None and Path(second).exists()

        running = _member_processes(teamctl)
        stopped = teamctl.run("stop", "web")
        assert stopped.returncode == 0, stopped.stderr
        for pid in running:
            assert wait_pid_exit(pid, 30.0), (pid, running[pid])
        assert not Path(second).exists()
        assert not Path(second).parent.exists()

        assert teamctl.run("launch", str(team)).returncode == 0
        assert "received: again" in _reply(teamctl, "again")
        assert teamctl.json("status")["teams"][0]["members"][0]["session_id"] == session
        assert len(_inbound(teamctl)) == 3
    assert not os.path.exists(second)


@pytest.mark.anyio
async def test_a_stopped_sandboxed_opencode_leaves_no_socket_while_its_host_stays(
        tmp_path: Path) -> None:
    """The adapter alone on a sandbox with its network off: the server answers through the
    relay's socket; once it is stopped (a member's restart, or its end after a crash: its
    host stays open) the socket is gone — the relay, killed with the sandbox, could not
    remove it; the host's close removes the directory."""
    with sandbox_host(tmp_path, "off") as host, capture_logs() as logs:
        async with OpenCodeRuntime().open(spec(tmp_path, host)) as server:
            [ready] = [e for e in logs if e["event"] == "runtime_ready"]
            socket = anyio.Path(ready["inbound"])
            assert await socket.exists()
            result = await server.run_turn(Turn("m1", (TextPart("hello"),)), on_sent=_sent)
            assert "received: hello" in result.reply
        assert not await socket.exists()
        assert await socket.parent.is_dir()
        await host.close()
        assert not await socket.parent.exists()
        # the sandbox's processes die a moment after bubblewrap (killed by its death), and
        # their pipes with them: the daemon's loop reads those to their end later, this
        # test's loop ends now
        await server._process.aclose()


async def _sent() -> None:
    pass


