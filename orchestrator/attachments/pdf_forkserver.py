"""A fork server for the PDF reader: one process that has loaded PDFium and the image pipeline
once and forks a reader for each PDF (both sides: ``ForkServer`` in the daemon, ``serve`` in
``python -E -s -m orchestrator.attachments.pdf_forkserver``).

A reader started afresh is a new interpreter that loads PDFium (pypdfium2's bindings and the
library's initialisation) and Pillow before it reads a byte: ~60 ms of CPU, the same every time,
for a read whose own work may be a few milliseconds (a page count, a page of text). The server
is started exactly like a reader — the same argv flags, the same two-variable environment (no
secret of the daemon's), the package's directory — imports what a reader needs, and then only
forks: each child caps its own address space, CPU time and file writes and reads its PDF from
its own stdin, as ``pdf_worker`` always did (``pdf_worker.main``). The server never opens a PDF;
a hostile file reaches only the child forked for it, which dies with it.

The wire is a ``SOCK_SEQPACKET`` socket pair, the server's stdin. A request is the job (JSON)
with four descriptors (``SCM_RIGHTS``): the child's stdin, stdout and stderr, and a pipe the
server writes the child's wait status to (4 bytes) when it reaps it. The answer is the child's
pid with its pidfd, so the daemon can kill it without a pid-reuse race, or an error. The server
ends when that socket closes (its daemon is gone); a reader still running then ends at its own
limits, or when its pipes break.

The trade-off, said in docs/documents.md: every reader is a copy of one process, so it has the
server's memory layout, where a reader started afresh had a layout of its own (ASLR). A reader
still holds no secret, writes no file and runs within its caps; ``TEAMCTL_PDF_FORKSERVER=0``
starts each reader afresh. Where the server cannot be had (no pidfd, it cannot start, it died
mid-read) the reader is started afresh, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

__all__ = ["ForkServer", "ForkedReader", "serve"]

_MAX_JOB = 64 * 1024  # bytes: a job is a few hundred
_ANSWER_DEADLINE = 10.0  # seconds: a fork is milliseconds; a server that does not answer is
# stopped and the reader started afresh
_STATUS = 4  # bytes of the wait status, big-endian


class ForkedReader:
    """A reader forked by the server, driven like the ``subprocess.Popen`` it replaces: the
    parts ``pdf`` uses (``stdin``, ``communicate``, ``poll``, ``wait``, ``kill``,
    ``returncode``). ``lost`` when the server went away before it said how the reader ended."""

    def __init__(self, pid: int, pidfd: int, stdin: int, stdout: int, stderr: int,
                 status: int) -> None:
        self.pid = pid
        self.args = f"pdf reader {pid}"
        self.stdin: Any = os.fdopen(stdin, "wb")
        self.stdout: Any = os.fdopen(stdout, "rb", buffering=0)
        self.stderr: Any = os.fdopen(stderr, "rb", buffering=0)
        self.returncode: int | None = None
        self.lost = False
        self._pidfd: int | None = pidfd
        self._status: int | None = status

    def communicate(self, data: bytes | None = None, timeout: float | None = None
                    ) -> tuple[bytes, bytes]:
        """Write ``data`` and close stdin, read stdout and stderr to their ends, then wait for
        the exit; ``subprocess.TimeoutExpired`` once ``timeout`` has passed."""
        end = None if timeout is None else time.monotonic() + timeout
        out, err = bytearray(), bytearray()
        pending = memoryview(data or b"")
        with selectors.DefaultSelector() as selector:
            if self.stdin is not None:
                if pending:
                    os.set_blocking(self.stdin.fileno(), False)
                    selector.register(self.stdin, selectors.EVENT_WRITE)
                else:
                    self._close_stdin()
            selector.register(self.stdout, selectors.EVENT_READ, out)
            selector.register(self.stderr, selectors.EVENT_READ, err)
            while selector.get_map():
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
                for key, _ in selector.select(left):
                    if key.fileobj is self.stdin:
                        try:
                            pending = pending[os.write(key.fd, pending[:1 << 16]):]
                        except BrokenPipeError:  # it died: its exit says why
                            pending = pending[:0]
                        except BlockingIOError:
                            continue
                        if not pending:
                            selector.unregister(key.fileobj)
                            self._close_stdin()
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        key.data.extend(chunk)
                    else:
                        selector.unregister(key.fileobj)
        self.wait(None if end is None else max(0.0, end - time.monotonic()))
        return bytes(out), bytes(err)

    def poll(self) -> int | None:
        if self.returncode is None and self._status is not None:
            self._read_status(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status (as Popen's: -N for a signal); None when ``lost``."""
        if self.returncode is None and self._status is not None \
                and not self._read_status(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode

    def kill(self) -> None:
        if self._pidfd is not None and self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # already reaped
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def _read_status(self, timeout: float | None) -> bool:
        """True once the server said how the reader ended, or went away (``lost``)."""
        assert self._status is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._status, selectors.EVENT_READ)
            if not selector.select(timeout):
                return False
        raw = b""
        with contextlib.suppress(OSError):
            raw = os.read(self._status, _STATUS)  # written at once: one read has it all
        if len(raw) == _STATUS:
            self.returncode = os.waitstatus_to_exitcode(int.from_bytes(raw, "big"))
        else:
            self.lost = True
        self._close_status()
        return True

    def _close_stdin(self) -> None:
        stdin, self.stdin = self.stdin, None
        with contextlib.suppress(OSError):
            stdin.close()

    def _close_status(self) -> None:
        for fd in (self._status, self._pidfd):
            if fd is not None:
                os.close(fd)
        self._status = self._pidfd = None

    def __del__(self) -> None:  # a reader dropped without a wait (a bug) leaks no descriptor
        if self._status is not None:
            self._close_status()


