"""``teamctl doctor [TEAMFILE]``: which runtime executables are found, and their versions;
with a team file, which credential each member will use (kind and source, never the secret).

It reads the CLIs' own login locations through ``runtimes.kit.logins`` (standard library only),
the same place the members' preflight looks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.acp_agents import ACP_AGENTS
from orchestrator.runtime_table import ACP, CLAUDE, CODEX, OPENCODE, RUNTIMES, runtime_info
from runtimes.kit import logins

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.config import MemberConfig, ResolvedMember, TeamConfig
    from orchestrator.runtime_table import RuntimeInfo
    from runtimes.hosts.sandbox.doctor import StartInside
    from runtimes.hosts.sandbox.plan import SandboxPolicy

__all__ = ["describe_members", "inspect_cgroups", "inspect_host", "inspect_runtimes"]


def inspect_runtimes(config: TeamConfig | None = None, *,
                     timeout: float = 10.0) -> dict[str, Any]:
    """The runtimes' executables here, found or not, and their versions: with a team file
    only those its members on this machine run (each once), without one every runtime and
    ACP agent teamctl knows (each once) — a Claude-only team was shown three CLIs "not
    found", and ``acp`` an executable it does not have."""
    rows = []
    for runtime, agent, command in _wanted(config):
        path = shutil.which(command) if command else None
        version = None
        if path:
            try:
                done = subprocess.run([path, "--version"], capture_output=True, text=True,
                                      timeout=timeout, check=False, stdin=subprocess.DEVNULL)
                version = (done.stdout or done.stderr).strip().splitlines()[0:1]
            except (OSError, subprocess.TimeoutExpired) as exc:
                version = [f"error: {exc}"]
        rows.append({"runtime": runtime.name, "acp_agent": agent, "command": command,
                     "env_var": runtime.env_var, "path": path,
                     "version": version[0] if version else None})
    from orchestrator import client
    from orchestrator.attachments.catalog import load_catalog
    from orchestrator.paths import Home

    catalog = load_catalog()
    home = Home.from_env()
    return {"runtimes": rows,
            "vision_catalog": {"checked": catalog.checked, "entries": catalog.entries()},
            "home": str(home.root), "daemon_running": client.ping(home)}


def _wanted(config: TeamConfig | None) -> list[tuple[RuntimeInfo, str | None, str]]:
    """(runtime, ACP agent, the executable looked for) for each row, in table order."""
    if config is None:
        return [(r, None, os.environ.get(r.env_var) or r.default_executable)
                for r in RUNTIMES if not r.agent_presets] + [
            (ACP, name, preset.argv[0]) for name, preset in ACP_AGENTS.items()]
    rows: dict[tuple[str, str | None, str], tuple[RuntimeInfo, str | None, str]] = {}
    for member in config.members:
        if member.host is None:  # one on another host is looked up there (doctor --host)
            runtime = runtime_info(member.runtime)
            command = member.command_line()[0] or os.environ.get(runtime.env_var) or \
                runtime.default_executable
            rows.setdefault((runtime.name, member.acp_agent, command),
                            (runtime, member.acp_agent, command))
    return sorted(rows.values(), key=lambda row: RUNTIMES.index(row[0]))


