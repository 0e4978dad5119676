"""What both Codex transports share (protocols/codex.md): the member's launch configuration —
its private ``CODEX_HOME`` (config.toml 0600, links to the operator's login), the permission
profile's sandbox table, the login preflight — and how a failure reads (the API's status, a
sandbox's refusal). ``exec`` and ``app_server`` import this; never each other.

The member's ``config`` table is written (0600) as ``config.toml`` in the member's private
``CODEX_HOME``, which codex reads at every start: nothing of it goes on the command line, where
every local user could read it in ``ps``.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

from orchestrator.contracts import (
    CodexSandboxUnusable,
    LaunchSpec,
    MemberStartFailed,
    Placed,
    RuntimeNotLoggedIn,
    read_beneath,
    read_regular,
)
from runtimes.codex.helper import helper_dirs, helper_env, helper_problem
from runtimes.codex.provider import merged_config, resolve_provider
from runtimes.kit import report_tool
from runtimes.kit.base import member_environ, private_file
from runtimes.kit.logins import codex_home

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["APPROVAL_POLICY", "SANDBOX", "api_status", "build_env",
           "check_login", "codex_home_in", "codex_member_home", "config_args", "config_toml",
           "effective_config", "profile_sandbox", "report_item", "sandbox_mode",
           "sandbox_refusal"]

log = structlog.get_logger("teamctl.runtime.codex")

_STATUS = re.compile(r"\b(?:status|last status:)\s*(\d{3})\b")


# each permission profile's sandbox, once for both transports. "full": exec passes
# --dangerously-bypass-approvals-and-sandbox instead; "ask": read-only, and the sandbox's refusals
# become approval requests (approval "on-request"; app-server only: the team file refuses "ask"
# on exec)
SANDBOX = {"read": "read-only", "edit": "workspace-write", "ask": "read-only",
           "full": "danger-full-access"}
APPROVAL_POLICY = {"ask": "on-request"}  # the others: never


def sandbox_mode(spec: LaunchSpec) -> str:
    """The member's codex sandbox (``profile_sandbox``), inside teamctl's sandbox or not."""
    return profile_sandbox(spec.permissions,
                           in_teamctl_sandbox=spec.host.profile.confines_processes)


def profile_sandbox(permissions: str, *, in_teamctl_sandbox: bool) -> str:
    """The profile's sandbox, but ``danger-full-access`` for ``read`` and ``edit`` inside
    teamctl's sandbox: codex's own bubblewrap cannot map its uids inside our user namespace
    (every command would fail), and ours is the boundary — the workdir the only writable
    project path, read-only for ``read`` (docs/permissions.md). (``ask`` there: refused by
    the team file.)"""
    if in_teamctl_sandbox and permissions in ("read", "edit"):
        return "danger-full-access"
    return SANDBOX[permissions]


_OPERATOR_LINKS = ("auth.json", "AGENTS.md", "prompts", "skills", "rules")
_NEVER_PASSED = ("forced_login_method",)  # it deletes the login it does not want (logins §2.1)


def build_env(spec: LaunchSpec) -> dict[str, str]:
    """The minimal environment, the member's private CODEX_HOME (its config.toml, and with an
    operator login links to the operator's auth.json and instructions) and temp dir (so codex
    makes its sandbox helper's links: ``helper``), the member's env. The config is the
    daemon's file (the member's private dir), placed in CODEX_HOME by its host: a copy here,
    bound read-only in a sandbox (``Host.place``). CodexSandboxUnusable where codex's own
    sandbox would run none of its commands."""
    home = codex_member_home(spec)
    config = private_file(spec.state_dir / "codex-config.toml",
                          config_toml(effective_config(spec)))
    try:
        spec.host.place([Placed(spec.runtime_home, _CODEX_HOME),
                         Placed(spec.runtime_home, f"{_CODEX_HOME}/config.toml", source=config),
                         *_operator_links(spec), *helper_dirs(spec.runtime_home)])
    except FileExistsError as exc:
        raise MemberStartFailed(spec.member, f"{exc}; move it away to use the operator's "
                                "login, or set login = \"isolated\"") from None
    except OSError as exc:  # a link where a directory of its home goes: the member's doing
        raise MemberStartFailed(spec.member, f"cannot make its CODEX_HOME in {home}: "
                                f"{exc.strerror}") from None
    env = member_environ({"CODEX_HOME": str(home), **helper_env(spec.runtime_home)}, spec.env)
    # this machine's PATH and TMPDIR are the member's; a host elsewhere is not looked at here
    problem = helper_problem(home, env, sandbox_mode(spec)) \
        if spec.host.profile.checks_local_login else None
    if problem is not None:
        raise CodexSandboxUnusable(spec.member, *problem)
    return env


_CODEX_HOME = "codex-home"


def codex_member_home(spec: LaunchSpec) -> Path:
    return codex_home_in(spec.runtime_home)


def codex_home_in(runtime_home: Path) -> Path:
    """A member's CODEX_HOME in its runtime home."""
    return runtime_home / _CODEX_HOME


