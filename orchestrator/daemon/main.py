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
import os
import resource
import signal
import sys
import time
from contextlib import ExitStack, suppress
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
import structlog

from orchestrator.daemon import heap, stdio
from orchestrator.daemon.approvals import Approvals
from orchestrator.daemon.board import BoardApi, MemberBoardApi
from orchestrator.daemon.control import ControlServer, ControlSocket, MemberSockets
from orchestrator.daemon.core import build_core
from orchestrator.daemon.land import LandApi
from orchestrator.daemon.live_view import LazyLiveView
from orchestrator.daemon.members import home_id, private_dirs, reap_orphans, reap_pod_orphans
from orchestrator.daemon.migrations import open_journal
from orchestrator.daemon.notify import NotifyApi, NotifyService, check_can_start
from orchestrator.daemon.queue import AsyncStore
from orchestrator.daemon.quota import QuotaApi
from orchestrator.daemon.telemetry import TraceApi, TraceJournal
from orchestrator.daemon.web.settings import WebSettings
from orchestrator.daemon.worktrees import PlacedWorktrees, sandbox_view
from orchestrator.diagnostics import LOG_FILE_NAME, configure
from orchestrator.errors import DaemonAlreadyRunning, JournalMissing, TeamctlError
from orchestrator.paths import Home, ensure_private_dir
from runtimes import hosts
from runtimes.hosts.local.host import LocalHost
from runtimes.hosts.sandbox.git_view import GitViewSandbox
from runtimes.registry import default_describers, default_runtimes

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from anyio.abc import TaskGroup, TaskStatus

    from orchestrator.config import MemberConfig, TeamConfig
    from orchestrator.contracts import Host, ImageDescriber
    from orchestrator.daemon.egress import EgressProxies
    from orchestrator.daemon.web.server import WebServer
    from orchestrator.ports import Runtime
    from orchestrator.protocol.teams import EgressStatus
    from runtimes.hosts.sandbox.plan import NetworkPlan, SandboxPolicy

__all__ = ["Daemon", "main"]

