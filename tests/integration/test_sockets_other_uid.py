"""No socket answers another uid (docs/security.md; issue 44 item 9): a real second local uid
(a throwaway user; the tests run as root) against every Unix socket teamctl makes — the
control socket, a sandboxed member's own socket, its egress proxy's, the OpenCode relay's
inbound socket in a real bubblewrap sandbox, a pod's MCP socket (kube_mux's pod side, run here)
— and the PDF fork server's, which has no name at all.

Each socket is tried twice. As teamctl made it (every directory above the socket's own made
passable), the kernel refuses the other uid's ``connect`` (EACCES): the modes hold. Then with
the socket 0666 in a 0777 directory — only the server's SO_PEERCRED check left — the other
uid connects, sends a request the operator's uid gets an answer to, and reads nothing before
the server closes; the refusal is logged (an event naming the uid, or the relay's stderr line).
That second half proves the peer check, not the mode."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.attachments import pdf
from orchestrator.attachments.pdf import PdfLimits, read_pdf
from orchestrator.attachments.pdf_forkserver import ForkServer
from orchestrator.contracts import TextPart, Turn
from runtimes.hosts.kubernetes import mux as kube_mux
from runtimes.opencode.runtime import OpenCodeRuntime
from tests.support import pdfs
from tests.support.driver import REPO, socket_exchange
from tests.support.members import fake_member
from tests.support.opencode_sandbox import sandbox_host, spec
from tests.support.other_uid import (
    OtherUser,
    connect_as,
    open_to_everyone,
    other_user,
    passable_above,
    run_as,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import LogFollower, Teamctl

PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'
CONNECT = b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n"


@pytest.fixture
def user() -> Iterator[OtherUser]:
    with other_user() as made:
        yield made


def refused_by_modes_then_by_peer_check(user: OtherUser, path: Path, payload: bytes) -> None:
    """The two halves of the module's doc, for the socket at ``path``."""
    passable_above(path.parent)
    assert connect_as(user, path, payload).refused == "EACCES", "the modes stop it first"
    open_to_everyone(path)
    probe = connect_as(user, path, payload)
    assert probe.refused is None, "the modes let it in: only the peer check is left"
    assert (probe.answer, probe.closed) == (b"", True), "closed with nothing answered"


def _launch_sandboxed(teamctl: Teamctl, tmp_path: Path) -> None:
    """``a``: a fake Claude in bubblewrap with its network off (its own socket and an egress
    proxy)."""
    (tmp_path / "a").mkdir()
    path = teamctl.write_team("web", [
        fake_member("a", workdir=str(tmp_path / "a"), sandbox="process", permissions="full",
                    network="off", sandbox_ro=[str(REPO / "fixtures")])])
    done = teamctl.run("launch", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def _served(teamctl: Teamctl, event: str) -> Path:
    [path] = [e["socket"] for e in teamctl.log_events() if e["event"] == event]
    return Path(path)


def test_the_control_socket_refuses_another_uid_by_its_peer_credentials(
        teamctl: Teamctl, follow_logs: LogFollower, user: OtherUser) -> None:
    """The operator's control socket (0600 in the 0700 home): another uid is stopped by the
    modes, and with both opened to everyone, by the peer check — before a byte is read and
    before it takes a connection slot — logged as ``socket_peer_refused`` with its uid."""
    path = teamctl.home / "teamctl.sock"
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))
                       ).returncode == 0
    assert b'"result"' in socket_exchange(path, PING), "the operator's uid is answered"
    refused_by_modes_then_by_peer_check(user, path, PING)
    event = follow_logs.wait_for(lambda e: e["event"] == "socket_peer_refused")
    assert (event["peer_uid"], event["socket"]) == (user.uid, str(path))
    assert teamctl.run("status").returncode == 0, "the daemon answers its operator"


def test_a_sandboxed_members_own_socket_refuses_another_uid_even_with_its_token(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path, user: OtherUser) -> None:
    """A sandboxed member's own socket (``member_sockets.py``): the member's token in the
    request makes no difference — another uid's connection is closed unread, logged."""
    _launch_sandboxed(teamctl, tmp_path)
    path = _served(teamctl, "member_socket_serving")
    [config] = list((teamctl.home / "members").rglob("mcp.json"))
    token = json.loads(config.read_text())["mcpServers"]["teamctl"]["env"][
        "TEAMCTL_MEMBER_TOKEN"]
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "member.list_team",
                       "params": {"token": token}}).encode() + b"\n"
    assert b'"jsonrpc"' in socket_exchange(path, call), "the daemon's uid gets an answer"
    refused_by_modes_then_by_peer_check(user, path, call)
    event = follow_logs.wait_for(lambda e: e["event"] == "socket_peer_refused")
    assert (event["peer_uid"], event["socket"]) == (user.uid, str(path))
    assert teamctl.run("status").returncode == 0, "the daemon answers its operator"


def test_a_members_egress_proxy_refuses_another_uid_before_reading_its_request(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path, user: OtherUser) -> None:
    """The member's egress proxy (``egress.py``): the operator's uid gets the policy's 403 for
    a CONNECT; another uid gets nothing — not even a "busy" — logged as
    ``egress_peer_refused`` with the member and the uid."""
    _launch_sandboxed(teamctl, tmp_path)
    path = _served(teamctl, "egress_proxy_serving")
    assert socket_exchange(path, CONNECT).startswith(b"HTTP/1.1 403 ")
    refused_by_modes_then_by_peer_check(user, path, CONNECT)
    event = follow_logs.wait_for(lambda e: e["event"] == "egress_peer_refused")
    assert (event["peer_uid"], event["member"], event["refused"]) == (user.uid, "a", 1)
    denied = [e for e in teamctl.log_events() if e["event"] == "egress_denied"]
    assert len(denied) == 1, "only the operator's CONNECT reached the policy"


