"""The hosts wing's registry (runtimes/hosts/__init__.py): a kind of host is a row naming its
factory, imported when a member of that kind is built — and a new kind is one package and one
row, built through the composition root's one call (``hosts.build``), sandbox and all."""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

import anyio
import pytest

from orchestrator.config import HostConfig, KubernetesHostConfig
from runtimes import hosts
from runtimes.hosts.local.host import LocalHost
from runtimes.hosts.sandbox.host import SandboxHost
from tests.support.driver import REPO

_FIFTH = '''
"""A throwaway kind of host: this machine's, under another name."""
from dataclasses import dataclass

from runtimes.hosts.local.host import LocalHost

BUILT = []


@dataclass(frozen=True)
class FifthHost(LocalHost):
    @property
    def name(self):
        return "fifth"


def build(request):
    BUILT.append(request)
    return FifthHost()
'''


@dataclass
class _Sockets:
    """The daemon's member sockets, as the request's ``mcp_socket`` asks them."""

    root: Path
    asked: list[str] = field(default_factory=list)

    def socket(self) -> Path:
        self.asked.append("mcp")
        return self.root / "mcp" / "teamctl.sock"


def test_importing_the_registry_loads_no_host_package() -> None:
    """A daemon of local members never loads the SSH, Kubernetes or sandbox code: the
    registry names each kind's factory and imports it only when a member of it is built."""
    probe = ("import sys, runtimes.hosts; print('\\n'.join(sorted(n for n in sys.modules "
             "if n.startswith('runtimes.hosts.'))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.split() == []


def test_every_kind_the_team_file_names_has_a_row_and_a_factory() -> None:
    """``local`` (no host), and each ``kind`` of the team file's hosts, is a row whose
    factory exists (the sandbox wraps any of them)."""
    kinds = {"local", *get_args(HostConfig.model_fields["kind"].annotation),
             *get_args(KubernetesHostConfig.model_fields["kind"].annotation)}
    assert kinds == set(hosts.KINDS)
    for kind in hosts.KINDS.values():
        assert callable(hosts._factory(kind.module, "build")), kind
        assert kind.checks is None or callable(hosts._factory(kind.checks, "checks")), kind
    assert callable(hosts._factory(hosts.WRAPPERS["sandbox"], "wrap"))


def test_a_fifth_host_kind_is_one_package_and_one_row(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A new kind of host needs no change to the daemon or an adapter: its package (here a
    throwaway one) and its row, and the same one call builds a member's host of that kind —
    inside the sandbox too, which wraps whatever kind it is given."""
    package = tmp_path / "fifth_host"
    package.mkdir()
    (package / "__init__.py").write_text(_FIFTH)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(hosts.KINDS, "fifth", hosts.HostKind("fifth_host"))
    sockets = _Sockets(tmp_path)
    request = hosts.HostRequest("web", "dev", tmp_path / "state", tmp_path / "home",
                                kind="fifth", name="far", mcp_socket=sockets.socket)

    host = hosts.build(request)
    assert host.name == "fifth" and isinstance(host, LocalHost)
    assert [request] == sys.modules["fifth_host"].BUILT  # type: ignore[attr-defined]

    boxed = hosts.SandboxRequest(workdir=tmp_path / "work", others=[],
                                 paths={"rw": [], "ro": [], "hide": []}, runtime="claude",
                                 login="isolated", permissions="edit")
    sandboxed = hosts.build(hosts.HostRequest(
        "web", "dev", tmp_path / "state", tmp_path / "home", kind="fifth",
        mcp_socket=sockets.socket, sandbox=boxed))
    assert isinstance(sandboxed, SandboxHost) and sandboxed.base.name == "fifth"
    assert sandboxed.profile.confines_processes and not host.profile.confines_processes
    assert sandboxed.mcp_home == tmp_path / "mcp" and sockets.asked == ["mcp"]


def test_a_kind_no_row_names_is_refused_and_doctor_checks_only_the_kinds_it_can() -> None:
    with pytest.raises(KeyError):
        hosts.build(hosts.HostRequest("web", "dev", Path("s"), Path("h"), kind="nowhere"))
    with pytest.raises(KeyError):  # this machine: ``doctor`` without ``--host`` checks it
        anyio.run(functools.partial(hosts.check, hosts.HostRequest(
            "web", "dev", Path("s"), Path("h")), {}, commands={}))
