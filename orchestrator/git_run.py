"""Running git on a tree a member can write (docs/security.md, "Git is part of the boundary").

Git runs programs that its configuration, attributes and hooks name — ``core.fsmonitor`` on
a ``status``, a ``filter.*.clean`` on a ``diff``, a ``post-checkout`` hook on ``worktree
add`` — and a member that can write a repository's ``.git``, or point its worktree's
``commondir`` at a git dir of its own, chooses them. So every git command teamctl runs goes
through ``Git``, which

- says where, from teamctl's own records (``GitPlace``: ``GIT_DIR``, ``GIT_COMMON_DIR``,
  ``GIT_WORK_TREE``), never discovered through a ``.git`` file, ``commondir`` or ``gitdir``
  a member can write (``discover`` is for the operator's own checkout only);
- reads no system or global configuration and no system attributes, and on top of the
  repository's own configuration — which git cannot be told to skip: its ``include``s, a
  worktree's ``config.worktree`` — sets every key that runs a program to run nothing
  (``NEUTRAL``) and empties every filter, diff and merge driver, hook and trailer command
  that configuration defines (their names read first with ``git config --list``; reading
  runs nothing). The settings travel as ``GIT_CONFIG_COUNT``: git applies them last, so
  they win, and hands them on to every git it starts (a submodule's too);
- builds the environment from nothing but ``PATH`` and ``HOME`` (no ``GIT_*`` of the
  daemon's, no pager, editor or askpass, no optional index writes);
- runs through ``confine`` when one is given: the argv and environment that start it
  inside a boundary (a sandboxed member's tree: runtimes/hosts/sandbox/git_view.py) — the second
  layer, for whatever the first one misses;
- ends each call at its deadline, its whole process group killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from orchestrator.errors import GitFailed, SandboxUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import TypeAlias

    from orchestrator.contracts import Confined

    # the argv and environment that run a command inside a boundary
    Confine: TypeAlias = Callable[[Sequence[str], Mapping[str, str]], Confined]

__all__ = ["GIT_TIMEOUT", "MAX_DRIVERS", "NEUTRAL", "Git", "GitPlace", "GitViews", "config_env",
           "discover", "driver_overrides", "execute"]

GIT_TIMEOUT = 120.0
MAX_DRIVERS = 1000  # drivers a configuration may name before teamctl refuses to run git on it

# every key git 2.39 reads that runs a program (or shapes what teamctl prints), set to run
# nothing: an empty program is never started — a filter's is no filter, an external diff's
# or a textconv's makes git fail instead (teamctl's diff passes --no-ext-diff --no-textconv
# anyway) — and ``:`` is git's "no editor"
NEUTRAL: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.sshCommand", ""),
    ("core.gitProxy", ""),
    ("core.askPass", ""),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.pager", "cat"),
    ("core.attributesFile", "/dev/null"),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("diff.external", ""),
    ("diff.orderFile", "/dev/null"),
    ("gpg.program", ""),
    ("gpg.openpgp.program", ""),
    ("gpg.x509.program", ""),
    ("gpg.ssh.program", ""),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("protocol.ext.allow", "never"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("color.ui", "false"),
    ("core.quotePath", "true"),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.relative", "false"),
)
# per driver the configuration names (``filter.<name>.clean`` ...): the keys that run it
_DRIVER_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("command", ""), ("textconv", ""), ("cachetextconv", "false")),
    "merge": (("driver", ""),),
    "hook": (("command", ""),),
    "trailer": (("cmd", ""), ("command", "")),
}


class GitViews(Protocol):
    """What runs teamctl's git inside a boundary (runtimes/hosts/sandbox/git_view.py):
    ``reads`` bound read-only, ``scratch`` (a directory of the daemon's) read-write,
    ``workdir`` (read-only) where it starts; nothing else of the operator's, no network."""

    def confine(self, *, reads: Sequence[Path], scratch: Path, workdir: Path) -> Confine:
        ...


@dataclass(frozen=True)
class GitPlace:
    """Where git works, as teamctl recorded it: a worktree (its admin dir, the repository's
    common dir, its files), or the repository itself (``work_tree`` None: its common dir)."""

    git_dir: Path
    common_dir: Path
    work_tree: Path | None = None

    def env(self) -> dict[str, str]:
        env = {"GIT_DIR": str(self.git_dir), "GIT_COMMON_DIR": str(self.common_dir)}
        if self.work_tree is not None:
            env["GIT_WORK_TREE"] = str(self.work_tree)
        return env


class Git:
    """Hardened git at one ``GitPlace`` (see the module's doc), through ``confine`` if given;
    ``settings``: more keys set after the hardened ones (never one that runs a program).
    The drivers are read once, at the first call: keep one ``Git`` per operation."""

    def __init__(self, place: GitPlace, *, confine: Confine | None = None,
                 timeout: float = GIT_TIMEOUT,
                 settings: Sequence[tuple[str, str]] = ()) -> None:
        self.place = place
        self._confine = confine
        self._timeout = timeout
        self._extra = tuple(settings)
        self._settings: tuple[tuple[str, str], ...] | None = None

    def run(self, *args: str, env: Mapping[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        """``git ARGS`` here; GitFailed when it cannot start, passes its deadline or (with
        ``check``) exits with an error."""
        return self._run(args, self._hardened(), env or {}, check=check)

    def _hardened(self) -> tuple[tuple[str, str], ...]:
        if self._settings is None:
            listed = self._run(("config", "-z", "--name-only", "--list"), NEUTRAL, {},
                               check=True)
            self._settings = (*NEUTRAL, *driver_overrides(listed.stdout.split("\0")),
                              *self._extra)
        return self._settings

    def _run(self, args: Sequence[str], settings: Sequence[tuple[str, str]],
             extra: Mapping[str, str], *, check: bool) -> subprocess.CompletedProcess[str]:
        env = {**_base_env(), **self.place.env(), **config_env(settings), **extra}
        argv: Sequence[str] = ["git", *args]
        if self._confine is not None:
            try:
                confined = self._confine(argv, env)
            except SandboxUnavailable as exc:
                raise GitFailed(_shown(args), f"cannot run inside the member's sandbox: "
                                f"{exc.reason}; install bubblewrap (apt-get install "
                                "bubblewrap)", code="git_sandbox_unavailable") from exc
            argv, env = confined.argv, dict(confined.env)
        cwd = self.place.work_tree or self.place.common_dir
        return execute(argv, env, cwd=cwd, timeout=self._timeout, check=check, shown=args)


def discover(workdir: Path, *, timeout: float = 30.0) -> GitPlace | None:
    """Where git works for ``workdir`` — its git dir, the common dir, the top of its checkout,
    absolute — as git finds it from there: for the operator's own checkout, and a worktree
    teamctl has just made; never a member's tree afterwards (discovery follows a ``.git``
    file the member can write). None if ``workdir`` is in no repository."""
    if not workdir.is_dir():
        return None
    args = ("rev-parse", "--path-format=absolute", "--absolute-git-dir", "--git-common-dir",
            "--show-toplevel")
    done = execute(["git", *args], {**_base_env(), **config_env(NEUTRAL)}, cwd=workdir,
                   timeout=timeout, check=False, shown=args)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 3:
        return None
    return GitPlace(Path(lines[0]), Path(lines[1]), Path(lines[2]))


def driver_overrides(names: Iterable[str]) -> list[tuple[str, str]]:
    """For every filter, diff and merge driver (and hook, trailer) that configuration
    ``names`` (``git config --name-only`` lines) define, its program keys emptied."""
    drivers: dict[tuple[str, str], None] = {}
    for name in names:
        section, _, rest = name.partition(".")
        subsection = rest.rpartition(".")[0]
        if section in _DRIVER_KEYS and subsection:
            drivers.setdefault((section, subsection), None)
    if len(drivers) > MAX_DRIVERS:
        raise GitFailed("config --list", f"the configuration names {len(drivers)} drivers "
                        f"(at most {MAX_DRIVERS}); remove the ones a member planted")
    return [(f"{section}.{subsection}.{key}", value) for section, subsection in drivers
            for key, value in _DRIVER_KEYS[section]]


def config_env(settings: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``settings`` as git's ``GIT_CONFIG_COUNT`` variables (a key and its value apart: a
    driver's name may hold a ``=``, which ``-c`` would split on)."""
    env = {"GIT_CONFIG_COUNT": str(len(settings))}
    for index, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def execute(argv: Sequence[str], env: Mapping[str, str], *, cwd: Path, timeout: float,
            check: bool, shown: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` in its own process group, stdin empty, output captured (names round-trip
    through ``surrogateescape``); past ``timeout`` the group is killed."""
    try:
        process = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, encoding="utf-8", errors="surrogateescape",
            process_group=0)
    except OSError as exc:
        raise GitFailed(_shown(shown), f"cannot start {argv[0]}: {exc.strerror} (is it "
                        "installed, and on the daemon's PATH?)") from exc
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise GitFailed(_shown(shown), f"no answer within {timeout:g} s (stopped); try "
                        "again", code="git_timeout", retryable=True) from None
    done = subprocess.CompletedProcess(list(argv), process.returncode, out, err)
    if check and done.returncode != 0:
        raise GitFailed(_shown(shown), err.strip()[-500:] or f"exit {done.returncode}")
    return done


def _kill_group(process: subprocess.Popen[str], *, drain_timeout: float = 5.0) -> None:
    """The group killed, then its pipes drained — within a bound: a process that left the
    group may hold them."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    try:
        process.communicate(timeout=drain_timeout)
    except subprocess.TimeoutExpired:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()


def _base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH") or os.defpath,
            "HOME": os.environ.get("HOME") or str(Path.home()),
            "LANG": "C", "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
            "GIT_PAGER": "cat", "PAGER": "cat", "GIT_EDITOR": ":", "GIT_SEQUENCE_EDITOR": ":"}


def _shown(args: Sequence[str]) -> str:
    return " ".join(args[:2])