def _operator_links(spec: LaunchSpec) -> list[Placed]:
    """With ``login = "operator"``, links to the operator's own login and instructions that
    exist; an isolated member keeps nothing of the operator's (an old link is removed)."""
    placed = []
    for name in _OPERATOR_LINKS:
        at = f"{_CODEX_HOME}/{name}"
        target = codex_home() / name
        if spec.login == "operator" and target.exists():
            placed.append(Placed(spec.runtime_home, at, link=str(target)))
        else:
            placed.append(Placed(spec.runtime_home, at, unlink=True))
    return placed


def operator_config(spec: LaunchSpec) -> dict[str, Any]:
    """The operator's own config.toml (operator login), without the keys never passed on;
    none for a member on another host (the one there applies)."""
    if spec.login != "operator" or not spec.host.profile.checks_local_login:
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
    config = merged_config(operator_config(spec), spec.config)
    if spec.mcp is not None:  # on every exec, resume included; it must be up before the turn
        servers = config.setdefault("mcp_servers", {})
        servers["teamctl"] = {"command": spec.mcp.command[0], "args": list(spec.mcp.command[1:]),
                              "env": dict(spec.mcp.env), "required": True,
                              "default_tools_approval_mode": "approve"}
        # codex's own sub-agents would bypass the router (unless the member's config asks)
        features = config.setdefault("features", {})
        if isinstance(features, dict):
            features.setdefault("multi_agent", False)
    if spec.permissions in SANDBOX and spec.permissions != "full":  # full: exec's flag
        config["sandbox_mode"] = sandbox_mode(spec)
        config["approval_policy"] = APPROVAL_POLICY.get(spec.permissions, "never")
    return config


def _auth_file(spec: LaunchSpec, home: Path) -> tuple[Path, bytes | None]:
    """The login file codex will read and its bytes (None: absent or unreadable): the
    operator's own for an operator login (what the member's link points at), else the
    member's — read without following a name in its home, never blocking on a FIFO."""
    operator = spec.login == "operator"
    path = codex_home() / "auth.json" if operator else home / "auth.json"
    try:
        return path, (read_regular(path) if operator else
                      read_beneath(spec.runtime_home, f"{_CODEX_HOME}/auth.json"))
    except FileNotFoundError:
        return path, None
    except OSError:
        return path, b""


def _usable_auth(data: bytes) -> bool:
    try:
        auth = json.loads(data)
    except ValueError:
        return False
    return isinstance(auth, dict) and bool(auth.get("OPENAI_API_KEY") or auth.get("tokens"))


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
    path, data = _auth_file(spec, home)
    if data is not None:
        if _usable_auth(data):
            return
        raise RuntimeNotLoggedIn(spec.member, "codex", f"{path} is unreadable or holds no "
                                 "login: run 'codex login' again, or set CODEX_API_KEY in the "
                                 "member's env")
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


def api_status(message: str) -> int | None:
    """The HTTP status an error message names ("unexpected status 401 …"), if any."""
    match = _STATUS.search(message)
    return int(match.group(1)) if match else None


def report_item(spec: LaunchSpec, message_id: str, item: Any, *, completed: bool,
                names: Mapping[str, str], mcp: str, arguments: tuple[str, ...]) -> None:
    """An item that is a tool call (a command, a file change, an MCP or dynamic tool, a web
    search), started, updated or completed, for the record of the turn's tool calls — the
    same on both transports but for their item names: ``names`` (its type → the span's name,
    where the item names none), ``mcp`` (the MCP tool call's type: named ``server.tool``),
    ``arguments`` (the keys kept). A completed item ended as its ``status`` says (failed,
    declined: failed)."""
    if not isinstance(item, dict) or item.get("type") not in names:
        return
    kind = str(item.get("type"))
    name = f"{item.get('server')}.{item.get('tool')}" if kind == mcp else \
        str(item.get("tool") or names[kind])
    status = item.get("status")
    report_tool(spec, message_id, item.get("id"), name,
                "failed" if status in ("failed", "declined") else
                "completed" if completed or status == "completed" else "running",
                {k: item[k] for k in arguments if k in item})
