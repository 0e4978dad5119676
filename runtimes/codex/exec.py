"""Codex over ``codex exec --json`` (protocols/codex.md, codex 0.171.0).

A Codex member is a Codex *thread*. There is no long-lived process: each turn runs

    codex [member args] exec --json --skip-git-repo-check -C WORKDIR [-m MODEL]
          [resume] [--image=PATH]... [THREAD_ID] -

with the prompt written on stdin and stdin then closed (an open stdin blocks codex forever).
The first turn's ``thread.started`` gives the thread id; later turns ``resume`` it by id (never
``--last``, which silently starts a new thread when none matches). ``--image=PATH`` is used,
never the bare variadic flag, which swallows the prompt and ``-``.

A turn ends at ``turn.completed`` (answered; the last ``agent_message`` is the reply) or
``turn.failed`` (failed with the API's message). Top-level ``error`` events are retry notices,
not terminal. A process that exits without a terminal event is ``runtime_exited``. ``usage`` is
cumulative per thread; each turn's difference is logged.

The member's ``config`` table is written (0600) as ``config.toml`` in the member's private
``CODEX_HOME``, which codex reads at every start: nothing of it goes on the command line, where
every local user could read it in ``ps``.

Readiness: the executable answers ``--version`` within ``start_timeout``. Liveness: the turn's
process while one runs. Stop: the stop ladder on the running turn.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, assert_never

import anyio
import structlog

from orchestrator.contracts import (
    Capabilities,
    ImagePart,
    LaunchSpec,
    LineTooLong,
    MemberStartFailed,
    ProtocolError,
    RateLimited,
    RuntimeExited,
    RuntimeNotLoggedIn,
    RuntimeStuck,
    SessionLost,
    TextPart,
    TokenUsage,
    Turn,
    TurnFailed,
    TurnResult,
    UsageReading,
    map_exceptions,
    runtime_info,
)
from runtimes.base import (
    OnSent,
    Spawner,
    StderrRing,
    drain_stderr,
    kill_group,
    member_environ,
    on_host,
    private_file,
    spawn_process,
    stop_process,
    token_count,
    unwrap_group,
)
from runtimes.codex_provider import resolve_provider
from runtimes.framing import decode_line, iter_lines
from runtimes.logins import codex_home, link

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

    from runtimes.base import RuntimeProcess

__all__ = ["RETRYABLE_STATUS", "SANDBOX", "CodexMember", "CodexRuntime", "api_status",
           "build_exec_argv", "config_args", "config_toml", "sandbox_refusal"]

log = structlog.get_logger("teamctl.runtime.codex")

_STATUS = re.compile(r"\b(?:status|last status:)\s*(\d{3})\b")
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_UNKNOWN_THREAD = "no rollout found for thread id"
_EXIT_GRACE = 30.0


class CodexRuntime:
    """The ``codex`` runtime adapter."""

    info = runtime_info("codex")
    name: str = info.name
    default_executable: str = info.default_executable
    env_var: str = info.env_var
    capabilities = Capabilities(
        image_input=True,
        # Codex passes PNG, JPEG and WebP through unchanged; it re-encodes GIF (so an animated
        # GIF would not arrive as planned) and replaces anything else by a note.
        image_mimes=frozenset({"image/png", "image/jpeg", "image/webp"}),
        image_purpose="codex-image-file",
    )

    def __init__(self, *, spawner: Spawner = spawn_process) -> None:
        self._spawner = spawner

    def open(self, spec: LaunchSpec) -> AbstractAsyncContextManager[RuntimeProcess]:
        """The member on its transport: one ``codex app-server`` (``transport =
        "app-server"``), or one ``codex exec`` per turn (the default)."""
        if spec.transport == "app-server":
            from runtimes.codex_app import open_app_server

            return open_app_server(spec, self._spawner)
        return self._open_exec(spec)

    @asynccontextmanager
    async def _open_exec(self, spec: LaunchSpec) -> AsyncIterator[CodexMember]:
        """Check the executable (``--version``) and the login; yield the member; stop its
        turn on exit."""
        version = await self._version(spec)
        if spec.host is None:  # on a host, its own CLI says whether it is logged in there
            check_login(spec, codex_member_home(spec))
        member = CodexMember(spec, self._spawner if spec.host is None else spec.host.spawn,
                             version)
        log.info("runtime_ready", team=spec.team, member=spec.member, version=version,
                 session_id=spec.session_id, resumed=spec.session_id is not None)
        try:
            yield member
        finally:
            await member.close()

    async def _version(self, spec: LaunchSpec) -> str:
        env = build_env(spec)
        if spec.host is not None:
            found = await spec.host.version(spec.executable)
            if not found.get("found"):
                raise MemberStartFailed(spec.member, f"{spec.executable} is not installed on "
                                        f"host {spec.host.name}; install it there, or set "
                                        "command to its absolute path there")
            return str(found.get("version") or "")
        try:
            with anyio.fail_after(spec.start_timeout):
                done = await anyio.run_process([spec.executable, "--version"], env=env,
                                               cwd=spec.workdir, check=False)
        except TimeoutError:
            raise MemberStartFailed(spec.member, f"'{spec.executable} --version' did not "
                                    f"answer within {spec.start_timeout:g}s") from None
        except OSError as exc:
            raise MemberStartFailed(spec.member, f"cannot run {spec.executable}: "
                                    f"{exc.strerror}") from exc
        out = done.stdout.decode(errors="replace").strip()
        if done.returncode != 0 or not out:
            err = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise MemberStartFailed(spec.member, f"'{spec.executable} --version' exited "
                                    f"{done.returncode}: {' | '.join(err)}", err)
        return out.splitlines()[0]


# "full": no sandbox (argv); "ask": the sandbox's refusals become approval requests
# (app-server only: the team file refuses "ask" on exec)
SANDBOX = {"read": "read-only", "edit": "workspace-write", "ask": "read-only"}
_OPERATOR_LINKS = ("auth.json", "AGENTS.md", "prompts", "skills", "rules")
_NEVER_PASSED = ("forced_login_method",)  # it deletes the login it does not want (logins §2.1)


def build_env(spec: LaunchSpec) -> dict[str, str]:
    """The minimal environment, the member's private CODEX_HOME (its config.toml, and with an
    operator login links to the operator's auth.json and instructions), the member's env."""
    home = codex_member_home(spec)
    private_file(home / "config.toml", config_toml(effective_config(spec)))
    return member_environ({"CODEX_HOME": str(home)}, spec.env)


def codex_member_home(spec: LaunchSpec) -> Path:
    home = spec.state_dir / "codex-home"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in _OPERATOR_LINKS:
        target = codex_home() / name
        if spec.login == "operator":
            try:
                link(target, home / name)
            except FileExistsError as exc:
                raise MemberStartFailed(spec.member, f"{exc}; move it away to use the "
                                        "operator's login, or set login = \"isolated\"") from None
        elif (home / name).is_symlink():
            (home / name).unlink()  # an isolated member keeps nothing of the operator's
    return home


def operator_config(spec: LaunchSpec) -> dict[str, Any]:
    """The operator's own config.toml (operator login), without the keys never passed on;
    none for a member on another host (the one there applies)."""
    if spec.login != "operator" or spec.host is not None:
        return {}
    path = codex_home() / "config.toml"
    try:
        config = tomllib.loads(path.read_text()) if path.exists() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise MemberStartFailed(spec.member, f"cannot read the operator's {path}: {exc}") \
            from None
    for key in _NEVER_PASSED:
        config.pop(key, None)
    return config


def effective_config(spec: LaunchSpec) -> dict[str, Any]:
    """What codex runs with: the operator's config (operator login), the member's ``config``
    over it, and the permission profile's sandbox over both."""
    config = _merged(operator_config(spec), dict(spec.config))
    if spec.mcp is not None:  # on every exec, resume included; it must be up before the turn
        servers = config.setdefault("mcp_servers", {})
        servers["teamctl"] = {"command": spec.mcp.command[0], "args": list(spec.mcp.command[1:]),
                              "env": dict(spec.mcp.env), "required": True,
                              "default_tools_approval_mode": "approve"}
        # codex's own sub-agents would bypass the router (unless the member's config asks)
        features = config.setdefault("features", {})
        if isinstance(features, dict):
            features.setdefault("multi_agent", False)
    if spec.permissions in SANDBOX:
        config["sandbox_mode"] = SANDBOX[spec.permissions]
        config["approval_policy"] = "on-request" if spec.permissions == "ask" else "never"
    return config


