"""What a sandboxed member sees, as a bubblewrap command line (docs/security.md, "Sandbox").

Pure: paths in, argv out (``bwrap_argv``); nothing here starts a process. The order of the
mounts is the policy, because bubblewrap applies them in order and a later one covers an
earlier one:

1. the system, read-only: ``/usr``, ``/etc``, ``/bin``, ``/sbin``, ``/lib*`` (a symlink stays
   a symlink); a fresh ``/proc`` (this pid namespace's only) and ``/dev``; a private,
   size-bounded ``/tmp``;
2. the operator's home as an empty private tmpfs (so nothing in it is seen unless bound
   below);
3. the member's toolchain, read-only: its executable's own tree (the npm package it lives in),
   its interpreter's prefix, the directories on its ``PATH`` (with the root of a version
   manager whose shims are there: pyenv, asdf, mise), and the python that runs teamctl's MCP
   server — never found through a name the member can change;
4. ``sandbox_ro`` read-only, ``sandbox_rw`` read-write;
5. concealed: teamctl's state dir (its journal, logs, control socket, every member's private
   dir and worktree) and the other members' workdirs, each an empty tmpfs made read-only
   once the member's own paths in it are bound;
6. the member's own: its workdir (read-only for ``permissions = "read"``), its private dir
   (the daemon's files for it: prompt, settings, MCP config) **read-only** and, inside it,
   its runtime home read-write — the only place of teamctl's it may write —; then, for a
   member in a git worktree, what git needs there (``git``: the worktree, the repository's
   git dir read-only, its object store, the worktree's admin dir and the member's own ref
   directories read-write — each showing through the concealment of the operator's checkout
   and teamctl's state); what its CLI's login needs (``login = "operator"``:
   protocols/logins.md), and the daemon's files its runtime reads at a place inside its home
   (``placed``: bound read-only, links made inside); a directory that holds a concealed path
   and lies inside one of its writable binds is pinned (bound onto itself before the
   concealment: a mount point cannot be renamed), so the member cannot move a parent of
   teamctl's state aside and put its own in its place;
7. hidden last, whatever bound them: the credential paths (``HIDDEN_IN_HOME``), the system's
   secrets (``HIDDEN_SYSTEM``) and ``sandbox_hide`` — never one that holds the member's own
   workdir or runtime home;
8. the network plan's arguments (``NetworkPlan``: 29b's egress seam), then the command.

A member on an SSH host is sandboxed there: this file's source travels in its start's header
and ``runtimes/hosts/remote_side.py`` runs ``host_argv`` on the host, so every path is checked, and
the toolchain found, on the machine whose kernel enforces them (``policy_json``: the policy
with its paths as the host has them). Hence standard library only, any python3 >= 3.8.
"""

from __future__ import annotations

import glob
import os
import shutil
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = [
    "HIDDEN_IN_HOME",
    "HIDDEN_SYSTEM",
    "NETWORK_ON",
    "SYSTEM_DIRS",
    "NetworkPlan",
    "SandboxPolicy",
    "VersionManager",
    "bwrap_argv",
    "file_head",
    "host_argv",
    "interpreter",
    "manager_of",
    "policy_json",
    "toolchain",
    "writable_paths",
]

# read-only from the host, as they are (a merged-/usr system's /bin is a symlink, kept one)
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# credentials under the operator's home, hidden even where a bind (a workdir of ~, a
# sandbox_ro of ~) would show them; sandbox_hide adds to it
HIDDEN_IN_HOME = (
    ".ssh", ".aws", ".azure", ".config/gcloud", ".config/gh", ".config/hub", ".docker",
    ".kube", ".netrc", ".gnupg", ".git-credentials", ".config/git/credentials", ".npmrc",
    ".pypirc", ".cargo/credentials", ".cargo/credentials.toml", ".password-store",
    ".local/share/keyrings", ".terraform.d/credentials.tfrc.json", ".vault-token",
    ".config/op", ".mozilla", ".config/google-chrome", ".config/chromium",
)
# secrets of the system under the read-only /etc (globs): password hashes, host keys, sudo
HIDDEN_SYSTEM = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh/ssh_host_*key",
    "/etc/sudoers", "/etc/sudoers.d", "/etc/security/opasswd", "/etc/ssl/private",
)
_TMP_BYTES = 512 * 1024 * 1024  # the private /tmp's bound (ENOSPC past it)
_HOME_BYTES = 256 * 1024 * 1024  # the operator's home as the member sees it (dotfiles only)