_TELEMETRY_CLOSE_TIMEOUT = 5.0  # seconds each exporter may take to send what is queued
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
        """The member's host, built by the hosts wing in one call (runtimes/hosts/): its
        kind's (this machine, the SSH host or the pod the team file names), inside a
        bubblewrap sandbox where the team file asks for one (``sandbox = "process"``)."""
        return hosts.build(self._host_request(team, member))

    def _bare_host(self, team: TeamConfig, member: MemberConfig) -> Host:
        """The member's host without its sandbox (no socket, no egress proxy made): what a
        launch check asks (a ceiling on an SSH host: a cgroup made there and removed)."""
        return hosts.build(self._host_request(team, member, sandboxed=False))

    def _host_request(self, team: TeamConfig, member: MemberConfig, *,
                      sandboxed: bool = True) -> hosts.HostRequest:
        """What the team file says of the member's host, for ``hosts.build`` (without its
        sandbox unless ``sandboxed``)."""
        resolved = team.resolved(member)
        found = resolved.kubernetes or resolved.ssh_host
        name, settings = found or (None, None)
        sockets = self._member_sockets
        return hosts.HostRequest(
            team.name, member.name, self.home.member_dir(team.name, member.name),
            self.home.root, kind="local" if settings is None else settings.kind, name=name,
            settings=settings, messaging=member.messaging,
            mcp_socket=None if sockets is None else functools.partial(
                self._mcp_socket, team.name, member.name),
            home_id=functools.partial(home_id, self.home.root),
            sandbox=None if resolved.sandbox == "none" or sockets is None or not sandboxed
            else self._sandbox_request(team, member), ceiling=resolved.ceiling)

    def _mcp_socket(self, team: str, member: str) -> Path:
        """The member's own MCP socket (not the control one), listening once asked for."""
        assert self._member_sockets is not None
        directory = self._member_sockets.directory(team, member,
                                                   self.home.member_dir(team, member))
        return self._member_sockets.ensure(team, member, Home(directory).socket)

    def _sandbox_request(self, team: TeamConfig, member: MemberConfig) -> hosts.SandboxRequest:
        """A sandboxed member's boundary as the team file says it: on its SSH host, bubblewrap
        runs there and the paths are the host's (its workdir there, the other members' there)."""
        with contextlib.suppress(OSError):  # else its start fails, typed (launch.py)
            private_dirs(self.home.member_dir(team.name, member.name))  # old layouts cleared
        resolved = team.resolved(member)
        there = resolved.ssh_host is not None
        return hosts.SandboxRequest(
            workdir=Path(resolved.remote_workdir or "~") if there else resolved.workdir,
            others=[Path(team.resolved(m).remote_workdir or "~") for m in team.members
                    if m.host == member.host and m is not member]
            if there else resolved.other_workdirs,
            paths=resolved.sandbox_paths, runtime=member.runtime,
            login=resolved.login, permissions=resolved.permissions,
            bwrap=os.environ.get("TEAMCTL_BWRAP") or "bwrap",
            refine=functools.partial(self._in_worktree, team, member),
            network=functools.partial(self._network, team, member))

    def _in_worktree(self, team: TeamConfig, member: MemberConfig,
                     policy: SandboxPolicy) -> SandboxPolicy:
        """A worktree member's sandbox: its worktree as its workdir, the operator's checkout
        concealed, and what git needs of the repository bound in
        (orchestrator/daemon/worktrees/_sandbox.py)."""
        tree = self._placed.get(team.name, member.name)
        if tree is None:
            return policy
        view = sandbox_view(tree, team.resolved(member).workdir,
                            writable=policy.workdir_writable)
        return replace(policy, workdir=view.workdir, conceal=(*policy.conceal, *view.conceal),
                       git=view.binds)

    def _network(self, team: TeamConfig, member: MemberConfig
                 ) -> tuple[NetworkPlan, Callable[[], Awaitable[None]] | None]:
        """A sandboxed member's network: the host's (``on``), or an empty namespace whose
        only way out is its egress proxy, allowing its provider's hosts (``off``) and
        ``allow_hosts`` or the defaults (``allowlist``); the proxy closes with the host."""
        from runtimes.hosts.sandbox.network import default_hosts, network_plan, provider_hosts
        from runtimes.hosts.sandbox.plan import NETWORK_ON

        mode = team.resolved(member).network
        if mode == "on" or self._egress_tg is None:
            return NETWORK_ON, None
        if self._egress is None:
            from orchestrator.daemon.egress import EgressProxies

            self._egress = EgressProxies(self._egress_tg, self.home.root)
        env = {**{k: os.environ[k] for k in member.pass_env if k in os.environ}, **member.env}
        entries = provider_hosts(member.runtime, env, member.config)
        if mode == "allowlist":
            entries += (team.resolved(member).allow_hosts
                        or default_hosts(Path(team.resolved(member).workdir),
                                         # the checkout's config is read-only to a worktree
                                         # member only: the member's own choice otherwise
                                         from_git=team.resolved(member).worktree))
        socket = self._egress.ensure(team.name, member.name, entries)
        return (network_plan(mode, socket, entries),
                functools.partial(self._egress.close, team.name, member.name))

    def _egress_status(self, team: str, member: str) -> EgressStatus | None:
        return None if self._egress is None else self._egress.status(team, member)

    def request_shutdown(self) -> None:
        self._shutdown.set()

    async def run(self, *, notify_fd: int | None = None) -> None:
        self.home.prepare()
        heap.cap_arenas()  # before any thread allocates (orchestrator/daemon/heap.py)
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
            reaped = reap_orphans(self.home.root / "members")
            if reaped:
                log.warning("orphans_stopped", pids=reaped)
            store = open_journal(self.home.database)
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
            # a member's socket is served by the control server, built below with the core
            # the hosts need these sockets for (late-bound: no connection comes before)
            self._member_sockets = MemberSockets(
                tg, idle_timeout=self._idle_timeout,
                handler=lambda connection, team, member: server.handle_member_connection(
                    connection, team, member))
            self._egress_tg = tg
            core = await build_core(self.home, store, tg, runtimes=self._runtimes,
                                    describers=self._describers, hosts=self._host,
                                    local_host=self._local, placed=self._placed,
                                    git_views=GitViewSandbox(
                                        os.environ.get("TEAMCTL_BWRAP") or "bwrap"),
                                    launch_checks=[self._notify_can_start],
                                    bare_hosts=self._bare_host,
                                    egress_of=self._egress_status)
            teams, approvals = core.teams, core.approvals
            uploads = ensure_private_dir(self.home.root / "uploads")

            quota_api = QuotaApi(core.ledger.quota, running=teams.running,
                                 resolve=teams.resolve, clock=time.time)

            def live_view() -> WebServer:
                from orchestrator.daemon.web.app import View
                from orchestrator.daemon.web.server import WebServer

                return WebServer(View(teams, store, approvals, core.changes, core.artifacts,
                                      self.home.logs / LOG_FILE_NAME, uploads,
                                      board=core.board, land=core.land,
                                      accounts=quota_api.document), tg, web_settings)

            web = LazyLiveView(core.changes, live_view)
            notify = NotifyService(self.home, teams=teams, approvals=approvals,
                                   board=core.board, store=store, changes=core.changes,
                                   land=core.land, pulls=core.forges)
            server = ControlServer(teams, on_stop_all=self.request_shutdown, router=core.router,
                                   approvals=approvals, web=web,
                                   board=BoardApi(core.board, teams, core.supervisor),
                                   member_board=MemberBoardApi(core.board, teams,
                                                               core.supervisor),
                                   more_handlers={**NotifyApi(notify).handlers(),
                                                  **LandApi(core.land).handlers(),
                                                  **quota_api.handlers(),
                                                  **TraceApi(TraceJournal(store),
                                                             recorded=core.telemetry.write_recorded
                                                             ).handlers()})
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
            tg.start_soon(heap.trim_when_quiet, core.changes, name="heap trim")
            await teams.resume_desired()
            tg.start_soon(self._reap_pods, store, name="kubernetes orphans")
            await core.router.route_owed_replies()
            self._announce_ready(notify_fd)
            await self._shutdown.wait()
            log.info("daemon_stopping")
            with anyio.CancelScope(shield=True):
                await teams.shutdown()
                await core.telemetry.close(_TELEMETRY_CLOSE_TIMEOUT)
                serving.cancel()
                self.home.socket.unlink(missing_ok=True)
            tg.cancel_scope.cancel()

    async def _reap_pods(self, store: AsyncStore) -> None:
        """This home's Kubernetes objects that no wanted member owns, let go of once the
        wanted teams are resumed (orchestrator/daemon/members/_orphans.py); no cluster, no call."""
        records = await store.teams()
        if not any(record.config.get("kubernetes_hosts") for record in records):
            return

        async def wanted() -> set[tuple[str, str]]:
            return {(record.name, str(member.get("name")))
                    for record in await store.teams(desired="running")
                    for member in record.config.get("members", [])}

        try:
            from runtimes.hosts.kubernetes.host import kubernetes_host  # loaded for pod teams only

            reaped = await reap_pod_orphans(records, home_id(self.home.root),
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
