"""The integration tests' ``teamctl`` calls, each a process of its own forked from an
interpreter that has already imported the CLI.

Why: ``make test`` is CPU-bound (both cores ~98 % busy), and ~1,800 CLI calls a run were a
third of its CPU — each a new interpreter that spent ~45 of its ~60 ms importing click, the
CLI and, for ``launch`` and ``doctor``, pydantic's config models (~0.19 s a ``launch``).
Forked from a server that holds those modules (``multiprocessing``'s forkserver, one per test
worker), a call is still its own process — its own pid, environment, working directory,
stdin/stdout/stderr and exit status, killed at its timeout — and runs the same ``main()``;
only the interpreter's start and the imports are shared. What that leaves untested (the CLI's
own start: imports, ``python -m orchestrator``) is run by every test that starts a CLI with
``Popen`` (the MCP server), by the commands that stay new interpreters here (``_EXEC``: a
``teamctl.run("logs", ...)``, ``ui``), by ``TEAMCTL_TEST_CLI=exec`` (below), and by
``bench_scale.py cli``.
The tests' log follower (``teamctl logs -f --json``, ~120 a run) is forked too
(``start_call``: its stdout a pipe the test reads as it comes).
``TEAMCTL_TEST_CLI=exec`` runs every call as a new interpreter instead (in the tests' environment:
every call and follower; in one call's ``extra_env``: that call, and the daemon it starts:
test_team_lifecycle's background-daemon test). The fork server is warmed before it forks
(``warm_fork``). The e2e tests' calls are forked the same way: their subject is the real
agent CLIs.

The daemon a call starts (``ensure_daemon``: ``python -m orchestrator.daemon --notify-fd N``,
detached) is forked the same way, for the same reason: a daemon's start was ~0.3 s of CPU
importing what the fork server already holds, several hundred starts a run. In the call's
process, that one ``Popen`` becomes a fork that does what the ``Popen`` asked — a new session,
stdin from /dev/null, stdout and stderr to the daemon's log, every descriptor closed but the
ready pipe, the environment it was given — and runs ``orchestrator.daemon``'s ``__main__``;
any other ``Popen`` is left alone. The daemon's own start (``python -m orchestrator.daemon``)
is still run by ``bench_scale.py`` and ``TEAMCTL_TEST_CLI=exec``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ForkedCall", "run_cli", "start_call"]

# long-lived or terminal-bound commands: a new interpreter, as the operator starts them
_EXEC = frozenset({"daemon", "mcp", "ui", "logs"})
# what a call imports after the CLI's own module: a `launch`'s and a `doctor`'s validation
_PRELOAD = ["orchestrator.client.cli", "orchestrator.config", "orchestrator.protocol.teams",
            "orchestrator.diagnostics", "orchestrator.client.doctor",
            # a daemon's start (forked too: ``_fork_daemon``)
            "orchestrator.daemon.main"]
_DAEMON = ["-m", "orchestrator.daemon"]
_POPEN = subprocess.Popen  # the daemon runs with it, not with the call's ``_daemon_or_popen``
_context: multiprocessing.context.ForkServerContext | None = None


def run_cli(args: list[str], *, input: str | None, timeout: float, env: dict[str, str],
            cwd: Path) -> subprocess.CompletedProcess[str]:
    """``[sys.executable, "-m", "orchestrator", *args]`` with ``subprocess.run``'s contract
    (captured text output, TimeoutExpired past ``timeout``, the process killed)."""
    argv = [sys.executable, "-m", "orchestrator", *args]
    if (not args or args[0] in _EXEC or "exec" in (os.environ.get("TEAMCTL_TEST_CLI"),
                                                   env.get("TEAMCTL_TEST_CLI"))
            or sys.platform != "linux"):
        return subprocess.run(argv, input=input, capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=cwd, check=False)
    with tempfile.TemporaryDirectory(prefix="tc-cli-") as tmp:
        stdin, out, err = (Path(tmp) / name for name in ("stdin", "stdout", "stderr"))
        stdin.write_text(input or "", encoding="utf-8")
        process = _forkserver().Process(
            target=_call, args=(args, env, str(cwd), str(stdin), str(out), str(err)))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(argv, timeout,
                                            output=_read(out), stderr=_read(err))
        return subprocess.CompletedProcess(argv, process.exitcode, _read(out), _read(err))


class ForkedCall:
    """A long-lived call (``start_call``): ``fileno()``, the read end of its standard output,
    a pipe; ``terminate``: SIGTERM, as ``Popen``'s, then reaped (killed past ``timeout``)."""

    def __init__(self, process: Any, stdout: Any) -> None:
        self._process = process  # a fork server's Process, or a Popen (TEAMCTL_TEST_CLI=exec)
        self._stdout = stdout  # a multiprocessing Connection or a Popen's stdout, read raw

    def fileno(self) -> int:
        return int(self._stdout.fileno())

    def terminate(self, timeout: float) -> None:
        self._process.terminate()
        if isinstance(self._process, subprocess.Popen):
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        else:
            self._process.join(timeout)
            if self._process.exitcode is None:
                self._process.kill()
                self._process.join()
        self._stdout.close()


