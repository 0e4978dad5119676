"""The daemon's egress proxies: one per sandboxed member with ``network = "off" |
"allowlist"`` (``egress.EgressProxy``), started when its team is placed (before its first
spawn: the socket is bound at once) and closed when the team stops.

Their sockets live in one private directory: ``egress/`` under teamctl's home (0700) when a
socket's path there fits the kernel's limit, else a private dir in the temp dir (0700, random;
recorded in the home, so a killed daemon's is used again; removed with the last proxy) — each
``<sha256(team/member)[:16]>.sock``, 0600. The directory is hidden from every sandbox
(teamctl's state is); each member sees only its own socket, bound in at a fixed path.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.egress._policy import EgressPolicy
from orchestrator.daemon.egress._proxy import EgressLimits, EgressProxy
from orchestrator.paths import ensure_private_dir, remove_temp_socket_dir, temp_socket_dir
from orchestrator.protocol.teams import EgressStatus

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from anyio.abc import TaskGroup

    from orchestrator.daemon.egress._proxy import EgressCounts

__all__ = ["EgressProxies"]

log = structlog.get_logger("teamctl.egress")

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; kept clear of it
_NAME_BYTES = len("/0123456789abcdef.sock")
_TEMP_PREFIX = "tc-eg-"  # the sockets' dir made in the temp dir (removed with the last proxy)


def socket_dir(root: Path) -> Path:
    """The private directory of the proxies' sockets (see the module's doc)."""
    candidate = root / "egress"
    if len(os.fsencode(candidate)) + _NAME_BYTES <= _SOCKET_PATH_MAX:
        return ensure_private_dir(candidate)
    return temp_socket_dir(root / "egress-dir", _TEMP_PREFIX)


class EgressProxies:
    """Each member's proxy, served in ``tg`` (``ensure``) until its team stops (``close``)."""

    def __init__(self, tg: TaskGroup, root: Path, *, limits: EgressLimits | None = None) -> None:
        self._tg = tg
        self._root = root
        self._dir: Path | None = None
        self._limits = limits or EgressLimits()
        self._running: dict[tuple[str, str], tuple[EgressProxy, anyio.CancelScope]] = {}

    def ensure(self, team: str, member: str, entries: Iterable[str]) -> Path:
        """Serve ``member``'s proxy allowing ``entries`` (its socket is listening when this
        returns); a running one takes the new entries. The socket's path."""
        policy = EgressPolicy.from_strings(entries)
        running = self._running.get((team, member))
        if running is not None:
            running[0].policy = policy
            return running[0].path
        if self._dir is None:
            self._dir = socket_dir(self._root)
        name = hashlib.sha256(f"{team}/{member}".encode()).hexdigest()[:16]
        proxy = EgressProxy(team, member, policy, self._dir / f"{name}.sock",
                            limits=self._limits)
        proxy.bind()
        scope = anyio.CancelScope()

        async def serve() -> None:
            try:
                with scope:
                    await proxy.serve()
            finally:
                self._ended(team, member, proxy)

        self._tg.start_soon(serve, name=f"egress proxy {team}/{member}")
        self._running[(team, member)] = (proxy, scope)
        log.info("egress_proxy_serving", team=team, member=member, allowed=policy.describe(),
                 socket=str(proxy.path))
        return proxy.path

    async def close(self, team: str, member: str) -> None:
        """Stop ``member``'s proxy (its open tunnels end with it); nothing if none runs."""
        running = self._running.pop((team, member), None)
        if running is not None:
            proxy, scope = running
            scope.cancel()
            log.info("egress_proxy_closed", team=team, member=member,
                     allowed=proxy.counts.allowed, denied=proxy.counts.denied)
        await anyio.lowlevel.checkpoint()

    def _ended(self, team: str, member: str, proxy: EgressProxy) -> None:
        """``proxy`` stopped serving (closed, or the daemon stopping): forgotten; with the
        last one, a sockets' dir made in the temp dir is removed."""
        running = self._running.get((team, member))
        if running is not None and running[0] is proxy:
            del self._running[(team, member)]
        if not self._running and self._dir is not None and remove_temp_socket_dir(
                self._dir, _TEMP_PREFIX):
            self._dir = None

    def counts(self, team: str, member: str) -> EgressCounts | None:
        running = self._running.get((team, member))
        return None if running is None else running[0].counts

    def status(self, team: str, member: str) -> EgressStatus | None:
        """``member``'s counts as ``teamctl status`` shows them; None without a proxy."""
        counts = self.counts(team, member)
        return None if counts is None else EgressStatus(allowed=counts.allowed,
                                                        denied=counts.denied)
