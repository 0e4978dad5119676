"""What runs on a member's SSH host: this file's source is sent as ``python3 -c`` (standard
library only, any python3 ≥ 3.8; nothing is installed there). Modes (``sys.argv[1]``):

``probe``   print ``{"home", "python", "pid"}`` as one JSON line (reachability, the remote home).
``run``     read one JSON header line on stdin (``root``, ``dirs``, ``files``, ``links``,
            ``argv``, ``cwd``, ``env``, ``grace``, ``enter``), mirror the member's private dir
            under ``root``, stop what an earlier run left behind, then start the runtime in its
            own process group — with ``enter`` (the daemon's ``/bin/sh`` trampoline, the
            member's ``cgroup.procs`` files here as its arguments) inside the member's cgroup
            before its program runs — and pass the rest of stdin to it; its stdout and stderr
            are the channel's. The runtime dies with its channel: when stdin ends (a stop, the local
            ssh killed, the connection dropped) or the parent sshd goes away, its stdin is
            closed, and after ``grace`` seconds its whole group is killed. With ``sandbox``
            (runtimes/hosts/sandbox/host.py) the runtime starts inside bubblewrap here: the header
            carries runtimes/hosts/sandbox/plan.py's source and the policy in this host's paths, and
            its ``host_argv`` builds the command line (bubblewrap not found: refused, exit 125).
``put``     ``put SHA256 SIZE [DIR]``: keep stdin's bytes at
            ``~/.cache/teamctl/images/<sha[:2]>/<sha>`` (0600, verified against the hash; an
            intact copy is kept without reading stdin); print the path — with ``DIR`` (a
            sandboxed member's), of a 0600 copy at ``DIR/<sha>``.
``exists``  ``exists GLOB``: print ``true`` or ``false``.
``freeport`` a free TCP port on the host's loopback.
``mkdir``   ``mkdir PATH...``: 0700 directories (where forwarded sockets will be).
``which``   ``which EXECUTABLE``: its path there (exit 127 when it is not installed).
``version`` ``version EXECUTABLE``: the first line of ``EXECUTABLE --version`` (doctor).
``cgroup``  read one JSON request on stdin: ``source`` (orchestrator/cgroups.py, run here as a
            module), ``op``, ``top`` (teamctl's group), ``name`` (the member's), ``machine`` and
            ``enable`` (how a refusal names this host and what to enable); print one JSON
            answer. ``op``: ``support`` (doctor: each controller's hierarchy, a cgroup made and
            removed), ``probe`` (``controllers``: one made and removed; ``problem``), ``make``
            (``controllers``, ``ceiling``: the member's cgroup, what an earlier start left in it
            killed first, its limits written; its ``version``, ``dirs``, ``procs``, or a
            ``problem``), ``close`` (``group`` as ``make`` gave it, ``deadline``: its OOM kills
            and peak read, what is left in it killed, the cgroup removed). The cgroups are made
            with this user's rights, as this process sees its own: the member's processes run
            as this user, so everything made here is its own.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time

# Each call is a new interpreter there, and most modes need a few modules: a mode imports what
# it uses, when it runs (``json`` alone was a sixth of a ``which``, the whole list ~60 % of it).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import subprocess
    import types
    from typing import Any

BASE_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ")


# Every file and directory this side makes in a member's mirror is made from directory
# descriptors, each component opened with O_NOFOLLOW (orchestrator/beneath.py's rule, here in
# the standard library of any python3): a sandboxed member there may write its runtime home,
# and this side runs as the host's user outside its sandbox — it never writes through a name
# the member made. The mirror's root (``~/.teamctl-remote/...``) is the daemon's there.
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _dir_fd(root: str, relative: str = "") -> int:
    """``root/relative`` as a descriptor, made 0700 where missing, never through a link
    below ``root`` (whose own parents are made by ``makedirs``)."""
    os.makedirs(root, mode=0o700, exist_ok=True)
    fd = os.open(root, _DIR)
    try:
        for part in [p for p in relative.split("/") if p not in ("", ".")]:
            if part == "..":
                raise OSError(22, "not beneath its root", relative)
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            child = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _private_write(root: str, relative: str, data: bytes) -> None:
    """``data`` as ``root/relative`` (0600), atomically, never through a link there."""
    directory, name = os.path.split(relative)
    fd = _dir_fd(root, directory)
    try:
        tmp = f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                      dir_fd=fd)
        with os.fdopen(out, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)


def _link(root: str, relative: str, target: str) -> None:
    """A symlink ``root/relative`` → ``target``, replacing a link (never a file) there."""
    directory, name = os.path.split(relative)
    fd = _dir_fd(root, directory)
    try:
        try:
            if not stat.S_ISLNK(os.lstat(name, dir_fd=fd).st_mode):
                return  # a real file holds the name: left as it is
        except FileNotFoundError:
            pass
        tmp = f".{name}.{os.getpid()}.link"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=fd)
        os.symlink(target, tmp, dir_fd=fd)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def probe() -> None:
    import json

    _say(json.dumps({"home": os.path.expanduser("~"), "python": sys.version.split()[0],
                     "pid": os.getpid()}))


def put(sha256: str, size: str, into: str | None = None) -> int:
    import hashlib

    root = os.path.join(os.path.expanduser("~"), ".cache", "teamctl", "images")
    path = os.path.join(root, sha256[:2], sha256)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        data = b""
    if hashlib.sha256(data).hexdigest() != sha256:
        data = sys.stdin.buffer.read(int(size) + 1)
        if len(data) != int(size) or hashlib.sha256(data).hexdigest() != sha256:
            sys.stderr.write("teamctl-remote: the image arrived damaged (size or sha256 "
                             "differs)\n")
            return 3
        _private_write(root, os.path.join(sha256[:2], sha256), data)
    if into is not None:  # a sandboxed member's own copy (the cache is hidden from it), in
        path = os.path.join(into, sha256)  # its private dir there (read-only to it)
        _private_write(into, sha256, data)
    _say(path)
    return 0


def exists(pattern: str) -> None:
    import glob

    _say("true" if glob.glob(os.path.expanduser(pattern)) else "false")


def version(executable: str) -> None:
    import json
    import shutil
    import subprocess

    found = shutil.which(executable)
    if found is None:
        _say(json.dumps({"found": False}))
        return
    try:
        done = subprocess.run([found, "--version"], capture_output=True, timeout=30)
        text = (done.stdout or done.stderr).decode("utf-8", "replace").strip().splitlines()
    except (OSError, subprocess.TimeoutExpired) as exc:
        text = [f"error: {exc}"]
    _say(json.dumps({"found": True, "path": found, "version": text[0] if text else ""}))


def _mirror(root: str, header: dict[str, Any]) -> None:
    """The member's private dir as the header carries it, made beneath ``root`` only; a
    name a member made in its way (a link where a directory goes) fails that entry alone."""
    for relative in header.get("dirs", []):
        _guarded(relative, lambda r=relative: os.close(_dir_fd(root, r)))
    for relative, text in header.get("files", {}).items():
        _guarded(relative, lambda r=relative, t=text: _private_write(root, r,
                                                                     t.encode("utf-8")))
    for relative, target in header.get("links", {}).items():
        _guarded(relative, lambda r=relative, t=target: _link(root, r, t))


def _guarded(relative: str, make: Any) -> None:
    try:
        make()
    except OSError as exc:
        sys.stderr.write(f"teamctl-remote: {relative} not mirrored: {exc.strerror}\n")


def _stop_earlier(pid_file: str) -> None:
    """An earlier run of this member (its daemon crashed, its channel hung): stop its group."""
    import signal

    try:  # never through a link, never blocking on a FIFO
        fd = os.open(pid_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd) as handle:
            pgid = int(handle.read(64).split()[0])
    except (OSError, ValueError, IndexError):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.2)


def _reaped(pid: int) -> bool:
    """Whether the child ``pid`` has ended, reaping it: for the signal handler, which runs
    inside the main thread's ``child.wait()``, where ``poll()`` cannot take Popen's lock and
    never sees the end (the process exits right after, so Popen's view no longer matters)."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def _kill_group(child: subprocess.Popen[bytes], grace: float, *, reap: bool = False) -> None:
    import signal

    def done() -> bool:
        return _reaped(child.pid) if reap else child.poll() is not None

    deadline = time.monotonic() + grace
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if sig == signal.SIGTERM:
            end = time.monotonic() + 2
            while not done() and time.monotonic() < end:
                time.sleep(0.05)


def _read_header() -> tuple[dict[str, Any], bytes]:
    """The header line, read from fd 0 itself (a buffered reader would keep the runtime's
    first bytes from it), and whatever followed it in the same reads."""
    import json

    buffer = b""
    while b"\n" not in buffer:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            raise SystemExit(0)  # the channel closed before a header: nothing to run
        buffer += chunk
    line, _, rest = buffer.partition(b"\n")
    return json.loads(line.decode("utf-8")), rest


def _sandboxed(spec: dict[str, Any], command: list[str], path_env: str) -> list[str]:
    """``command`` inside bubblewrap: runtimes/hosts/sandbox/plan.py (its source in ``spec``) run
    here as a module, its ``host_argv`` given the policy."""
    import types

    plan = types.ModuleType("teamctl_sandbox_plan")
    sys.modules[plan.__name__] = plan  # its dataclasses look their module up
    exec(compile(spec["plan"], "sandbox_plan.py", "exec"), plan.__dict__)
    argv: list[str] = plan.host_argv(spec, command, path_env, sys.executable)
    return argv


_SAFE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}"
_CEILING_KEYS = ("memory_max", "memory_high", "cpu_weight", "pids_max")
_CONTROLLERS = ("memory", "cpu", "pids")  # a ceiling's (orchestrator/cgroups.py's CONTROLLERS)
_EMPTY_DEADLINE_MAX = 60.0


