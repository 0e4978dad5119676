"""Shared helpers: a private TEAMCTL_HOME per test, the teamctl CLI as a real subprocess,
team files written from Python, and event-based waits on process exit (pidfd)."""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

from tests.cli_fork import run_cli

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

REPO = Path(__file__).resolve().parents[1]

# Property tests get a bounded budget: a fixed number of examples and no per-example deadline
# (a deadline is a wall-clock assertion, and the suite shares its cores). ``thorough`` is the
# same properties with ten times the examples: TEAMCTL_HYPOTHESIS=thorough make unit.
settings.register_profile("suite", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=400, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("TEAMCTL_HYPOTHESIS", "suite"))
FAKE_CLAUDE = REPO / "fixtures" / "bin" / "claude"


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker leaves without tearing its interpreter down. Its results are with the
    controller by then (a worker's atexit runs once the controller closed its channel); what
    is left is freeing every object of a run, ~1 s, while the controller waits on each worker
    to exit (py-spy: ``Group.terminate`` → ``Popen.wait``): 1.1-1.6 s of the unit layer's
    wall. Registered first, so it runs after every other exit handler."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        atexit.register(_leave)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded — every module, class and test item — lives as long as the
    run: frozen out of the cyclic collector, a full collection no longer walks it (each one
    during the run, and the several pytest makes at its end: ~0.45 s of a unit worker)."""
    gc.freeze()


def _leave() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + ", ".join(pairs) + " }"
    raise TypeError(value)


def team_toml(name: str, members: list[dict[str, Any]], **team: Any) -> str:
    hosts: dict[str, dict[str, Any]] = team.pop("hosts", {})  # [hosts.NAME] tables
    lines = ["[team]", f"name = {toml_value(name)}"]
    lines += [f"{k} = {toml_value(v)}" for k, v in team.items()]
    for host, table in hosts.items():
        lines += ["", f"[hosts.{host}]"] + [f"{k} = {toml_value(v)}" for k, v in table.items()]
    for member in members:
        lines += ["", "[[members]]"] + [f"{k} = {toml_value(v)}" for k, v in member.items()]
    return "\n".join(lines) + "\n"


CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                   "CODEX_API_KEY", "OPENAI_API_KEY", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
                   "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


def operator_home(path: Path, *, logins: bool = True) -> Path:
    """A throwaway operator HOME: the daemon's HOME in tests, so a member with the default
    ``login = "operator"`` uses it, never the real one. It holds logins of the captured shapes
    (protocols/logins.md), fake tokens: a Claude subscription, a Codex API-key login (what
    ``codex login --with-api-key`` writes), OpenCode api entries."""
    path.mkdir(parents=True, exist_ok=True)
    if logins:
        codex = path / ".codex"
        codex.mkdir(exist_ok=True)
        (codex / "auth.json").write_text(json.dumps(
            {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-proj-FAKE-OPERATOR-CODEX-KEY"}))
        (codex / "auth.json").chmod(0o600)
        opencode = path / ".local" / "share" / "opencode"
        opencode.mkdir(parents=True, exist_ok=True)
        (opencode / "auth.json").write_text(json.dumps({
            provider: {"type": "api", "key": f"sk-FAKE-OPERATOR-{provider.upper()}"}
            for provider in ("openrouter", "openai", "anthropic")}))
        (opencode / "auth.json").chmod(0o600)
        claude = path / ".claude"
        claude.mkdir(exist_ok=True)
        credentials = claude / ".credentials.json"
        credentials.write_text(json.dumps({"claudeAiOauth": {
            "accessToken": "sk-ant-oat01-FAKE-OPERATOR-ACCESS",
            "refreshToken": "sk-ant-ort01-FAKE-OPERATOR-REFRESH",
            "expiresAt": 4102444800000, "scopes": ["user:inference", "user:profile"],
            "subscriptionType": "max", "rateLimitTier": "default_claude_max_20x"}}))
        credentials.chmod(0o600)
    return path


def fake_member(name: str, **extra: Any) -> dict[str, Any]:
    member = {"name": name, "runtime": "claude", "model": "claude-sonnet-4-5",
              "command": str(FAKE_CLAUDE), "start_timeout": 20.0}
    member.update(extra)
    return member


def socket_exchange(path: Path, payload: bytes, timeout: float = 30.0) -> bytes:
    """Write ``payload`` on a Unix socket and read one answer line (a raw client)."""
    import contextlib
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        # the daemon stops reading past its limit; its answer is buffered for us
        with contextlib.suppress(BrokenPipeError):
            sock.sendall(payload)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def wait_pid_exit(pid: int, timeout: float) -> bool:
    """True once ``pid`` has exited (pidfd: an event, not a poll loop); False at the deadline."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def wait_for_path(path: Path, timeout: float) -> bool:
    """True once ``path`` exists (inotify through watchfiles: an event, not a poll loop)."""
    import time

    import watchfiles

    if path.exists():
        return True
    deadline = time.monotonic() + timeout
    for _changes in watchfiles.watch(path.parent, yield_on_timeout=True, rust_timeout=500,
                                     debounce=10, step=10):
        if path.exists():
            return True
        if time.monotonic() > deadline:
            return False
    return path.exists()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not _is_zombie(pid)


def children_of(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (a /proc scan: a reader or a runtime left
    running would be one)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


@dataclass
class Teamctl:
    """The CLI against one private home."""

    home: Path
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    spawned: list[subprocess.Popen[str]] = field(default_factory=list)

    def run(self, *args: str, input: str | None = None, timeout: float = 90.0,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra_env or {})}
        return run_cli(list(args), input=input, timeout=timeout, env=env, cwd=self.workdir)

    def json(self, *args: str, **kwargs: Any) -> Any:
        done = self.run(*args, "--json", **kwargs)
        assert done.stdout, done.stderr
        return json.loads(done.stdout)

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One raw JSON-RPC request on the control socket, as a hostile client writes it."""
        answer: dict[str, Any] = json.loads(socket_exchange(
            self.home / "teamctl.sock", json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                                   "params": params}).encode() + b"\n"))
        if "error" in answer:
            answer["error"] = dict(answer["error"], code=answer["error"]["data"]["code"])
        return answer

    def write_team(self, name: str, members: list[dict[str, Any]], **team: Any) -> Path:
        path = self.workdir / f"{name}.toml"
        path.write_text(team_toml(name, members, **team))
        return path

    def daemon_pid(self) -> int | None:
        try:
            text = (self.home / "daemon.pid").read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None

    def member_pids(self) -> list[int]:
        """The members' pids from the daemon's ``status`` (the document ``status --json``
        prints), asked on the socket: no CLI process to start. [] when no daemon answers."""
        try:
            doc = self.rpc("status", {"team": None}).get("result")
        except (OSError, ValueError):  # no socket, nobody listening, no answer
            return []
        if not doc:
            return []
        return [m["pid"] for t in doc["teams"] for m in t["members"] if m["pid"]]

    def log_events(self) -> list[dict[str, Any]]:
        path = self.home / "logs" / "teamctl.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def shutdown(self) -> None:
        """Stop everything; prove the daemon and every member process are gone. The request
        is the one ``teamctl stop`` sends (that command's own tests run it), written on the
        socket: no CLI process to start after every test."""
        pid = self.daemon_pid()
        members = self.member_pids()
        stop = {"jsonrpc": "2.0", "id": 1, "method": "stop", "params": {"team": None}}
        with contextlib.suppress(OSError):  # no daemon: nothing to stop
            socket_exchange(self.home / "teamctl.sock", json.dumps(stop).encode() + b"\n",
                            timeout=120.0)
        for process in self.spawned:
            process.wait(timeout=30)
        for child in [*members, *([pid] if pid else [])]:
            if not wait_pid_exit(child, 30.0):
                os.kill(child, signal.SIGKILL)
                raise AssertionError(f"process {child} outlived 'teamctl stop'")


def fakes_path(path: str) -> str:
    """``path`` with this interpreter's directory first: the fake CLIs' ``#!/usr/bin/env
    python3`` finds it at once instead of a version manager's shim (pyenv's is a shell script
    that forks several processes, a few tenths of a second for every member started)."""
    first = str(Path(sys.executable).parent)
    return os.pathsep.join([first, *(p for p in path.split(os.pathsep) if p and p != first)])


@pytest.fixture
def teamctl(tmp_path: Path) -> Iterator[Teamctl]:
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEAMCTL_", "FAKE_CLAUDE_"))
           and k not in CREDENTIAL_VARS}
    env["TEAMCTL_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env["HOME"] = str(operator_home(tmp_path / "operator"))
    env["PATH"] = fakes_path(env.get("PATH", ""))
    # `opencode serve` (and its fake) never exits at the end of its stdin: SIGTERM at once
    env["TEAMCTL_OPENCODE_STOP_GRACE"] = "0"
    ctl = Teamctl(home, work, env)
    yield ctl
    ctl.shutdown()


class LogFollower:
    """``teamctl logs -f --json`` in a subprocess; wait for an event with a deadline."""

    def __init__(self, ctl: Teamctl) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "logs", "-f", "--json"], env=ctl.env,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ctl.workdir,
        )
        self._buffer = b""
        self.seen: list[dict[str, Any]] = []

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The first event (from the start of the log) that matches, waiting for it."""
        checked = 0
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        deadline = _monotonic() + timeout
        while True:
            for event in self.seen[checked:]:
                if predicate(event):
                    return event
            checked = len(self.seen)
            remaining = deadline - _monotonic()
            if remaining <= 0:
                break
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self._buffer += chunk
            *lines, self._buffer = self._buffer.split(b"\n")
            self.seen += [json.loads(line) for line in lines if line.strip()]
        raise AssertionError(f"no matching log event within {timeout}s")

    def close(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)
        if self._process.stdout is not None:
            self._process.stdout.close()


def _monotonic() -> float:
    import time

    return time.monotonic()


@pytest.fixture
def follow_logs(teamctl: Teamctl) -> Iterator[LogFollower]:
    follower = LogFollower(teamctl)
    yield follower
    follower.close()


def queue_behind_a_busy_turn(teamctl: Teamctl, follow_logs: LogFollower, member: str,
                             attachment: Path) -> tuple[dict[str, Any], Callable[[], None]]:
    """Hold ``member`` (a fake Claude) in a gated turn, then send a message with
    ``attachment``: it is journaled but not delivered until the test calls the returned
    ``release`` — whatever the machine's speed. Its history entry (state ``queued``)."""
    gate = teamctl.workdir / f"gate-{member}-{len(list(teamctl.workdir.glob('gate-*')))}"
    teamctl.run("send", member, f"GATE {gate}")
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent")
    queued = teamctl.json("send", "--attach", str(attachment), member, "look")
    [message] = [m for m in teamctl.json("history", member)["messages"]
                 if m["id"] == queued["id"]]
    assert message["state"] == "queued"
    return dict(message), gate.touch