def describe_members(config: TeamConfig, *, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Per member of a team file: the executable it will run (its ``command``, else the
    runtime's variable, else the default — as the supervisor resolves it) and its version, and
    which credential its CLI will use — its kind and where it comes from, never the secret —
    found the way the member's preflight looks for it. ``problem``/``fix`` say why a member
    could not start (``teamctl doctor TEAMFILE`` then exits 1)."""
    versions: dict[str, tuple[str | None, str | None]] = {}
    rows = []
    for member in config.members:
        env = {k: os.environ[k] for k in member.pass_env if k in os.environ} | member.env
        resolved = config.resolved(member)
        kind, source = _credential(member, env, resolved.login)
        row: dict[str, Any] = {"member": member.name, "runtime": member.runtime,
                               "login": resolved.login, "permissions": resolved.permissions,
                               "credential": kind, "source": source, "problem": None,
                               "fix": None}
        row |= _executable(member, versions, timeout)
        if row.get("problem") is None and kind == "none":
            row |= {"problem": f"no credential for its {member.runtime} CLI", "fix": source}
        if member.runtime == CODEX.name and member.host is None:  # elsewhere: its host's
            row |= _codex_sandbox(config, member, env, row)
        if resolved.ceiling is not None:
            row["ceiling"] = resolved.ceiling.shown()
            held = _ceiling_held(resolved)
            if held is not None:
                row |= {key: "; ".join(filter(None, (row[key], new))) for key, new in
                        zip(("problem", "fix"), held, strict=True)}
        if resolved.sandbox != "none":
            row["sandbox"] = _sandbox(config, member, row.get("path") or row["command"])
            if row["version"] is not None and member.host is None:  # it runs outside
                inside = _start_inside(config, member, row["path"], env, timeout)
                row["sandbox"]["started"] = inside.version
                if inside.problem is not None:
                    row |= {key: "; ".join(filter(None, (row[key], new))) for key, new in
                            (("problem", inside.problem), ("fix", inside.fix))}
        rows.append(row)
    return rows


def inspect_cgroups(root: Path = Path("/")) -> dict[str, Any]:
    """Whether members' ceilings (``memory_max``, ``memory_high``, ``cpu_weight``,
    ``pids_max``) can be held here, seen from this process's cgroup (the daemon ``teamctl``
    starts is in it too): per controller, the hierarchy a member's cgroup would be made in,
    and a cgroup made and removed with every controller found (a real run). An SSH host
    answers the same from its remote side (``doctor --host``)."""
    from orchestrator.cgroups import Cgroups

    return Cgroups(root).support(f"teamctl-doctor-{os.getpid()}")


def _ceiling_held(resolved: ResolvedMember) -> tuple[str, str] | None:
    """Why a member's ceiling cannot be held where it runs, and the fix (None: it can)."""
    from orchestrator.ceilings import refused_elsewhere
    from orchestrator.cgroups import Cgroups

    assert resolved.ceiling is not None
    refused = refused_elsewhere(resolved.ceiling, in_pod=resolved.kubernetes is not None)
    if refused is not None:
        keys = refused[0]
        return (f"its {', '.join(keys)} cannot be held: {refused[1]}",
                f"remove {' and '.join(keys)} for it")
    if resolved.kubernetes is not None or resolved.ssh_host is not None:
        return None  # its host's: doctor --host NAME asks an SSH host
    chosen = Cgroups().layout().choose(resolved.ceiling.controllers)
    if not isinstance(chosen, str):
        return None
    return (f"its ceiling cannot be held: {chosen}",
            f"or remove {' and '.join(resolved.ceiling.keys)} for it")


def inspect_sandbox() -> dict[str, Any]:
    """Whether ``sandbox = "process"`` can be had here: bubblewrap's path and version, and
    whether it made its namespaces (a real run), or why not and the fix (the install command
    where it is missing)."""
    from runtimes.hosts.sandbox.host import probe

    found = probe(os.environ.get("TEAMCTL_BWRAP") or "bwrap").as_dict()
    if not found["ok"]:
        found["fix"] = "apt-get install bubblewrap (or set TEAMCTL_BWRAP to its path)" \
            if found["path"] is None else "run where user namespaces are allowed, or set " \
            "sandbox = \"none\" for the members (docs/security.md, \"Sandbox\")"
    return found


def _sandbox(config: TeamConfig, member: MemberConfig, executable: str) -> dict[str, Any]:
    """What a sandboxed member will see: read-write, read-only, hidden (its network mode).
    On an SSH host the paths are the host's, resolved there at each start: said as such,
    never this machine's."""
    from runtimes.hosts.sandbox.host import describe
    from runtimes.hosts.sandbox.plan import HIDDEN_IN_HOME, HIDDEN_SYSTEM, SYSTEM_DIRS

    remote = config.resolved(member).ssh_host
    if remote is not None:
        mine = str(Path.home())  # the file's ~ was expanded here; on the host it is its own
        extra = {key: ["~" + p[len(mine):] if p == mine or p.startswith(mine + "/") else p
                       for p in paths]
                 for key, paths in config.resolved(member).sandbox_paths.items()}
        workdir = member.workdir or "~ (the remote user's home)"
        return {"host": remote[0], "network": config.resolved(member).network,
                "rw": [f"{workdir} (on {remote[0]})",
                       "~/.teamctl-remote/<home>/<team>/<member> (its runtime home there)",
                       *extra["rw"]],
                "ro": [*SYSTEM_DIRS, "its toolchain there (found on the host's PATH)",
                       *extra["ro"]],
                "hidden": ["~ (all but the above)", "~/.teamctl-remote (teamctl's state "
                           "there)", *(f"~/{p}" for p in HIDDEN_IN_HOME), *HIDDEN_SYSTEM,
                           *extra["hide"]]}

    view: dict[str, Any] = describe(_local_policy(config, member), executable,
                                    os.environ.get("PATH", os.defpath))
    return view | {"network": config.resolved(member).network}