@dataclass(frozen=True)
class NetworkPlan:
    """How a sandboxed member reaches the network — the seam for ``network = "off" |
    "allowlist"`` (the egress proxy). ``bwrap_args`` are added after the mounts (e.g.
    ``--unshare-net`` and a ``--bind`` of the proxy's socket), ``env`` is added to the
    runtime's environment (``HTTPS_PROXY``…), and ``relay`` (an argv, run inside) is put in
    front of the runtime's command: it must end by running the command it is given.
    ``NETWORK_ON``: the host's network, nothing added."""

    mode: str = "on"
    bwrap_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    relay: tuple[str, ...] = ()


NETWORK_ON = NetworkPlan()


@dataclass(frozen=True)
class SandboxPolicy:
    """One member's view of the filesystem (see the module's doc). Every path is absolute.
    ``workdir`` and ``runtime_home`` are read-write; ``login`` (path, writable) are what its
    CLI's login needs; ``conceal`` is teamctl's state and the other members' workdirs;
    ``hide`` is added to the credential list; ``git`` (path, writable), in order, is what git
    needs of a worktree member's repository (orchestrator/daemon/worktrees/_sandbox.py)."""

    workdir: Path
    runtime_home: Path
    home: Path
    private: Path | None = None  # the member's private dir (the daemon's), read-only
    rw: tuple[Path, ...] = ()
    ro: tuple[Path, ...] = ()
    hide: tuple[Path, ...] = ()
    conceal: tuple[Path, ...] = ()
    login: tuple[tuple[Path, bool], ...] = ()
    toolchain: tuple[Path, ...] = ()
    tmp_bytes: int = _TMP_BYTES
    workdir_writable: bool = True  # False: bound read-only (``permissions = "read"``)
    git: tuple[tuple[Path, bool], ...] = ()
    # the daemon's files at their places in the runtime home: (path inside, daemon file),
    # bound read-only; (path inside, link target), made as links inside
    placed_dirs: tuple[Path, ...] = ()  # made inside (0700), for the runtime to write in
    placed_files: tuple[tuple[Path, Path], ...] = ()
    placed_links: tuple[tuple[Path, str], ...] = ()

    def own(self) -> list[Path]:
        """The member's own paths, in the order they are bound (its home inside its
        private dir)."""
        return _unique([self.workdir, *([self.private] if self.private else []),
                        self.runtime_home])

    def writable(self) -> list[Path]:
        """What the member may write: a parent of a concealed path among these is pinned."""
        return _unique([*([self.workdir] if self.workdir_writable else []), self.runtime_home,
                        *self.rw, *(path for path, writable in self.login if writable),
                        *(path for path, writable in self.git if writable)])

    def concealed(self) -> list[Path]:
        """teamctl's state and the other members' workdirs that exist here, but never the
        member's own workdir or runtime home (a shared workdir stays shared)."""
        own = self.own()
        return [p for p in _unique(self.conceal) if _exists(p) and p not in own]

    def hidden(self) -> list[Path]:
        """Every path hidden in step 7 that exists here, credentials first."""
        listed = [self.home / rel for rel in HIDDEN_IN_HOME]
        listed += [Path(p) for pattern in HIDDEN_SYSTEM for p in sorted(glob.glob(pattern))]
        listed += list(self.hide)
        own = (*self.own(), *(path for path, _ in self.login))
        return _unique(p for p in listed if _exists(p) and not any(_within(o, p) for o in own))

    def pins(self, path: Path) -> list[Path]:
        """The directories strictly between one of the member's writable binds and
        ``path`` (a concealed path inside it): each is bound onto itself before ``path`` is
        covered, so none of them can be renamed or removed from inside (EBUSY) — else the
        member would move ``~/.local`` aside and give the daemon a state dir of its own."""
        found: list[Path] = []
        for bound in self.writable():
            if bound != path and _within(path, bound):
                found += [p for p in reversed(path.parents) if p != bound and _within(p, bound)]
        return _unique(found)