class ForkServer:
    """The daemon's side: starts the server on first use, asks it for readers, starts it
    again if it went away. Thread-safe (the planner reads in worker threads)."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        self._argv, self._cwd, self._env = argv, cwd, env
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self.starts = 0  # servers started (one, unless one went away)

    def reader(self, job: str) -> ForkedReader | None:
        """A reader forked for ``job``; None where the server cannot be had (the caller
        starts one afresh)."""
        if not hasattr(os, "pidfd_open"):
            return None
        with self._lock:
            for _ in range(2):  # a server that went away since the last read: once more
                if self._control is None and not self._start():
                    return None
                try:
                    return self._ask(job)
                except _Gone:
                    self._stop()
        return None

    @property
    def pid(self) -> int | None:
        """The server's pid while one runs (the tests look for readers left behind)."""
        process = self._process
        return None if process is None or process.poll() is not None else process.pid

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _start(self) -> bool:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(  # a fixed argv, no shell
                [*self._argv, "--serve"], stdin=theirs.fileno(), stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, cwd=self._cwd, env=self._env)
        except OSError:
            ours.close()
            return False
        finally:
            theirs.close()
        ours.settimeout(_ANSWER_DEADLINE)
        self._control = ours
        if not self.starts:  # closed on the way out: its server ends with its socket
            atexit.register(self.close)
        self.starts += 1
        return True

    def _stop(self) -> None:
        control, self._control = self._control, None
        if control is not None:
            control.close()  # the server ends on its socket's close
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1.0)
            if process.poll() is None:
                process.kill()
                process.wait()

    def _ask(self, job: str) -> ForkedReader | None:
        assert self._control is not None
        child_in, stdin = os.pipe()
        stdout, child_out = os.pipe()
        stderr, child_err = os.pipe()
        status, child_status = os.pipe()
        theirs = [child_in, child_out, child_err, child_status]
        ours = [stdin, stdout, stderr, status]
        try:
            socket.send_fds(self._control, [job.encode()], theirs)
            answer, fds, _, _ = socket.recv_fds(self._control, 1024, 1)
        except OSError:  # gone, or no answer within the deadline
            answer, fds = b"", []
        finally:
            for fd in theirs:
                os.close(fd)
        pid = _pid(answer) if len(fds) == 1 else None
        if pid is None:
            for fd in (*ours, *fds):
                os.close(fd)
            if not answer:
                raise _Gone
            return None  # it could not fork this one (said why): started afresh instead
        return ForkedReader(pid, fds[0], stdin, stdout, stderr, status)


class _Gone(Exception):
    """The server did not answer: it is stopped, and started again for the next read."""


def _pid(answer: bytes) -> int | None:
    try:
        pid = json.loads(answer)["pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


# -- the server's side ---------------------------------------------------------------------------

def serve(control: socket.socket) -> int:
    """Load what a reader needs, then fork one per request until ``control`` closes."""
    from orchestrator.attachments import pdf_worker

    pdf_worker.preload()
    children: dict[int, int] = {}  # pid → the descriptor its status is written to
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up descriptor carries it
    with selectors.DefaultSelector() as selector:
        selector.register(control, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is control:
                    try:
                        job, fds, _, _ = socket.recv_fds(control, _MAX_JOB, 4)
                    except InterruptedError:
                        continue
                    if not job:
                        return 0  # the daemon closed its side: nothing more will be asked
                    _fork(control, job, fds, children)
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_read, 512)
                    _reap(children)


def _fork(control: socket.socket, job: bytes, fds: list[int], children: dict[int, int]
          ) -> None:
    if len(fds) != 4:  # only the daemon holds this socket: a malformed request is a bug
        for fd in fds:
            os.close(fd)
        _answer(control, {"error": "a request carries four descriptors"}, None)
        return
    stdin, stdout, stderr, status = fds
    try:
        pid = os.fork()
    except OSError as exc:
        for fd in fds:
            os.close(fd)
        _answer(control, {"error": f"fork failed: {exc}"}, None)
        return
    if pid == 0:
        _child(job, stdin, stdout, stderr)  # never returns
    for fd in (stdin, stdout, stderr):
        os.close(fd)
    children[pid] = status
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as exc:  # no pidfd here: the daemon could not kill it safely
        os.kill(pid, signal.SIGKILL)  # ours and not yet reaped: the pid is still its own
        _answer(control, {"error": f"no pidfd: {exc}"}, None)
        return
    try:
        _answer(control, {"pid": pid}, pidfd)
    finally:
        os.close(pidfd)


def _answer(control: socket.socket, answer: dict[str, Any], fd: int | None) -> None:
    with contextlib.suppress(OSError):  # the daemon is gone: its socket's close ends us
        socket.send_fds(control, [json.dumps(answer).encode()], [] if fd is None else [fd])


def _child(job: bytes, stdin: int, stdout: int, stderr: int) -> None:
    """The forked reader: the descriptors it was given as 0, 1 and 2, nothing else open, the
    server's signal handling undone — then ``pdf_worker.main``, as a reader started afresh."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the socket, other readers' pipes
        from orchestrator.attachments import pdf_worker

        code = pdf_worker.main([job.decode()])
        sys.stdout.flush()
    except BaseException:  # the child's last word, on its own stderr
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
    finally:
        os._exit(code)


def _reap(children: dict[int, int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = children.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):  # the daemon stopped waiting for it
                os.write(fd, status.to_bytes(_STATUS, "big"))
            os.close(fd)


def main(argv: list[str]) -> int:
    if argv != ["--serve"]:
        sys.stderr.write("usage: python -m orchestrator.attachments.pdf_forkserver --serve "
                         "(started by the daemon, its stdin a socket)\n")
        return 2
    return serve(socket.socket(fileno=os.dup(0)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
