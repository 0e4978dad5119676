"""The daemon and the composition root: the only module that wires runtimes, supervisor,
mailbox, journal and control server together.

Start-up: take an exclusive lock on ``daemon.pid`` (a second daemon on the same home refuses to
start), write the pid, open the journal and put deliveries left in flight back in the queue,
bind ``teamctl.sock`` (0600, in the 0700 home), launch again the teams that should run, then
announce readiness (a line on stdout, and on ``notify_fd`` for ``teamctl launch``). SIGTERM,
SIGINT and ``teamctl stop`` stop members in reverse start order, then the daemon exits 0.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import resource
import signal
import sys
from contextlib import ExitStack, suppress
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
import structlog

from orchestrator.daemon import orphans, stdio
from orchestrator.daemon.api import ControlServer
from orchestrator.daemon.approvals import Approvals
from orchestrator.daemon.board_api import BoardApi
from orchestrator.daemon.board_members import MemberBoardApi
from orchestrator.daemon.connections import ControlSocket
from orchestrator.daemon.core import build_core
from orchestrator.daemon.live_view import LazyLiveView
from orchestrator.daemon.member_dirs import private_dirs
from orchestrator.daemon.member_sockets import MemberSockets
from orchestrator.daemon.notify import NotifyService, check_can_start
from orchestrator.daemon.notify_api import NotifyApi
from orchestrator.daemon.store import AsyncStore, Store
from orchestrator.daemon.web.settings import WebSettings
from orchestrator.daemon.worktrees import PlacedWorktrees, sandbox_view
from orchestrator.diagnostics import LOG_FILE_NAME, configure
from orchestrator.errors import DaemonAlreadyRunning, JournalMissing, TeamctlError
from orchestrator.paths import Home, ensure_private_dir
from runtimes.git_view import GitViewSandbox
from runtimes.local_host import LocalHost
from runtimes.registry import default_describers, default_runtimes

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from anyio.abc import TaskGroup, TaskStatus

    from orchestrator.config import MemberConfig, TeamConfig
    from orchestrator.contracts import Host, ImageDescriber
    from orchestrator.daemon.egress_proxies import EgressProxies
    from orchestrator.daemon.web.server import WebServer
    from orchestrator.ports import Runtime
    from orchestrator.wire import EgressStatus
    from runtimes.sandbox_plan import NetworkPlan, SandboxPolicy

__all__ = ["Daemon", "main"]

log = structlog.get_logger("teamctl.daemon")


def _take_lock(home: Home) -> TextIO:
    """Hold an exclusive flock on the pid file for the daemon's life; write our pid."""
    fd = os.open(home.pid_file, os.O_RDWR | os.O_CREAT, 0o600)
    handle = os.fdopen(fd, "r+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = handle.read().strip()
        handle.close()
        raise DaemonAlreadyRunning(str(home.root), int(text) if text.isdigit() else None) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


# the daemon's worker threads at most (anyio's default: 40)
WORKER_THREADS = 8


def _watch_children_without_threads() -> None:
    """Python 3.11's asyncio reaps each child process on a thread of its own, blocked in
    ``waitpid`` (ThreadedChildWatcher): one thread per member, its stack and state resident —
    ~40 KiB each, 4 MiB of a 100-member daemon's RSS. A pidfd (Linux 5.3+) is polled by
    the event loop instead, as 3.12 does by default; where it is missing, 3.11's default
    stays."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    import asyncio

    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel or seccomp policy without pidfd_open
        return
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)


def _raise_fd_limit() -> None:
    """File descriptors up to the hard limit: connections and member pipes share them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        with suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, 65536), hard))


def check_journal(home: Home) -> None:
    """Refuse a missing or empty ``state.db`` beside a home that was used before (member
    state or artifacts exist): replacing it silently would forget every queued message."""
    path = home.database
    try:
        size: int | None = path.stat().st_size
    except FileNotFoundError:
        size = None
    if size:
        return
    used = [d for d in (home.root / "members", home.artifacts)
            if d.is_dir() and any(d.iterdir())]
    if used:
        raise JournalMissing(str(path), str(home.root), "missing" if size is None else "empty")