def bwrap_argv(bwrap: str, policy: SandboxPolicy, command: Sequence[str], *,
               network: NetworkPlan = NETWORK_ON) -> list[str]:
    """The whole command line: ``bwrap`` with the policy's mounts, then ``command`` (behind
    the network plan's relay). argv only; nothing is ever given to a shell."""
    argv = [bwrap, "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--new-session", "--cap-drop", "ALL"]
    argv += [*_system(policy.tmp_bytes), "--perms", "0700", "--size", str(_HOME_BYTES),
             "--tmpfs", str(policy.home)]
    argv += _binds("--ro-bind-try", policy.toolchain)
    argv += _binds("--ro-bind-try", policy.ro) + _binds("--bind-try", policy.rw)
    own = policy.own()
    inside = [p for p in policy.concealed() if any(_within(p, o) for o in own)]
    for path in policy.concealed():
        if path not in inside:  # above or beside the member's own: covered before them
            argv += _conceal(policy, path)
    argv += _own(policy, own)
    for path in inside:  # below the member's own: covered after them...
        argv += _conceal(policy, path)
    # ...and the member's own that lie in one of those bound again (a home inside a workdir)
    argv += _own(policy, [o for o in own if any(_within(o, p) for p in inside)])
    for path, writable in policy.git:  # after the concealment: they show through it
        argv += _binds("--bind-try" if writable else "--ro-bind-try", (path,))
    for path, writable in policy.login:
        argv += _binds("--bind-try" if writable else "--ro-bind-try", (path,))
    for at in policy.placed_dirs:  # made by bubblewrap inside: never by the daemon there
        argv += ["--perms", "0700", "--dir", str(at)]
    for at, source in policy.placed_files:  # the daemon's file, read-only, at its place
        argv += ["--ro-bind", str(source), str(at)]
    for at, target in policy.placed_links:
        argv += ["--symlink", target, str(at)]
    for path in policy.hidden():
        argv += _hide(path)
    for path in policy.concealed():  # read-only once the member's own are bound in them
        argv += ["--remount-ro", str(path)]
    argv += list(network.bwrap_args)
    argv += ["--chdir", str(policy.workdir), "--", *network.relay, *command]
    return argv


def policy_json(policy: SandboxPolicy, place: Callable[[str], str]) -> dict[str, Any]:
    """``policy`` for another machine (``host_argv``), each path as ``place`` names it there
    (``~`` and the operator's home: the remote home; the member's private dir: its mirror)."""
    def paths(found: Iterable[Path]) -> list[str]:
        return [place(str(p)) for p in found]

    return {"workdir": place(str(policy.workdir)),
            "runtime_home": place(str(policy.runtime_home)), "home": place(str(policy.home)),
            "private": place(str(policy.private)) if policy.private else None,
            "placed_dirs": paths(policy.placed_dirs),
            "placed_files": [[place(str(a)), place(str(b))] for a, b in policy.placed_files],
            "placed_links": [[place(str(a)), place(t)] for a, t in policy.placed_links],
            "rw": paths(policy.rw), "ro": paths(policy.ro), "hide": paths(policy.hide),
            "conceal": paths(policy.conceal),
            "login": [[place(str(p)), w] for p, w in policy.login],
            "tmp_bytes": policy.tmp_bytes, "workdir_writable": policy.workdir_writable}


def host_argv(spec: Mapping[str, Any], command: Sequence[str], path_env: str,
              python: str) -> list[str]:
    """On the member's host: the bubblewrap command line for ``command`` from ``spec``
    (``policy``: ``policy_json``'s; ``bwrap``; ``bwrap_args`` and ``relay``: the network
    plan's, in the host's paths), its toolchain (and ``python``, which runs ``teamctl mcp``
    and the relay there) found here. A relative path is the home's. LookupError where
    bubblewrap is not found on ``path_env``: never run unsandboxed."""
    data = spec["policy"]
    home = Path(data["home"])

    def one(path: str) -> Path:
        return home / path if not os.path.isabs(path) else Path(path)

    def many(key: str) -> tuple[Path, ...]:
        return tuple(one(p) for p in data[key])

    bwrap = shutil.which(spec["bwrap"], path=path_env)
    if bwrap is None:
        raise LookupError(f"bubblewrap ({spec['bwrap']}) is not installed or not on PATH")
    policy = SandboxPolicy(
        workdir=one(data["workdir"]), runtime_home=one(data["runtime_home"]), home=home,
        private=one(data["private"]) if data.get("private") else None,
        placed_dirs=tuple(one(p) for p in data.get("placed_dirs", ())),
        placed_files=tuple((one(a), one(b)) for a, b in data.get("placed_files", ())),
        placed_links=tuple((one(a), str(t)) for a, t in data.get("placed_links", ())),
        rw=many("rw"), ro=many("ro"), hide=many("hide"), conceal=many("conceal"),
        login=tuple((one(p), bool(w)) for p, w in data["login"]),
        tmp_bytes=int(data["tmp_bytes"]), workdir_writable=bool(data["workdir_writable"]))
    extra = (Path(python), *(Path(p) for p in [shutil.which("python3", path=path_env)] if p))
    policy = replace(policy, toolchain=toolchain(command[0], path_env, extra=extra,
                                                 policy=policy))
    network = NetworkPlan(mode=str(spec.get("mode", "on")),
                          bwrap_args=tuple(spec.get("bwrap_args", ())),
                          relay=tuple(spec.get("relay", ())))
    return bwrap_argv(bwrap, policy, command, network=network)