@pytest.mark.anyio
async def test_the_opencode_relays_inbound_socket_refuses_another_uid(
        tmp_path: Path, user: OtherUser) -> None:
    """The relay's ``--inbound`` socket (``sandbox_relay.py``, in a real bubblewrap sandbox
    with its network off): the daemon's requests reach ``opencode serve`` through it; another
    uid's request reaches nothing, and the relay says so once on its stderr (the runtime's,
    which the daemon keeps)."""
    request = b"GET /session HTTP/1.1\r\nHost: opencode\r\n\r\n"
    with sandbox_host(tmp_path, "off") as host, capture_logs() as logs:
        async with OpenCodeRuntime().open(spec(tmp_path, host)) as server:
            [ready] = [e for e in logs if e["event"] == "runtime_ready"]
            path = Path(ready["inbound"])
            said = _on_stderr(server, "sandbox_relay: refused a connection from uid")
            await anyio.to_thread.run_sync(refused_by_modes_then_by_peer_check, user, path,
                                           request)
            with anyio.fail_after(20):
                await said.wait()
            result = await server.run_turn(Turn("m1", (TextPart("hello"),)), on_sent=_sent)
            assert "received: hello" in result.reply, "the daemon's own requests pass"
        await host.close()
        await server._process.aclose()


async def _sent() -> None:
    pass


def _on_stderr(server: Any, needle: str) -> anyio.Event:
    """An event set once a line of the runtime's stderr (its ring, as the adapter keeps it)
    holds ``needle``."""
    said, ring = anyio.Event(), server._ring
    feed = ring.feed

    def watching(chunk: bytes) -> None:
        feed(chunk)
        if any(needle in line for line in ring.tail()):
            said.set()

    ring.feed = watching
    return said


def _frame(stdout: Any, timeout: float = 20.0) -> tuple[int, int, bytes]:
    """The next frame on kube_mux's stdout (unbuffered: ``select`` sees all), within
    ``timeout``."""
    ready, _, _ = select.select([stdout], [], [], timeout)
    assert ready, "no frame in time"
    header = kube_mux._read_exact(stdout, kube_mux._HEADER.size)
    assert header is not None, "kube_mux ended"
    connection, kind, size = kube_mux._HEADER.unpack(header)
    return connection, kind, kube_mux._read_exact(stdout, size) or b""


def test_a_pods_mcp_socket_refuses_another_uid_and_opens_no_connection_for_it(
        tmp_path: Path, user: OtherUser) -> None:
    """The pod's side of the MCP stream (``kube_mux listen``, the file's own text as the pod
    runs it, run here): another uid's connection is closed unread and is never opened on the
    stream — the operator's next connection is connection 1 — and the refusal is said once
    on stderr."""
    path = tmp_path / "mcp" / "teamctl.sock"
    mux = subprocess.Popen([sys.executable, "-I", str(Path(kube_mux.__file__)),
                            "listen", str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, bufsize=0)
    try:
        assert mux.stdout is not None and mux.stdin is not None
        assert _frame(mux.stdout)[1] == kube_mux.READY
        refused_by_modes_then_by_peer_check(user, path, PING)
        with socket.socket(socket.AF_UNIX) as own:
            own.connect(str(path))
            assert _frame(mux.stdout)[:2] == (1, kube_mux.OPEN), "the refused one never opened"
    finally:
        _, stderr = mux.communicate(timeout=20)  # its stdin closed: it ends
    assert stderr.decode().count(f"teamctl-kube: refused a connection from uid {user.uid}") == 1


def _open_fd0(pid: int) -> bytes:
    """What opening ``pid``'s fd 0 through /proc gives (run as the other uid)."""
    try:
        os.close(os.open(f"/proc/{pid}/fd/0", os.O_RDWR))
    except OSError as exc:
        return type(exc).__name__.encode()
    return b"opened"


def _unix_names() -> dict[str, str]:
    """Every Unix socket of this machine by inode: its path ('' unnamed, '@…' abstract)."""
    lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    return {fields[6]: (fields[7] if len(fields) > 7 else "")
            for fields in (line.split() for line in lines)}


def test_the_pdf_fork_servers_socket_has_no_name_another_uid_could_reach(
        user: OtherUser, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PDF fork server's wire is a ``socketpair`` (its stdin): no path, no abstract name,
    so nothing can ``connect`` to it; its only ends are the daemon's descriptor and the
    server's fd 0, and another uid cannot open ``/proc/<server>/fd/0``."""
    monkeypatch.delenv("TEAMCTL_PDF_FORKSERVER", raising=False)
    own = ForkServer([sys.executable, "-E", "-s", "-m", "orchestrator.attachments.pdf_forkserver"],
                     pdf._PACKAGE_ROOT, pdf._worker_env())
    monkeypatch.setattr(pdf, "FORK_SERVER", own)
    try:
        read_pdf(pdfs.shapes_pdf(1), "a.pdf", PdfLimits(render_pages=1))
        pid = own.pid
        assert pid is not None
        link = os.readlink(f"/proc/{pid}/fd/0")
        assert link.startswith("socket:[")
        assert _unix_names()[link[8:-1]] == "", "unnamed: neither a path nor an abstract name"
        assert run_as(user, lambda: _open_fd0(pid)) == b"PermissionError"
    finally:
        own.close()