class Daemon:
    def __init__(self, home: Home, runtimes: Mapping[str, Runtime] | None = None, *,
                 describers: Mapping[str, ImageDescriber] | None = None,
                 max_connections: int = 256, idle_timeout: float = 30.0) -> None:
        self.home = home
        self._runtimes = runtimes or default_runtimes()
        self._describers = default_describers() if describers is None else describers
        self._shutdown = anyio.Event()
        self._max_connections = max_connections
        self._idle_timeout = idle_timeout
        self._local = LocalHost()
        self._placed = PlacedWorktrees()  # each launch's worktrees: a sandboxed member's view
        self._member_sockets: MemberSockets | None = None
        self._egress: EgressProxies | None = None  # made for the first member that needs one
        self._egress_tg: TaskGroup | None = None

    def _host(self, team: TeamConfig, member: MemberConfig) -> Host:
        """The member's host, inside a bubblewrap sandbox where the team file asks for one
        (``sandbox = "process"``: runtimes/sandbox_host.py) — on its SSH host, bubblewrap
        runs there: the policy names the host's paths (its workdir there, ``~`` its home,
        teamctl's state there and the other members' workdirs on that host concealed)."""
        host = self._base_host(team, member)
        if team.member_sandbox(member) == "none" or self._member_sockets is None:
            return host
        # loaded for sandboxed members only, like the Kubernetes and SSH hosts: a daemon of
        # local members does not carry them (~2 MiB of its resident memory with SSH's)
        from runtimes.sandbox_host import REMOTE_STATE, SandboxHost, member_policy

        member_dir = self.home.member_dir(team.name, member.name)
        with contextlib.suppress(OSError):  # else its start fails, typed (launch.py)
            private_dirs(member_dir)  # an older layout's leftovers cleared before any use
        mcp_home = Home(self._member_sockets.directory(team.name, member.name, member_dir))
        self._member_sockets.ensure(team.name, member.name, mcp_home.socket)
        there = team.member_host(member) is not None
        policy = member_policy(
            workdir=Path(team.remote_workdir(member) or "~") if there
            else team.member_workdir(member), private=member_dir,
            state_root=REMOTE_STATE[0] if there else self.home.root,
            others=[*REMOTE_STATE[1:], *(Path(team.remote_workdir(m) or "~")
                                        for m in team.members
                                        if m.host == member.host and m is not member)]
            if there else team.other_workdirs(member),
            paths=team.member_sandbox_paths(member), runtime=member.runtime,
            login=team.member_login(member), home=Path("~") if there else None,
            permissions=team.member_permissions(member))
        policy = self._in_worktree(team, member, policy)
        network, on_close = self._network(team, member)
        return SandboxHost(host, member.name, policy, mcp_home.root,
                           bwrap=os.environ.get("TEAMCTL_BWRAP") or "bwrap",
                           network=network, on_close=on_close)

    def _in_worktree(self, team: TeamConfig, member: MemberConfig,
                     policy: SandboxPolicy) -> SandboxPolicy:
        """A worktree member's sandbox: its worktree as its workdir, the operator's checkout
        concealed, and what git needs of the repository bound in
        (orchestrator/daemon/worktrees/_sandbox.py)."""
        tree = self._placed.get(team.name, member.name)
        if tree is None:
            return policy
        view = sandbox_view(tree, team.member_workdir(member),
                            writable=policy.workdir_writable)
        return replace(policy, workdir=view.workdir, conceal=(*policy.conceal, *view.conceal),
                       git=view.binds)

    def _network(self, team: TeamConfig, member: MemberConfig
                 ) -> tuple[NetworkPlan, Callable[[], Awaitable[None]] | None]:
        """A sandboxed member's network: the host's (``on``), or an empty namespace whose
        only way out is its egress proxy, allowing its provider's hosts (``off``) and
        ``allow_hosts`` or the defaults (``allowlist``); the proxy closes with the host."""
        from runtimes.sandbox_network import default_hosts, network_plan, provider_hosts
        from runtimes.sandbox_plan import NETWORK_ON

        mode = team.member_network(member)
        if mode == "on" or self._egress_tg is None:
            return NETWORK_ON, None
        if self._egress is None:
            from orchestrator.daemon.egress_proxies import EgressProxies

            self._egress = EgressProxies(self._egress_tg, self.home.root)
        env = {**{k: os.environ[k] for k in member.pass_env if k in os.environ}, **member.env}
        entries = provider_hosts(member.runtime, env, member.config)
        if mode == "allowlist":
            entries += (team.member_allow_hosts(member)
                        or default_hosts(Path(team.member_workdir(member)),
                                         # the checkout's config is read-only to a worktree
                                         # member only: the member's own choice otherwise
                                         from_git=team.member_worktree(member)))
        socket = self._egress.ensure(team.name, member.name, entries)
        return (network_plan(mode, socket, entries),
                functools.partial(self._egress.close, team.name, member.name))

    def _egress_status(self, team: str, member: str) -> EgressStatus | None:
        return None if self._egress is None else self._egress.status(team, member)

    def _base_host(self, team: TeamConfig, member: MemberConfig) -> Host:
        """A member's host: this machine's (runtimes/local_host.py), or the SSH host the team
        file names (runtimes/ssh.py) — one per member, sharing the host's ControlMaster with
        the team's other members there. A new kind of host is one more class, chosen here."""
        pod = team.member_kubernetes(member)
        if pod is not None:  # runtimes/kube_host.py: the client is loaded for such members only
            from runtimes.kube_host import kubernetes_host

            member_dir = self.home.member_dir(team.name, member.name)
            sockets = self._member_sockets  # its MCP tools: its own socket, not the control one
            mcp = None if sockets is None or not member.messaging else sockets.ensure(
                team.name, member.name,
                Home(sockets.directory(team.name, member.name, member_dir)).socket)
            return kubernetes_host(team.name, member.name, *pod, member_dir, mcp_socket=mcp,
                                   home=orphans.home_id(self.home.root))
        found = team.member_host(member)
        if found is None:
            return self._local
        from runtimes.ssh import SshHost, SshTarget
        from runtimes.ssh import control_dir as ssh_control_dir

        name, host = found
        return SshHost(SshTarget(name, host.address, host.user, host.port, host.identity_file,
                                 tuple(host.ssh_options)),
                       ssh_control_dir(self.home.root),
                       hashlib.sha256(str(self.home.root).encode()).hexdigest()[:10],
                       team.name, member.name, self.home.member_dir(team.name, member.name))

    def request_shutdown(self) -> None:
        self._shutdown.set()

    async def run(self, *, notify_fd: int | None = None) -> None:
        self.home.prepare()
        _watch_children_without_threads()
        # a hundred members started at once each check their workdir and login on a worker
        # thread: anyio's pool would grow to its 40 threads, each resident until pruned (~3
        # MiB of a 100-member daemon); the journal's writer needs one, look-ups a few
        anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
        _raise_fd_limit()
        web_settings = WebSettings.from_env()  # a malformed one: refused before anything runs
        out_bytes = stdio.max_out_bytes()
        with ExitStack() as stack:
            stack.enter_context(stdio.bounded_stdio(self.home.logs / "daemon.out", out_bytes))
            stack.enter_context(_take_lock(self.home))
            check_journal(self.home)
            stack.enter_context(configure(self.home.logs))
            reaped = orphans.reap_orphans(self.home.root / "members")
            if reaped:
                log.warning("orphans_stopped", pids=reaped)
            store = Store(self.home.database)
            stack.callback(store.close)
            for message_id, member, state in store.recover_in_flight():
                log.warning("delivery_recovered", message_id=message_id, member=member,
                            state=state)
            Approvals.recover(store)
            await self._serve(AsyncStore(store), notify_fd, web_settings)
            log.info("daemon_stopped", pid=os.getpid())

    async def _serve(self, store: AsyncStore, notify_fd: int | None,
                     web_settings: WebSettings) -> None:
        async with anyio.create_task_group() as tg:
            self._member_sockets = MemberSockets(tg, idle_timeout=self._idle_timeout)
            self._egress_tg = tg
            core = await build_core(self.home, store, tg, runtimes=self._runtimes,
                                    describers=self._describers, hosts=self._host,
                                    local_host=self._local, placed=self._placed,
                                    git_views=GitViewSandbox(
                                        os.environ.get("TEAMCTL_BWRAP") or "bwrap"),
                                    launch_checks=[self._notify_can_start])
            teams, approvals = core.teams, core.approvals
            teams.egress_of = self._egress_status
            uploads = ensure_private_dir(self.home.root / "uploads")

            def live_view() -> WebServer:
                from orchestrator.daemon.web.app import View
                from orchestrator.daemon.web.server import WebServer

                return WebServer(View(teams, store, approvals, core.changes, core.artifacts,
                                      self.home.logs / LOG_FILE_NAME, uploads,
                                      board=core.board), tg, web_settings)

            web = LazyLiveView(core.changes, live_view)
            notify = NotifyService(self.home, teams=teams, approvals=approvals,
                                   board=core.board, store=store, changes=core.changes)
            server = ControlServer(teams, on_stop_all=self.request_shutdown, router=core.router,
                                   approvals=approvals, web=web,
                                   board=BoardApi(core.board, teams, core.supervisor),
                                   member_board=MemberBoardApi(core.board, teams,
                                                               core.supervisor),
                                   more_methods=NotifyApi(notify).methods())
            self._member_sockets.handler = server.handle_member_connection
            control = ControlSocket(self.home.socket, server.handle_connection,
                                    max_connections=self._max_connections,
                                    idle_timeout=self._idle_timeout)
            serving = anyio.CancelScope()

            async def serve(*, task_status: TaskStatus[None]) -> None:
                with serving:
                    await control.run(task_status=task_status)

            await tg.start(serve, name="control server")
            tg.start_soon(self._watch_signals, name="signals")
            tg.start_soon(notify.run, name="notify")  # docs/notify.md
            await teams.resume_desired()
            tg.start_soon(self._reap_pods, store, name="kubernetes orphans")
            await core.router.route_owed_replies()
            self._announce_ready(notify_fd)
            await self._shutdown.wait()
            log.info("daemon_stopping")
            with anyio.CancelScope(shield=True):
                await teams.shutdown()
                serving.cancel()
                self.home.socket.unlink(missing_ok=True)
            tg.cancel_scope.cancel()

    async def _reap_pods(self, store: AsyncStore) -> None:
        """This home's Kubernetes objects that no wanted member owns, let go of once the
        wanted teams are resumed (orchestrator/daemon/orphans.py); no cluster, no call."""
        records = await store.teams()
        if not any(record.config.get("kubernetes_hosts") for record in records):
            return

        async def wanted() -> set[tuple[str, str]]:
            return {(record.name, str(member.get("name")))
                    for record in await store.teams(desired="running")
                    for member in record.config.get("members", [])}

        try:
            from runtimes.kube_host import kubernetes_host  # loaded for pod teams only

            reaped = await orphans.reap_pod_orphans(records, orphans.home_id(self.home.root),
                                                    self.home.root / "members", wanted=wanted,
                                                    pods=kubernetes_host)
        except Exception as exc:  # housekeeping: never the daemon's end; the next start retries
            log.error("kube_orphans_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return
        log.info("kube_orphans_swept", reaped=reaped)

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("daemon_signal", signal=signal.Signals(signum).name)
                self.request_shutdown()

    def _notify_can_start(self, config: TeamConfig) -> None:
        """A launch whose ``[notify]`` could not start is refused (docs/notify.md)."""
        if config.notify is not None:
            check_can_start(self.home, config.notify)

    def _announce_ready(self, notify_fd: int | None) -> None:
        log.info("daemon_ready", pid=os.getpid(), socket=str(self.home.socket))
        sys.stdout.write(f"teamctl daemon ready pid={os.getpid()} socket={self.home.socket}\n")
        sys.stdout.flush()
        if notify_fd is not None:
            try:
                os.write(notify_fd, b"ready\n")
                os.close(notify_fd)
            except OSError:
                pass


def main(home: Home, *, notify_fd: int | None = None) -> int:
    """Run the daemon in the foreground until stopped; the process exit status."""
    try:
        anyio.run(lambda: Daemon(home).run(notify_fd=notify_fd))
    except TeamctlError as exc:
        sys.stderr.write(f"teamctl daemon: {exc.message}\n")
        return exc.exit_code
    return 0