def _system(tmp_bytes: int) -> list[str]:
    argv: list[str] = []
    for name in SYSTEM_DIRS:
        if os.path.islink(name):
            argv += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            argv += ["--ro-bind", name, name]
    resolv = os.path.realpath("/etc/resolv.conf")  # systemd-resolved: a link into /run
    if not _within(Path("/etc"), Path(resolv)) and os.path.exists(resolv):
        argv += ["--ro-bind", resolv, resolv]
    return [*argv, "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]


def _conceal(policy: SandboxPolicy, path: Path) -> list[str]:
    """``path`` covered by an empty private tmpfs, its parents inside a writable bind pinned
    first (``SandboxPolicy.pins``)."""
    return [*_binds("--bind", policy.pins(path)),
            "--perms", "0700", "--size", "4096", "--tmpfs", str(path)]


def _own(policy: SandboxPolicy, paths: Iterable[Path]) -> list[str]:
    """The member's own paths bound in: read-write, but a read-only workdir and the private
    dir (the daemon's) read-only."""
    read_only = [policy.private] if policy.private else []
    if not policy.workdir_writable:
        read_only.append(policy.workdir)
    return [arg for path in _unique(paths) for arg in (
        "--ro-bind" if path in read_only and path != policy.runtime_home else "--bind",
        str(path), str(path))]


def _binds(flag: str, paths: Iterable[Path]) -> list[str]:
    return [arg for path in _unique(paths) for arg in (flag, str(path), str(path))]


def _hide(path: Path) -> list[str]:
    """A directory becomes an empty read-only tmpfs; a file, an unreadable device node."""
    if path.is_dir():
        return ["--perms", "0000", "--size", "4096", "--tmpfs", str(path),
                "--remount-ro", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def toolchain(executable: str, path_env: str, *, extra: Iterable[Path] = (),
              policy: SandboxPolicy | None = None) -> tuple[Path, ...]:
    """The read-only paths a runtime needs to run: the executable's tree (the directory that
    holds its ``node_modules``, else the file and its symlinks' chain), its ``#!``
    interpreter's prefix, the absolute directories on ``path_env`` (outside the system dirs,
    which are there already), and for each of those that is a version manager's shim, the
    manager's root and its global version file (``manager_of``); ``extra`` (teamctl's own
    python) added as it is.

    ``policy``: the member's view. Nothing is followed through a name the member can change
    (its workdir, runtime home, ``sandbox_rw``, a writable login dir: ``writable_paths``) —
    such a path is in its view as it is, and a symlink or a ``#!`` line the member wrote never
    picks what is bound (docs/security.md, "The daemon is never a confused deputy")."""
    writable = writable_paths(policy) if policy is not None else ()
    home = policy.home if policy is not None else None
    found: list[Path] = []
    entries = [p for p in path_env.split(os.pathsep)
               if os.path.isabs(p) and len(Path(p).parts) > 2 and os.path.isdir(p)]
    for path in (executable, interpreter(executable, path_env, writable), *entries):
        if path:
            found += _tree(path, writable)
            manager = manager_of(path, home=home, writable=writable)
            if manager is not None:
                found += [manager.root, *manager.files]
    found += list(extra)
    kept = [p for p in _unique(found) if not _in_system(p) and _exists(p)]
    dirs = [p for p in kept if p.is_dir() and not p.is_symlink()]
    # one bind per tree: a path inside another is there already (and a mount point inside a
    # read-only bind could not be made)
    return tuple(p for p in kept if not any(d != p and _within(p, d) for d in dirs))


def writable_paths(policy: SandboxPolicy) -> tuple[Path, ...]:
    """What the member can change (``policy.writable()``, and its workdir even when bound
    read-only: a teammate or its earlier self wrote it): never followed or read on its
    behalf by ``toolchain``."""
    return tuple(_unique([policy.workdir, *policy.writable()]))


@dataclass(frozen=True)
class VersionManager:
    """A version manager whose shims a member's toolchain goes through (pyenv, rbenv, asdf,
    mise, …): ``root`` (its code, shims and installed versions) is bound read-only, with
    ``files``, its global version choice where that lives outside the root."""

    name: str
    root: Path
    files: tuple[Path, ...] = ()


def manager_of(path: str, *, home: Path | None = None,
               writable: Sequence[Path] = ()) -> VersionManager | None:
    """The version manager ``path`` is a shim of (a file in, or the directory, ``ROOT/shims``),
    known by its root: ``libexec/`` (pyenv, rbenv, nodenv: the global ``version`` file is in
    the root), or ``installs/`` (asdf, and mise in its data dir: ``~/.tool-versions``; mise's
    ``config.toml`` is never bound, it may hold ``[env]`` secrets). nvm puts a version's own
    ``bin`` on PATH, no shim: its prefix is the interpreter's. None for anything else, and for
    a root that is (or holds) the home or a name the member can change."""
    shims = Path(os.path.abspath(path))
    if shims.name != "shims":
        shims = shims.parent
    root = shims.parent
    if shims.name != "shims" or len(root.parts) < 3 or _changeable(str(root), writable):
        return None
    if home is not None and _within(home, root):
        return None
    if os.path.isdir(root / "libexec"):
        return VersionManager(root.name.lstrip("."), root)
    if not os.path.isdir(root / "installs"):
        return None
    name = "mise" if root.name == "mise" else "asdf"
    versions = home / ".tool-versions" if home is not None else None
    files = (versions,) if versions is not None and os.path.isfile(versions) and \
        not _changeable(str(versions), writable) else ()
    return VersionManager(name, root, files)


def _tree(path: str, writable: Sequence[Path] = ()) -> list[Path]:
    """``path``'s own tree: each link of its symlink chain and where it ends (the npm package
    root above ``node_modules``, or the prefix above a ``bin`` dir, else the file itself);
    nothing when any step of the way is a name the member can change."""
    real = _resolve(path, writable)
    if real is None:
        return []
    out: list[Path] = []
    current = os.path.abspath(path)
    for _ in range(16):  # a symlink chain is followed at most this far
        out.append(Path(current))
        if not os.path.islink(current):
            break
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    out.append(_root(Path(real)))
    return out


def _resolve(path: str, writable: Sequence[Path]) -> str | None:
    """``os.path.realpath(path)`` one name at a time; None when a name on the way (a link, a
    directory, the end) lies in ``writable``, or the links do not end."""
    parts = (path if os.path.isabs(path) else os.path.join(os.getcwd(), path)).split(os.sep)
    resolved, hops = os.sep, 0
    while parts:
        name = parts.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, name)
        if _changeable(candidate, writable):
            return None
        if not os.path.islink(candidate):
            resolved = candidate
            continue
        hops += 1
        if hops > 40:
            return None
        target = os.readlink(candidate)
        resolved = os.sep if os.path.isabs(target) else resolved
        parts[:0] = target.split(os.sep)
    return resolved


def _changeable(path: str, writable: Sequence[Path]) -> bool:
    return any(_within(Path(os.path.normpath(path)), w) for w in writable)


def _root(real: Path) -> Path:
    parts = real.parts
    if "node_modules" in parts:
        return Path(*parts[:parts.index("node_modules")])
    if real.parent.name == "bin" and (real.parent.parent / "lib").is_dir():
        return real.parent.parent  # a prefix: a venv, an nvm node, /opt/<tool>
    return real


def interpreter(executable: str, path_env: str,
                 writable: Sequence[Path] = ()) -> str | None:
    """The program a ``#!`` script runs under (through ``/usr/bin/env NAME``: found on
    ``path_env``), None for a binary, for what is not a regular file (a FIFO never blocks the
    daemon), and for a script the member can change (its ``#!`` never picks a bind)."""
    if _resolve(executable, writable) is None:
        return None
    head = file_head(executable)
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-")]
        return shutil.which(names[0], path=path_env) if names else None
    return words[0]


def file_head(path: str, limit_bytes: int = 256) -> bytes:
    """The first ``limit_bytes`` of a regular file (b"" for a FIFO, a device, an error):
    never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return b""
    try:
        return os.read(fd, limit_bytes) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def _in_system(path: Path) -> bool:
    return any(_within(Path(os.path.realpath(d)), path) for d in SYSTEM_DIRS
               if os.path.isdir(d))


def _within(inner: Path, outer: Path) -> bool:
    """Whether ``inner`` is ``outer`` or below it."""
    return inner == outer or outer in inner.parents


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def _unique(paths: Iterable[Path]) -> list[Path]:
    seen: dict[Path, None] = {}
    for path in paths:
        seen.setdefault(path, None)
    return list(seen)