def _local_policy(config: TeamConfig, member: MemberConfig) -> SandboxPolicy:
    """The view a member sandboxed on this machine gets (as the daemon builds it)."""
    from orchestrator.paths import Home
    from runtimes.hosts.sandbox.host import member_policy

    home = Home.from_env()
    resolved = config.resolved(member)
    return member_policy(
        workdir=resolved.workdir,
        private=home.member_dir(config.name, member.name), state_root=home.root,
        others=resolved.other_workdirs, paths=resolved.sandbox_paths,
        runtime=member.runtime, login=resolved.login, permissions=resolved.permissions)


def _start_inside(config: TeamConfig, member: MemberConfig, path: str, env: dict[str, str],
                  timeout: float) -> StartInside:
    """Its command's ``--version`` run inside its own sandbox (runtimes/hosts/sandbox/doctor.py):
    its first line, or why it does not start there and the fix."""
    from runtimes.hosts.sandbox.doctor import start_inside
    from runtimes.kit.base import member_environ

    return start_inside(member.name, _local_policy(config, member), [path, "--version"],
                        member_environ({}, env), network=config.resolved(member).network,
                        bwrap=os.environ.get("TEAMCTL_BWRAP") or "bwrap", timeout=timeout)


def _executable(member: MemberConfig, versions: dict[str, tuple[str | None, str | None]],
                timeout: float) -> dict[str, Any]:
    runtime = next(r for r in RUNTIMES if r.name == member.runtime)
    wanted = member.command_line()[0] or os.environ.get(runtime.env_var) or \
        runtime.default_executable
    if member.host is not None:  # looked up there: doctor --host checks it
        return {"command": wanted, "path": None, "version": None}
    path = shutil.which(wanted)
    if path is None:
        return {"command": wanted, "path": None, "version": None,
                "problem": f"{wanted!r} is not found",
                "fix": f"install it, or set command = \"/path/to/{runtime.default_executable}\" "
                       f"for this member (or {runtime.env_var})"}
    path = os.path.abspath(path)
    if path not in versions:
        versions[path] = _version(path, timeout)
    version, error = versions[path]
    row: dict[str, Any] = {"command": wanted, "path": path, "version": version}
    if error is not None:
        row |= {"problem": f"{path} --version failed: {error}",
                "fix": "check that the command is the runtime's CLI and that it runs"}
    return row