def _cgroups_module(source: str) -> types.ModuleType:
    """orchestrator/cgroups.py, its source as the request carries it, run here as a module."""
    import types

    module = types.ModuleType("teamctl_cgroups")
    sys.modules[module.__name__] = module  # its dataclasses look their module up
    exec(compile(source, "cgroups.py", "exec"), module.__dict__)
    return module


def cgroup(request: dict[str, Any], cgroups: Any, error: type[Exception]) -> dict[str, Any]:
    """One ``cgroup`` request answered with ``cgroups`` (a ``Cgroups`` of this machine, seen
    from this process; ``error``: its module's CgroupError). A malformed request: ValueError."""
    import re
    import types

    op, top, name = request.get("op"), str(request.get("top")), str(request.get("name", "x"))
    if not re.fullmatch(_SAFE_NAME, top) or not re.fullmatch(_SAFE_NAME, name):
        raise ValueError(f"not a cgroup name: {top!r}/{name!r}")
    controllers = frozenset(str(c) for c in request.get("controllers", ()))
    if (op in ("probe", "make") and not controllers) or not controllers <= set(_CONTROLLERS):
        raise ValueError(f"not the controllers of a ceiling: {sorted(controllers)}")
    if op == "support":
        return dict(cgroups.support(top))
    if op == "probe":
        return {"problem": cgroups.probe(controllers, top)}
    deadline = min(float(request.get("deadline", 5.0)), _EMPTY_DEADLINE_MAX)
    if op == "make":
        ceiling = types.SimpleNamespace(**{key: _whole(request.get("ceiling", {}).get(key))
                                           for key in _CEILING_KEYS})
        try:
            group = cgroups.make(controllers, top, name)
            left = cgroups.empty(group, deadline)  # an earlier start's, its channel lost
            cgroups.limit(group, ceiling)
        except error as exc:
            return {"problem": str(exc)}
        return {**cgroups.wire(group), "left": left}
    if op == "close":
        wired = request.get("group") or {}
        try:
            group = cgroups.held(int(wired.get("version", 0)), dict(wired.get("dirs", {})),
                                 top, name)
        except error as exc:
            return {"problem": str(exc)}
        verdict = cgroups.verdict(group)
        left = cgroups.empty(group, deadline)
        where = os.path.dirname(cgroups.wire(group)["procs"][0])
        return {"oom_kills": verdict.oom_kills, "peak": verdict.peak, "left": left,
                "removed": cgroups.remove(group, top), "where": where}
    raise ValueError(f"unknown cgroup op {op!r}")


