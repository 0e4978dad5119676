"""The daemon driver for the tests that run a real one: ``Teamctl`` (the CLI as a subprocess
against one private ``TEAMCTL_HOME``, raw requests on the control socket, the log's events),
``LogFollower`` (``teamctl logs -f`` with a deadline), team files written from Python, the
throwaway operator home a member logs in from, and a message queued behind a busy turn. The
fixtures that build them (``teamctl``, ``follow_logs``) are tests/conftest.py's."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.cli_fork import run_cli, start_call
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]
SYSTEM_DEPS = REPO / ".ci" / "system-deps"


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


class LogFollower:
    """``teamctl logs -f --json`` in a process of its own (forked as the CLI calls are:
    cli_fork.start_call); wait for an event with a deadline."""

    def __init__(self, ctl: Teamctl) -> None:
        self._process = start_call(["logs", "-f", "--json"], env=ctl.env, cwd=ctl.workdir)
        self._buffer = b""
        self.seen: list[dict[str, Any]] = []

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The first event (from the start of the log) that matches, waiting for it."""
        checked = 0
        fd = self._process.fileno()
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

    def wait_after(self, first: Any, then: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The first event matching ``then`` that comes after the first matching ``first``
        (an event of a later moment than one already seen), waiting for it."""
        passed = False

        def after(event: dict[str, Any]) -> bool:
            nonlocal passed
            if not passed:
                passed = bool(first(event))
                return False
            return bool(then(event))
        return self.wait_for(after, timeout)

    def close(self) -> None:
        self._process.terminate(timeout=10)


def _monotonic() -> float:
    import time

    return time.monotonic()


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
