"""Which ``host:port`` a sandboxed member may reach through its egress proxy (docs/security.md,
"The network boundary"). Pure: no sockets, no clock.

An entry is ``host`` or ``host:port`` (``[v6]:port`` for an IPv6 literal), or ``*.name[:port]``
for the names under ``name``; without a port it means 443. A request is allowed only when its
host equals an entry's host — compared lower-case and without a trailing dot, never by suffix
(``api.anthropic.com.evil.com`` is not ``api.anthropic.com``) — or, for ``*.name``, ends in
``.name`` at a label's boundary (``x.github.com``, not ``github.com`` nor ``evilgithub.com``),
and its port equals the entry's port. An IP literal is allowed only when
that literal is itself an entry. Then the name is resolved once and the proxy connects to an
address it resolved (no second lookup a rebinding DNS could answer differently), and only to an
address this module passes: link-local (169.254.0.0/16 — the cloud metadata service — and
fe80::/10), unspecified, multicast and reserved addresses never; loopback only for an entry that
is the loopback literal itself (a test's fake API, ``127.0.0.1:PORT``), never for a name (the
live view and the member's own MCP socket peers listen on this machine's loopback).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["DEFAULT_PORT", "Decision", "EgressPolicy", "IpAddress", "Target", "ip_literal",
           "parse_entry", "parse_target", "split_host_port"]

DEFAULT_PORT = 443
_LABEL = r"(?!-)[a-z0-9_-]{1,63}(?<!-)"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_MAX_HOST = 253

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Target:
    """A normalised ``host:port``: ``host`` lower-case without a trailing dot (an IPv6 literal
    without brackets); ``ip`` is set when the host is an IP literal."""

    host: str
    port: int
    ip: IpAddress | None = None

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str  # "allowed", or why not: not_listed, ip_literal, blocked_address, ...


def ip_literal(text: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def parse_target(host: str, port: int) -> Target | None:
    """``host`` and ``port`` as a Target; None when either is not one (a bad name, a port
    outside 1..65535)."""
    if not 0 < port < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host.lower().removesuffix(".")
    ip = ip_literal(host)
    if ip is not None:
        return Target(str(ip), port, ip)
    if len(host) > _MAX_HOST or _HOSTNAME.fullmatch(host) is None:
        return None
    return Target(host, port)


def split_host_port(text: str, default_port: int | None = DEFAULT_PORT) -> tuple[str, int] | None:
    """``host``, ``host:port`` or ``[v6]:port`` as (host, port); None when it is not one."""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:  # a bare IPv6 literal: no port
        host, port_text = text, None
    else:
        host, _, port_text = text.partition(":")
        port_text = port_text if ":" in text else None
    if port_text is None:
        return None if default_port is None else (host, default_port)
    if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        return None
    return host, int(port_text)


def parse_entry(text: str) -> Target | None:
    """One ``allow_hosts`` entry (``host``, ``host:port``, ``[v6]:port``, ``*.name[:port]``:
    its host then starts with ``*.``); None when invalid."""
    found = split_host_port(text.strip())
    if found is None:
        return None
    host, port = found
    wildcard = host.startswith("*.")
    target = parse_target(host[2:] if wildcard else host, port)
    if target is None or (wildcard and target.ip is not None):
        return None
    return Target("*." + target.host, port) if wildcard else target


def blocked_address(ip: IpAddress) -> bool:
    """An address no entry naming a host may reach: link-local (the metadata service),
    unspecified, multicast, reserved — and loopback, which only its own literal may."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return blocked_address(ip.ipv4_mapped)
    return (ip.is_link_local or ip.is_unspecified or ip.is_multicast or ip.is_reserved
            or ip.is_loopback)


class EgressPolicy:
    """One member's allowed ``host:port`` set (``entries``: allow_hosts and the defaults)."""

    def __init__(self, entries: Iterable[Target]) -> None:
        self.entries = frozenset(Target(e.host, e.port, e.ip) for e in entries)
        self._under = frozenset((e.host[1:], e.port) for e in self.entries
                                if e.host.startswith("*."))  # (".name", port)

    @classmethod
    def from_strings(cls, entries: Iterable[str]) -> EgressPolicy:
        """From ``allow_hosts``-style strings; an invalid one raises ValueError naming it."""
        targets = []
        for text in entries:
            target = parse_entry(text)
            if target is None:
                raise ValueError(f"not a host or host:port: {text!r}")
            targets.append(target)
        return cls(targets)

    def decide(self, target: Target) -> Decision:
        """Whether a request for ``target`` may be resolved and connected at all."""
        if target.ip is not None and target.ip.is_link_local:
            return Decision(False, "blocked_address")  # the metadata service, listed or not
        if target in self.entries or (target.ip is None and self._matches_under(target)):
            return Decision(True, "allowed")
        return Decision(False, "ip_literal" if target.ip is not None else "not_listed")

    def _matches_under(self, target: Target) -> bool:
        """``target`` is a name under a ``*.name`` entry of its port."""
        labels = target.host.split(".")
        return any(("." + ".".join(labels[i:]), target.port) in self._under
                   for i in range(1, len(labels)))

    def may_connect(self, target: Target, address: IpAddress) -> bool:
        """Whether ``address`` (what ``target``'s name resolved to) may be connected: never a
        blocked one, unless the target is that very literal (and not link-local)."""
        if target.ip is not None:
            return address == target.ip and not address.is_link_local
        return not blocked_address(address)

    def describe(self) -> list[str]:
        return sorted(str(e) for e in self.entries)