def _whole(value: object) -> int | None:
    """A limit as the request carries it: a whole number, or None (not limited)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"not a limit: {value!r}")
    return value


def cgroup_mode() -> int:
    """``cgroup``: the request on stdin, the answer on stdout (exit 2: a malformed request)."""
    import json

    try:
        request = json.loads(sys.stdin.buffer.read(1 << 20).decode("utf-8"))
        module = _cgroups_module(request["source"])
        cgroups = module.Cgroups(machine=str(request.get("machine") or "this host"),
                                 enable=str(request.get("enable") or module.ENABLE_HERE))
        answer = cgroup(request, cgroups, module.CgroupError)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        sys.stderr.write(f"teamctl-remote: a malformed cgroup request: {exc}\n")
        return 2
    _say(json.dumps(answer))
    return 0


def run() -> int:
    import shutil
    import signal
    import subprocess
    import threading

    header, rest = _read_header()
    root = header["root"]
    _mirror(root, header)
    pid_file = os.path.join(root, "remote.pid")
    _stop_earlier(pid_file)
    # a pod's container environment is the member's own (its Secret's keys: envFrom), so
    # it is kept whole ("inherit": "all"); an ssh session's is the host user's: only the basics
    env = {k: v for k, v in os.environ.items() if k in BASE_NAMES or k.startswith("LC_")
           or header.get("inherit") == "all"}
    env.update(header.get("env", {}))
    argv = header["argv"]
    executable = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    if executable is None or not os.access(executable, os.X_OK):
        sys.stderr.write(f"teamctl-remote: executable not found: {argv[0]}\n")
        sys.stderr.flush()
        return 127
    cwd = header.get("cwd") or os.path.expanduser("~")
    if not os.path.isdir(cwd):
        sys.stderr.write(f"teamctl-remote: workdir not found: {cwd}\n")
        sys.stderr.flush()
        return 126
    command = [executable, *argv[1:]]
    if header.get("sandbox"):
        try:
            command = _sandboxed(header["sandbox"], command, env.get("PATH") or os.defpath)
        except LookupError as exc:
            sys.stderr.write(f"teamctl-remote: sandbox unavailable: {exc}\n")
            sys.stderr.flush()
            return 125
    # the member's cgroup: the trampoline writes its own pid into each cgroup.procs, then
    # executes the command (the same pid), so nothing it starts is ever outside
    command = [*header.get("enter", []), *command]
    child = subprocess.Popen(command, cwd=cwd, env=env,
                             stdin=subprocess.PIPE, start_new_session=True)
    _private_write(root, "remote.pid", f"{child.pid}\n".encode())
    grace = float(header.get("grace", 5))
    parent = os.getppid()
    done = threading.Event()

    def pump() -> None:
        try:
            assert child.stdin is not None
            if rest:
                child.stdin.write(rest)
                child.stdin.flush()
            while True:
                chunk = os.read(0, 1 << 16)
                if not chunk:
                    break
                assert child.stdin is not None
                child.stdin.write(chunk)
                child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        try:
            if child.stdin is not None:
                child.stdin.close()
        except OSError:
            pass
        _kill_group(child, grace)
        done.set()

    def orphaned() -> None:
        while not done.wait(1.0):
            if os.getppid() != parent:  # sshd is gone: nobody will read us
                _kill_group(child, 0)
                return

    def stop(signum: int, _frame: object) -> None:
        _kill_group(child, 0, reap=True)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=orphaned, daemon=True).start()
    code = child.wait()
    _kill_group(child, 0)  # whatever it started and left behind
    with contextlib.suppress(OSError):
        os.unlink(pid_file)
    return code if code >= 0 else 128 - code


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "probe":
        probe()
        return 0
    if mode == "put":
        return put(*sys.argv[2:5])
    if mode == "exists":
        exists(sys.argv[2])
        return 0
    if mode == "freeport":  # a free TCP port on the loopback here (a forward's far end)
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            _say(str(sock.getsockname()[1]))
        return 0
    if mode == "mkdir":  # mkdir PATH...: private directories (and their parents)
        for path in sys.argv[2:]:
            os.makedirs(path, mode=0o700, exist_ok=True)
        return 0
    if mode == "which":  # which EXECUTABLE: its path, or nothing (exit 127)
        import shutil

        found = shutil.which(sys.argv[2])
        _say(found or "")
        return 0 if found else 127
    if mode == "version":
        version(sys.argv[2])
        return 0
    if mode == "run":
        return run()
    if mode == "cgroup":
        return cgroup_mode()
    sys.stderr.write(f"teamctl-remote: unknown mode {mode!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