def start_call(args: list[str], *, env: dict[str, str], cwd: Path) -> ForkedCall:
    """``teamctl ARGS`` forked from the fork server, its stdout a pipe (stdin and stderr
    /dev/null): a follower such as ``logs -f --json`` that a test reads as it writes. A new
    interpreter under ``TEAMCTL_TEST_CLI=exec``, as ``run_cli``'s calls."""
    if "exec" in (os.environ.get("TEAMCTL_TEST_CLI"), env.get("TEAMCTL_TEST_CLI")) \
            or sys.platform != "linux":
        popen = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], env=env,
                                 cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
        return ForkedCall(popen, popen.stdout)
    read, write = multiprocessing.Pipe(duplex=False)  # the write end is passed by descriptor
    process = _forkserver().Process(target=_stream_call, args=(args, env, str(cwd), write))
    process.start()
    write.close()
    return ForkedCall(process, read)


def _stream_call(args: list[str], env: dict[str, str], cwd: str, write: Any) -> None:
    os.dup2(write.fileno(), 1)
    write.close()
    _call(args, env, cwd, os.devnull, None, os.devnull)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _forkserver() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        # the race finders, when the run loaded them, slow the daemons forked from here too
        finder = [name for name in ("tests.support.slow_journal", "tests.support.slow_spawn")
                  if name in sys.modules]
        context.set_forkserver_preload(_PRELOAD + finder + ["tests.support.warm_fork"])
        _context = context
    assert _context is not None
    return _context


def _call(args: list[str], env: dict[str, str], cwd: str, stdin: str, stdout: str | None,
          stderr: str) -> None:
    """In the forked process: become the call (environment, directory, stdio: ``stdout``
    None keeps the descriptor it has), run the CLI's ``main()``, exit with its status without
    the forkserver's own exit handling."""
    code = 1
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        for fd, path, flags in ((0, stdin, os.O_RDONLY),
                                (1, stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            if path is None:
                continue
            opened = os.open(path, flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.argv = [sys.executable, *args]
        subprocess.Popen = _daemon_or_popen(subprocess.Popen)  # type: ignore[misc,assignment]
        from orchestrator.client.cli import main

        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def _daemon_or_popen(popen: type[subprocess.Popen[Any]]) -> Callable[..., Any]:
    """``Popen``, except for the daemon's start: that is forked (``_ForkedDaemon``)."""
    def start(argv: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(argv, list) and argv[1:3] == _DAEMON and not args:
            return _ForkedDaemon(argv, **kwargs)
        return popen(argv, *args, **kwargs)
    return start


class _ForkedDaemon:
    """The daemon ``ensure_daemon`` starts, forked from this call's process (module
    docstring): only what that ``Popen`` asks (``stdout``, ``stderr``: a descriptor;
    ``pass_fds``; ``env``; ``start_new_session``) and what it reads back (``poll``)."""

    def __init__(self, argv: list[str], *, stdout: int, stderr: int, env: dict[str, str],
                 pass_fds: tuple[int, ...] = (), start_new_session: bool = False,
                 **_ignored: Any) -> None:
        self.args = argv
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:
            _become_daemon(argv[3:], stdout, stderr, env, pass_fds, start_new_session)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _become_daemon(args: list[str], stdout: int, stderr: int, env: dict[str, str],
                   keep: tuple[int, ...], new_session: bool) -> None:
    code = 1
    try:
        if new_session:
            os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((0, null), (1, stdout), (2, stderr)):
            os.dup2(target, fd)
        # close_fds: nothing of the call's process stays open (its pipes to the fork server
        # would keep the call "running" while the daemon lives), but the ready pipe
        for low, high in zip((3, *(k + 1 for k in sorted(keep))), (*sorted(keep), 1 << 16),
                             strict=True):
            os.closerange(low, high)
        os.environ.clear()
        os.environ.update(env)
        subprocess.Popen = _POPEN  # type: ignore[misc]
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.argv = [sys.executable, *args]  # runpy puts the module's path first
        runpy.run_module("orchestrator.daemon", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # what an interpreter would print of an uncaught error
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