def _usable_auth(path: Path) -> bool:
    try:
        auth = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(auth, dict) and bool(auth.get("OPENAI_API_KEY") or auth.get("tokens"))


def _merged(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def check_login(spec: LaunchSpec, home: Path) -> None:
    """The preflight: the credential the configured provider needs must be there — a member
    that is not logged in fails to start with the fix, not with a 401 on its first turn."""
    provider = resolve_provider(effective_config(spec), spec.args)
    if provider.env_key:
        if provider.env_key not in spec.env:
            raise RuntimeNotLoggedIn(spec.member, "codex", f"its provider {provider.id!r} reads "
                                     f"{provider.env_key}: set it in the member's env (or "
                                     "pass_env)")
        return
    if not provider.needs_openai_auth or "CODEX_API_KEY" in spec.env:
        return
    if (home / "auth.json").exists():
        if _usable_auth(home / "auth.json"):
            return
        raise RuntimeNotLoggedIn(spec.member, "codex", f"{(home / 'auth.json').resolve()} is "
                                 "unreadable or holds no login: run 'codex login' again, or "
                                 "set CODEX_API_KEY in the member's env")
    store = operator_config(spec).get("cli_auth_credentials_store")
    if spec.login == "operator" and store in ("keyring", "auto"):
        fix = (f"the operator's login is kept in the OS keyring (cli_auth_credentials_store = "
               f"{store!r}), so there is no file to share; set CODEX_API_KEY in the member's "
               "env, or log in with cli_auth_credentials_store = \"file\"")
    elif spec.login == "operator":
        fix = (f"no {codex_home() / 'auth.json'}: run 'codex login' (or 'codex login "
               "--with-api-key'), or set CODEX_API_KEY in the member's env")
    else:
        fix = "this member's login is isolated: set CODEX_API_KEY in its env"
    raise RuntimeNotLoggedIn(spec.member, "codex", fix)


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def config_toml(config: Mapping[str, Any]) -> str:
    """The member's ``config`` table as a TOML document: one dotted key per leaf, exactly what
    ``-c key=value`` would have set."""
    lines = ["# written by teamctl from the member's [members.config]; rewritten at each start"]
    lines += [f"{key} = {value}" for key, value in _leaves(config)]
    return "\n".join(lines) + "\n"


def _leaves(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for key, value in config.items():
        part = key if _BARE_KEY.match(key) else json.dumps(key)
        if isinstance(value, Mapping):
            found += _leaves(value, f"{prefix}{part}.")
        else:
            found.append((f"{prefix}{part}", _toml(value)))
    return found


def config_args(config: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The member's ``config`` table as one ``-c key=value`` per leaf (values in TOML)."""
    args: list[str] = []
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            args += config_args(value, prefix=f"{dotted}.")
        else:
            args += ["-c", f"{dotted}={_toml(value)}"]
    return args


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):  # inside an array (an array of tables): an inline table
        pairs = (f"{k if _BARE_KEY.match(k) else json.dumps(k)} = {_toml(v)}"
                 for k, v in value.items())
        return "{ " + ", ".join(pairs) + " }"
    raise TypeError(f"cannot pass {type(value).__name__} to codex -c")


def build_exec_argv(spec: LaunchSpec, *, thread_id: str | None,
                    images: list[Path]) -> list[str]:
    """The command line of one turn (the prompt goes on stdin: the trailing ``-``)."""
    argv = [spec.executable, *spec.args, "exec", "--json", "--skip-git-repo-check",
            "-C", str(spec.workdir)]
    if spec.model:
        argv += ["-m", spec.model]
    if spec.permissions == "full":
        argv.append("--dangerously-bypass-approvals-and-sandbox")
    if thread_id:
        argv.append("resume")
    argv += [f"--image={path}" for path in images]
    if thread_id:
        argv.append(thread_id)
    argv.append("-")
    return argv


_SANDBOX_REFUSALS = ("Read-only file system", "Operation not permitted",
                     "blocked by read-only sandbox")


def sandbox_refusal(spec: LaunchSpec, command: Any, output: Any) -> str | None:
    """The history note (and the ``permission_denied`` log line) for a command the profile's
    sandbox refused, judged by its output; None for any other failure."""
    if not any(refusal in str(output or "") for refusal in _SANDBOX_REFUSALS):
        return None
    target = str(command or "")[:200]
    log.warning("permission_denied", team=spec.team, member=spec.member, tool="command",
                target=target, message="refused by the sandbox")
    return f"permission denied: command {target}: refused by the {spec.permissions} " \
        "profile's sandbox"


class _Turn:
    def __init__(self) -> None:
        self.replies: list[str] = []
        self.notes: list[str] = []
        self.terminal: dict[str, Any] | None = None
        self.thread_id: str | None = None
        self.message_id = ""


class CodexMember:
    """One Codex thread; one ``codex exec`` process per turn."""

    def __init__(self, spec: LaunchSpec, spawner: Spawner, version: str) -> None:
        self._spec = spec
        self._spawner = spawner
        self.version = version
        self._thread_id = spec.session_id
        self.resumed = spec.session_id is not None  # every exec resumes the recorded thread
        self._process: Process | None = None
        self._ring = StderrRing()
        self._closed = anyio.Event()
        self._exit_code: int | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def session_id(self) -> str | None:
        return self._thread_id

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    @property
    def healthy(self) -> bool:
        return self.usable

    @property
    def activity(self) -> str | None:
        return None

    @property
    def usable(self) -> bool:
        return not self._closed.is_set()

    def stderr_tail(self) -> list[str]:
        return self._ring.tail()

    async def wait(self) -> int | None:
        """A Codex member has no process between turns: it runs until it is stopped."""
        await self._closed.wait()
        return self._exit_code

    async def probe(self, timeout: float) -> bool:
        """No process lives between turns, so nothing can freeze: an idle exec member is
        alive while it is open (its executable was found at start; each turn is its own
        process, watched by the turn's idle timeout). On an SSH host the supervisor also
        asks the host's master (``RemoteHost.master_answers``)."""
        return self.usable

    def kill(self) -> None:
        if self._process is not None:
            kill_group(self._process)

    async def close(self) -> None:
        self._closed.set()
        if self._process is not None:
            self._exit_code = await stop_process(self._process)

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        text, images = self._split(await on_host(self._spec, turn))
        sent = False

        async def once() -> None:  # a retry on a fresh thread is the same delivery
            nonlocal sent
            if not sent:
                sent = True
                await on_sent()

        try:
            return await self._run(self._prompt(text), images, once, turn.message_id)
        except SessionLost:
            lost, self._thread_id, self.resumed = self._thread_id, None, False
            log.warning("session_lost", team=self._spec.team, member=self._spec.member,
                        lost_session=lost, reason="codex has no rollout for this thread")
            if turn.continues:  # a continuation means nothing to a new thread: sent whole
                raise
            return await self._run(self._prompt(text), images, once, turn.message_id)

    def _prompt(self, text: str) -> str:
        """``codex exec`` has no system-prompt flag: the role opens each new thread."""
        if self._thread_id or not self._spec.prompt:
            return text
        return f"{self._spec.prompt}\n\n{text}"

    def _split(self, turn: Turn) -> tuple[str, list[Path]]:
        texts: list[str] = []
        images: list[Path] = []
        for part in turn.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ImagePart):
                if part.path is None or "," in str(part.path):
                    raise TurnFailed(self._spec.member, "an image file path codex cannot take "
                                     "(missing, or with a comma)", api_status=None,
                                     retryable=False)
                images.append(part.path)
            else:
                assert_never(part)
        return "\n\n".join(texts), images

    async def _run(self, prompt: str, images: list[Path], on_sent: OnSent,
                   message_id: str = "") -> TurnResult:
        argv = build_exec_argv(self._spec, thread_id=self._thread_id, images=images)
        try:
            process = await self._spawner(argv, cwd=self._spec.workdir,
                                          env=build_env(self._spec))
        except OSError as exc:
            raise RuntimeExited(self._spec.member, None, [f"cannot start codex: {exc}"]) from exc
        self._process, self._ring = process, StderrRing()
        state = _Turn()
        state.message_id = message_id
        try:
            with unwrap_group():
                await self._converse(process, prompt, on_sent, state)
        finally:
            if process.returncode is None:
                await stop_process(process, eof_timeout=1.0)
            self._exit_code = process.returncode
            self._process = None
        return self._outcome(state, process.returncode)

    async def _converse(self, process: Process, prompt: str, on_sent: OnSent,
                        state: _Turn) -> None:
        """Write the prompt, then read the turn's events to its end (stderr drained aside)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain_stderr, process, self._ring)
            await self._send_prompt(process, prompt)
            await on_sent()
            await self._read_events(process, state)
            tg.cancel_scope.cancel()

    async def _send_prompt(self, process: Process, prompt: str) -> None:
        assert process.stdin is not None
        try:
            await process.stdin.send(prompt.encode())
            await process.stdin.aclose()  # codex reads the prompt until EOF
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            await process.wait()
            raise RuntimeExited(self._spec.member, process.returncode,
                                self._ring.tail()) from exc

    async def _read_events(self, process: Process, state: _Turn) -> None:
        assert process.stdout is not None
        idle = self._spec.turn_idle_timeout
        lines = iter_lines(process.stdout).__aiter__()
        while True:
            with anyio.move_on_after(idle) as scope:
                try:
                    line = await lines.__anext__()
                except StopAsyncIteration:
                    break
                except LineTooLong as exc:
                    kill_group(process)
                    raise RuntimeExited(self._spec.member, None,
                                        [f"protocol error: {exc.message}"]) from exc
            if scope.cancelled_caught:
                log.warning("turn_stuck", team=self._spec.team, member=self._spec.member,
                            idle_timeout=idle)
                kill_group(process)
                raise RuntimeStuck(self._spec.member, idle)
            self._handle(line, state)

        def no_exit(_exc: BaseException) -> RuntimeExited:
            kill_group(process)
            return RuntimeExited(self._spec.member, None, [
                f"codex closed its output but did not exit within {_EXIT_GRACE:g}s"])

        with map_exceptions({TimeoutError: no_exit}), anyio.fail_after(_EXIT_GRACE):
            await process.wait()

    def _handle(self, line: bytes, state: _Turn) -> None:
        try:
            event = decode_line(line)
        except ProtocolError as exc:
            log.warning("runtime_corrupt_line", member=self._spec.member, error=exc.message)
            return
        if event is None:
            return
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self._thread_id = state.thread_id = event["thread_id"]
        elif kind == "item.completed":
            self._on_item(event.get("item") or {}, state)
        elif kind in ("turn.completed", "turn.failed"):
            state.terminal = event
        elif kind == "error":
            log.info("runtime_retry_notice", team=self._spec.team, member=self._spec.member,
                     message=str(event.get("message", ""))[:300])

    def _on_item(self, item: dict[str, Any], state: _Turn) -> None:
        if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
            state.replies.append(item["text"])
        elif item.get("type") == "command_execution" and item.get("exit_code") not in (0, None):
            note = sandbox_refusal(self._spec, item.get("command"), item.get("aggregated_output"))
            state.notes += [note] if note else []
        elif item.get("type") == "error":
            log.info("runtime_warning", team=self._spec.team, member=self._spec.member,
                     message=str(item.get("message", ""))[:300])

    def _outcome(self, state: _Turn, exit_code: int | None) -> TurnResult:
        terminal = state.terminal
        if terminal is None:
            tail = self._ring.tail()
            if exit_code == 1 and any(_UNKNOWN_THREAD in line for line in tail):
                raise SessionLost(self._spec.member, self._thread_id,
                                  "codex has no rollout for this thread")
            raise RuntimeExited(self._spec.member, exit_code, tail)
        self._charge(state, terminal.get("usage"))
        if terminal["type"] == "turn.failed":
            message = str((terminal.get("error") or {}).get("message") or "the turn failed")
            if _USAGE_LIMIT in message:
                raise RateLimited(self._spec.member, message, until=None)
            status = api_status(message)
            retryable = status in RETRYABLE_STATUS or "stream disconnected" in message
            raise TurnFailed(self._spec.member, message, api_status=status,
                             retryable=retryable)
        return TurnResult(reply=state.replies[-1] if state.replies else "",
                          session_id=self._thread_id, notes=tuple(state.notes))

    def _charge(self, state: _Turn, usage: Any) -> None:
        """``turn.completed.usage`` is the thread's running total (protocols/codex.md §9.4):
        the ledger charges its increase since it last settled this thread."""
        if not isinstance(usage, dict) or self._spec.meter is None or not state.message_id:
            return
        total = TokenUsage(**{k: token_count(usage, k) for k in TokenUsage.FIELDS})
        log.info("turn_usage", team=self._spec.team, member=self._spec.member,
                 thread_tokens=total.total)
        self._spec.meter.reading(state.message_id, UsageReading(
            tokens=total, model=self._spec.model, counter=f"codex-thread:{self._thread_id}"))


_USAGE_LIMIT = "hit your usage limit"  # the CLI's words for a subscription's spent window


def api_status(message: str) -> int | None:
    """The HTTP status an error message names ("unexpected status 401 …"), if any."""
    match = _STATUS.search(message)
    return int(match.group(1)) if match else None