def _version(path: str, timeout: float) -> tuple[str | None, str | None]:
    """(the first line ``--version`` prints, None) or (None, why it failed) — bounded."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout:g}s"
    except OSError as exc:
        return None, exc.strerror or str(exc)
    lines = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0:
        return None, f"exit {done.returncode}" + (f": {lines[-1][:200]}" if lines else "")
    return (lines[0][:200] if lines else None), None


def _codex_sandbox(config: TeamConfig, member: MemberConfig, env: dict[str, str],
                   row: dict[str, Any]) -> dict[str, Any]:
    """Codex's own sandbox for a member on this machine (runtimes/codex/helper.py): its mode,
    the bubblewrap it will use, its temp dir; a member whose every command would fail (its
    helper's links refused) is a problem with its fix, as the launch refuses it."""
    from orchestrator.contracts import runtime_home
    from orchestrator.paths import Home
    from runtimes.codex._shared import codex_home_in, profile_sandbox
    from runtimes.codex.helper import describe_helper, helper_env, helper_problem
    from runtimes.kit.base import member_environ

    home = runtime_home(Home.from_env().member_dir(config.name, member.name))
    codex_home = codex_home_in(home)
    full_env = member_environ({"CODEX_HOME": str(codex_home), **helper_env(home)}, env)
    resolved = config.resolved(member)
    mode = profile_sandbox(resolved.permissions, in_teamctl_sandbox=resolved.sandbox != "none")
    found: dict[str, Any] = {"codex_sandbox": describe_helper(codex_home, full_env, mode)}
    problem = helper_problem(codex_home, full_env, mode)
    if problem is not None:
        found |= {key: "; ".join(filter(None, (row.get(key), new)))
                  for key, new in (("problem", problem[0]), ("fix", problem[1]))}
    return found


def _credential(member: MemberConfig, env: dict[str, str], login: str) -> tuple[str, str]:
    """(its kind, where it comes from), by the finder of the member's runtime (_CREDENTIALS)."""
    return _CREDENTIALS[member.runtime](member, env, login)


def _claude(member: MemberConfig, env: dict[str, str], login: str) -> tuple[str, str]:
    for var, kind in (("ANTHROPIC_API_KEY", "API key"),
                      ("CLAUDE_CODE_OAUTH_TOKEN", "OAuth token (claude setup-token)"),
                      ("ANTHROPIC_AUTH_TOKEN", "bearer token")):
        if env.get(var):
            return kind, f"the member's env {var}"
    if login == "operator":
        path = logins.claude_config_dir() / ".credentials.json"
        oauth = _json(path).get("claudeAiOauth") or {}
        if oauth.get("accessToken"):
            return f"subscription login ({oauth.get('subscriptionType') or 'claude.ai'})", \
                str(path)
    return "none", "not logged in: run 'claude /login', or set ANTHROPIC_API_KEY in env"


def _codex(member: MemberConfig, env: dict[str, str], login: str) -> tuple[str, str]:
    from runtimes.codex.provider import merged_config, resolve_provider

    operator = _toml(logins.codex_home() / "config.toml") \
        if login == "operator" and member.host is None else {}
    provider = resolve_provider(merged_config(operator, member.config), member.args)
    if provider.env_key:
        var = provider.env_key
        return ("API key", f"the member's env {var} (provider {provider.id})") if var in env \
            else ("none", f"provider {provider.id} reads {var}: set it in the member's env")
    if not provider.needs_openai_auth:
        return "not needed", f"provider {provider.id} names no env_key"
    if env.get("CODEX_API_KEY"):
        return "API key", "the member's env CODEX_API_KEY"
    path = logins.codex_home() / "auth.json"
    if login == "operator" and path.exists():
        mode = _json(path).get("auth_mode") or "unknown"
        kind = "ChatGPT login" if mode == "chatgpt" else f"{mode} login"
        return kind, f"{path} (linked, never copied)"
    return "none", "not logged in: run 'codex login', or set CODEX_API_KEY in env"


def _opencode(member: MemberConfig, env: dict[str, str], login: str) -> tuple[str, str]:
    from runtimes.opencode.provider import PROVIDER_ENV, api_key_source

    provider = (member.model or "").partition("/")[0]
    options = ((member.config.get("provider") or {}).get(provider) or {}).get("options") or {}
    configured = api_key_source(options, env)
    if configured is not None:
        return "API key", f"the member's config (provider {provider}{configured})"
    path = logins.opencode_data_dir() / "auth.json"
    entry = _json(path).get(provider) if login == "operator" else None
    if isinstance(entry, dict):
        return f"{entry.get('type', 'unknown')} login ({provider})", f"{path} (linked)"
    var = PROVIDER_ENV.get(provider)
    if var is not None and env.get(var):
        return "API key", f"the member's env {var}"
    if var is None:
        return "not needed", f"provider {provider!r} is not one teamctl knows a key for " \
            "(it may need none)"
    return "none", f"no credential for provider {provider!r}: run 'opencode auth login', or " \
        f"set {var} in the member's env"


def _acp(member: MemberConfig, env: dict[str, str], login: str) -> tuple[str, str]:
    from orchestrator.acp_agents import acp_agent

    preset = acp_agent(member.acp_agent)
    if preset is None:
        return "unknown", "the agent says at session/new whether it needs a login"
    found = [k for k in preset.keys if env.get(k)]
    if found:
        return "API key", f"the member's env {found[0]} ({preset.name} reads " \
            f"{', '.join(preset.env_names)})"
    if login == "operator":
        return "unknown", f"{preset.name}'s own login in your HOME, if any ({preset.login})"
    return "none", f"not logged in: {preset.login}"


# where each runtime's CLI finds its credential, keyed by the rows of the runtime table
_CREDENTIALS: dict[str, Callable[[MemberConfig, dict[str, str], str], tuple[str, str]]] = {
    CLAUDE.name: _claude, CODEX.name: _codex, OPENCODE.name: _opencode, ACP.name: _acp}
assert set(_CREDENTIALS) == {r.name for r in RUNTIMES}


def _toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _json(path: Path) -> dict[str, Any]:
    import json

    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def inspect_host(name: str, config: TeamConfig | None) -> dict[str, Any]:
    """``doctor --host NAME``: the host asked its own checks by the hosts wing (runtimes/hosts:
    over SSH, reached as members reach it, and which runtime CLIs it has; a Kubernetes host,
    its API server, Sandbox or Pod + PVC, each verb teamctl needs and the Secret). A
    HostReport."""
    from functools import partial

    import anyio

    from orchestrator.errors import TeamctlError
    from orchestrator.paths import Home
    from orchestrator.protocol.doctor import HostReport
    from orchestrator.protocol.failures import ErrorDoc
    from runtimes import hosts

    kind, settings = _host_settings(name, config)
    home = Home.from_env()
    request = hosts.HostRequest(config.name if config is not None else "doctor", "doctor",
                                home.root / "doctor", home.root, kind=kind, name=name,
                                settings=settings)
    members = [m for m in (config.members if config is not None else []) if m.host == name]
    commands: dict[str, str] = {r.name: r.default_executable for r in RUNTIMES}
    for member in members:  # a member's own command, else the runtime's default name
        command = member.command_line()[0]
        if command:
            commands[member.runtime] = command
    found: dict[str, Any] = {"host": name, "kind": kind, "destination": name,
                             "reachable": False}
    error = None
    try:
        anyio.run(partial(hosts.check, request, found, commands=commands, forward=any(
            runtime_info(m.runtime).daemon_connects_in for m in members)))
    except TeamctlError as exc:
        error = ErrorDoc(code=exc.code, message=getattr(exc, "reason", exc.message),
                         retryable=exc.retryable)
    if found.get("cgroups") is not None and config is not None:
        found["checks"] = [*found.get("checks", []),
                           *_ceilings_there(config, members, found["cgroups"])]
    return HostReport.model_validate({**found, "error": error}).model_dump(mode="json")


def _ceilings_there(config: TeamConfig, members: list[MemberConfig],
                    support: dict[str, Any]) -> list[dict[str, Any]]:
    """Each member's ceiling on an SSH host, held or not, from what the host said of its
    cgroups (``CgroupSupport``: each controller's hierarchy there, and a cgroup made)."""
    versions = {row["controller"]: row["version"] for row in support["controllers"]
                if row["version"] is not None}
    rows = []
    for member in members:
        ceiling = config.resolved(member).ceiling
        if ceiling is None:
            continue
        missing = sorted(ceiling.controllers - set(versions))
        check = f"ceiling of {member.name} ({ceiling.shown()})"
        if missing or not support["made"]:
            why = support["reason"] or f"no cgroup there takes {', '.join(missing)}"
            rows.append({"check": check, "ok": False,
                         "detail": f"cannot be held: {why}; {support['fix']}"})
            continue
        held = sorted({versions[name] for name in ceiling.controllers})
        rows.append({"check": check, "ok": True, "detail": "held in a cgroup there ("
                     + ", ".join(f"v{v}" for v in held) + ")"})
    return rows


def _host_settings(name: str, config: TeamConfig | None) -> tuple[str, Any]:
    """The kind and the team file's table of host ``name``; a bare ssh destination (user@box)
    gets settings of its own. UsageError: neither."""
    from pydantic import TypeAdapter, ValidationError

    from orchestrator.config import HostConfig, SshDestination
    from orchestrator.errors import UsageError

    if config is not None and name in config.kubernetes_hosts:
        return "kubernetes", config.kubernetes_hosts[name]
    if config is not None and name in config.hosts:
        return "ssh", config.hosts[name]
    try:
        TypeAdapter(SshDestination).validate_python(name)
    except ValidationError:
        known = ", ".join(config.hosts) if config is not None and config.hosts else "none"
        raise UsageError(f"--host {name!r}: neither a [hosts.NAME] of the team file "
                         f"(known: {known}) nor an ssh destination like user@box") from None
    user, _, address = name.rpartition("@")
    return "ssh", HostConfig(address=address, user=user or None)
