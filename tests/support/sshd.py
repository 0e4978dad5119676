"""A real OpenSSH server on 127.0.0.1 (Debian's openssh-server) for the SSH member tests: a
throwaway host key, a throwaway user (when the tests run as root; else the current user, the
only one a non-root sshd can log in) and a throwaway client key. Every wait is on a line sshd
prints, with a deadline."""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtimes.hosts.local.host import entering
from tests.support.driver import REPO
from tests.support.processes import cgroup_dir
from tests.support.xserver import wait_line

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Sshd", "sshd"]

SSHD = Path(os.environ.get("TEAMCTL_E2E_SSHD", "/usr/sbin/sshd"))
DEADLINE = 20.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Sshd:
    root: Path
    user: str
    port: int
    key: Path
    known_hosts: Path
    throwaway: bool
    # a cgroup per controller delegated to the user (its sessions start in it): ``delegated``
    cgroups: dict[str, Path] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _drain: threading.Thread | None = field(default=None, repr=False)

    def host(self) -> dict[str, Any]:
        """A ``[hosts.NAME]`` table that reaches this server."""
        return {"address": "127.0.0.1", "port": self.port, "user": self.user,
                "identity_file": str(self.key),
                "ssh_options": [f"UserKnownHostsFile={self.known_hosts}",
                                "StrictHostKeyChecking=yes"]}

    def start(self) -> None:
        assert self.process is None
        argv = self._showing_the_checkout([str(SSHD), "-D", "-e", "-f",
                                           str(self.root / "sshd_config")])
        procs = [path / "cgroup.procs" for path in self.cgroups.values()]
        self.process = subprocess.Popen(
            entering(procs, argv),  # its sessions start in the delegated cgroups
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.process.stderr is not None
        stderr = self.process.stderr
        wait_line(stderr.fileno(), b"Server listening on 127.0.0.1", "sshd")
        # its log goes on (-e): keep draining it, or sshd would block on a full pipe
        self._drain = threading.Thread(
            target=lambda: [None for _ in iter(lambda: stderr.read1(65536), b"")], daemon=True)
        self._drain.start()

    def _showing_the_checkout(self, argv: list[str]) -> list[str]:
        """``argv``, run where the throwaway user's sessions see the checkout at its own path
        (the fake CLIs, the e2e CLIs under .cache): a clone under a home that user cannot enter
        (Debian's /root is 0700) is shown to sshd and its sessions alone, in a mount namespace
        of their own — a 0755 tmpfs over the topmost closed directory, the checkout alone bound
        back into it. The current user's own sshd (not root) sees what it sees."""
        closed = _closed_ancestor(REPO) if self.throwaway else None
        if closed is None:
            return argv
        stash = self.root / "closed"
        stash.mkdir(mode=0o700, exist_ok=True)
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _SHOW_CHECKOUT,
                "sh", str(closed), str(stash), str(REPO.relative_to(closed)), *argv]

    def stop(self) -> None:
        """Stop the listener and every session it serves (as a host going down would)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        for pid in self._sessions():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        if self.process is not None:
            assert self.process.stderr is not None
            if self._drain is not None:
                self._drain.join(timeout=10)  # EOF once sshd and its sessions are gone
            self.process.stderr.close()
            self.process = None

    def _sessions(self) -> list[int]:
        """sshd processes serving this server's sessions (``sshd: user@notty``)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
            except OSError:
                continue
            if cmdline.startswith(f"sshd: {self.user}") or (
                    str(self.root) in cmdline and "sshd" in cmdline):
                found.append(int(entry.name))
        return found

    def user_processes(self) -> list[str]:
        """The throwaway user's processes (the "remote" machine's), as ``pid cmdline``."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                uid = (entry / "status").read_text().split("Uid:")[1].split()[0]
                # another process's argv may be any bytes (a test's hostile path, latin-1)
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
            except (OSError, IndexError):
                continue
            ours = int(uid) == self._uid() if self.throwaway else "teamctl-remote" in cmdline
            if ours:
                found.append(f"{entry.name} {cmdline[:200]}")
        return found

    def _uid(self) -> int:
        import pwd

        return pwd.getpwnam(self.user).pw_uid


# $1: the closed directory, $2: where it stays reachable (root's), $3: the checkout below $1
_SHOW_CHECKOUT = """set -e
mount --bind "$1" "$2"
mount -t tmpfs -o mode=0755 tmpfs "$1"
mkdir -p "$1/$3"
mount --bind "$2/$3" "$1/$3"
shift 3
exec "$@"
"""


def _closed_ancestor(path: Path) -> Path | None:
    """The topmost directory on the way to ``path`` that another user cannot pass through."""
    for parent in reversed(path.parents):  # from / down
        if not parent.stat().st_mode & stat.S_IXOTH:
            return parent
    return None


def _delegated(user: str, controllers: tuple[str, ...], name: str) -> dict[str, Path]:
    """A cgroup v1 of each controller, ``name``, made beside nothing else under this process's
    own and given to ``user`` — as a host's administrator delegates one to an ssh user: the
    directory and the files a process enters it through are the user's, so the user's own
    cgroups can be made in it and its processes moved into them."""
    import pwd

    uid, gid = pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid
    made: dict[str, Path] = {}
    for controller in controllers:
        own = cgroup_dir(os.getpid(), controller)
        assert (own / "cgroup.procs").exists() and not (own / "cgroup.controllers").exists(), \
            f"delegating a cgroup needs the v1 {controller} hierarchy (as on this project's CI)"
        path = own / name
        path.mkdir()
        made[controller] = path
        for item in (path, path / "cgroup.procs", path / "tasks"):
            os.chown(item, uid, gid)
    return made


def _undelegated(cgroups: dict[str, Path]) -> None:
    """The delegated cgroups removed, bottom up, once what ran in them has ended."""
    for path in cgroups.values():
        for child in sorted((p for p in path.rglob("*") if p.is_dir()),
                            key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                child.rmdir()
        with contextlib.suppress(OSError):
            path.rmdir()


@contextlib.contextmanager
def sshd(*, delegate: tuple[str, ...] = ()) -> Iterator[Sshd]:
    """A running sshd and its user; everything removed afterwards. ``delegate``: cgroup
    controllers (``memory``, ``cpu``, ``pids``) whose v1 cgroup is given to the (throwaway)
    user, its sessions started in it — a host where that user may make members' cgroups."""
    assert SSHD.exists() and shutil.which("ssh"), \
        "openssh-server is needed: apt-get install openssh-server (.ci/run does)"
    root = Path(tempfile.mkdtemp(prefix="tc-sshd-"))
    os.chmod(root, 0o755)  # the user reads its authorized_keys here
    throwaway = os.geteuid() == 0
    user = f"tcr{secrets.token_hex(3)}" if throwaway else getpass.getuser()
    if throwaway:
        # "*": no password, yet not locked (sshd without PAM refuses a locked account)
        subprocess.run(["useradd", "--create-home", "--home-dir", str(root / "home"), "-p", "*",
                        "--shell", "/bin/sh", user], check=True, capture_output=True)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f",
                        str(root / name)], check=True, capture_output=True)
    (root / "authorized_keys").write_text((root / "client.pub").read_text())
    os.chmod(root / "authorized_keys", 0o644)
    port = _free_port()
    known = root / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {(root / 'host.pub').read_text().split(' ')[0]} "
                     f"{(root / 'host.pub').read_text().split(' ')[1]}\n")
    (root / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host'}",
        f"PidFile {root / 'sshd.pid'}", f"AuthorizedKeysFile {root / 'authorized_keys'}",
        "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "UsePAM no", "PubkeyAuthentication yes", f"AllowUsers {user}", "PrintMotd no",
        "MaxSessions 50", "MaxStartups 50", ""]))
    server = Sshd(root, user, port, root / "client", known, throwaway)
    if delegate:
        assert throwaway, "a cgroup is delegated to the throwaway user (the tests run as root)"
        server.cgroups = _delegated(user, delegate, f"tc-sshd-{root.name}")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        if throwaway:
            for _ in range(50):  # its processes die with their sessions
                with contextlib.suppress(subprocess.CalledProcessError):
                    subprocess.run(["pkill", "-9", "-u", user], check=False,
                                   capture_output=True)
                if subprocess.run(["userdel", "--remove", user], check=False,
                                  capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
        shutil.rmtree(root, ignore_errors=True)
        _undelegated(server.cgroups)
