"""Where a member's runtime runs: the registry of host kinds, each built by one call.

One package per kind (``local``: this machine, ``ssh``: a named host, ``kubernetes``: a pod),
and ``sandbox``, a wrapper that puts any of them inside bubblewrap; ``remote_side`` is what runs
on the far side of a host that is not this machine, ``remote_mcp`` the MCP server shipped there.

``build(request)`` is the composition root's one call: the kind's factory, named in ``KINDS``
by module, is imported then — importing this registry imports no host package (a daemon of
local members never loads the SSH, Kubernetes or sandbox code). ``check`` is ``teamctl doctor
--host``'s: each kind answers its own checks. A new kind of host is one package with a
``build(request) -> Host`` (and, if doctor can check it, a ``checks``) and one row of ``KINDS``
(docs/dev/new-host.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence
    from pathlib import Path

    from orchestrator.contracts import Ceiling, Host

__all__ = ["KINDS", "WRAPPERS", "HostKind", "HostRequest", "SandboxRequest", "build", "check"]


@dataclass(frozen=True)
class HostKind:
    """One row of the registry: the module of the kind's factory (its ``build(request) ->
    Host``) and, where ``doctor --host`` can check such a host, the module of its checks (its
    ``async checks(host, found, *, commands, forward)``, filling ``found``: a HostReport's
    fields)."""

    module: str
    checks: str | None = None


KINDS: dict[str, HostKind] = {
    "local": HostKind("runtimes.hosts.local.host"),
    "ssh": HostKind("runtimes.hosts.ssh.host", checks="runtimes.hosts.ssh.doctor"),
    "kubernetes": HostKind("runtimes.hosts.kubernetes.host",
                           checks="runtimes.hosts.kubernetes.doctor"),
}
# what wraps a host of any kind: the module of its ``wrap(base, request) -> Host``
WRAPPERS: dict[str, str] = {"sandbox": "runtimes.hosts.sandbox.host"}


@dataclass(frozen=True)
class SandboxRequest:
    """A sandboxed member's boundary (``sandbox = "process"``, docs/security.md), as the team
    file says it: the sandbox's factory makes its policy (on an SSH host, in the host's paths:
    its workdir there, ``~`` its home, teamctl's state there concealed)."""

    workdir: Path  # the member's workdir, where it runs (on a host: its path there)
    others: Sequence[Path]  # the other members' workdirs on the same machine: concealed
    paths: Mapping[str, list[str]]  # ``rw``, ``ro``, ``hide``
    runtime: str
    login: str
    permissions: str
    bwrap: str = "bwrap"
    # the daemon's part of the policy (a worktree member's view) and of its network (the
    # egress proxy, closed with the host), both asked once the policy is made
    refine: Callable[[Any], Any] = field(default=lambda policy: policy)
    network: Callable[[], tuple[Any, Callable[[], Awaitable[None]] | None]] | None = None


@dataclass(frozen=True)
class HostRequest:
    """What a member's host is built from: its kind (a row of ``KINDS``), the member, its
    private dir, the teamctl home, and the team file's entry for its host (``settings``: the
    ``[hosts.NAME]`` or ``[kubernetes_hosts.NAME]`` table, read by its kind's factory)."""

    team: str
    member: str
    state_dir: Path  # the member's private dir (the daemon's)
    home_root: Path  # the teamctl home
    kind: str = "local"
    name: str | None = None  # the host's name in the team file (None: this machine)
    settings: Any = None
    messaging: bool = True  # the member has teamctl's MCP tools
    # the member's own MCP socket, made when a kind asks for it (None: the daemon has none)
    mcp_socket: Callable[[], Path] | None = None
    # this home's id, labelled on what a host makes elsewhere (a pod's objects)
    home_id: Callable[[], str] = field(default=lambda: "")
    sandbox: SandboxRequest | None = None  # inside bubblewrap, wrapping the kind's host
    # the member's ceiling, for a kind that holds it itself (a pod's resources:
    # ``HostProfile.holds_ceiling``); on this machine the daemon's cgroup holds it
    ceiling: Ceiling | None = None


def _factory(module: str, attribute: str) -> Any:
    return getattr(importlib.import_module(module), attribute)


def build(request: HostRequest) -> Host:
    """The member's host: its kind's, wrapped in its sandbox where it has one. KeyError: a
    kind no row of ``KINDS`` names (the team file's schema lists the kinds)."""
    host: Host = _factory(KINDS[request.kind].module, "build")(request)
    if request.sandbox is not None:
        host = _factory(WRAPPERS["sandbox"], "wrap")(host, request)
    return host


async def check(request: HostRequest, found: dict[str, Any], *, commands: Mapping[str, str],
                forward: bool = False) -> None:
    """``teamctl doctor --host``: the host of ``request``'s kind, asked its own checks, which
    fill ``found`` as they go (what was found before a failure stays). ``commands``: the
    runtime CLIs to look for there, by runtime; ``forward``: a member there is reached through
    a port-forward. Raises the kind's typed errors (``HostUnavailable``); KeyError: no kind,
    or one doctor cannot check."""
    checks = KINDS[request.kind].checks
    if checks is None:
        raise KeyError(request.kind)
    await _factory(checks, "checks")(build(request), found, commands=commands, forward=forward)
