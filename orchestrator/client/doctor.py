"""``teamctl doctor [TEAMFILE]``: which runtime executables are found, and their versions;
with a team file, which credential each member will use (kind and source, never the secret).

It reads the CLIs' own login locations through ``runtimes.logins`` (standard library only),
the same place the members' preflight looks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.acp_agents import ACP_AGENTS
from orchestrator.runtime_table import ACP, CLAUDE, CODEX, OPENCODE, RUNTIMES, runtime_info
from runtimes import logins

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.config import MemberConfig, TeamConfig
    from orchestrator.runtime_table import RuntimeInfo
    from runtimes.sandbox_doctor import StartInside
    from runtimes.sandbox_plan import SandboxPolicy

__all__ = ["describe_members", "inspect_host", "inspect_kube_host", "inspect_runtimes"]


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
        login = config.member_login(member)
        kind, source = _credential(member, env, login)
        row: dict[str, Any] = {"member": member.name, "runtime": member.runtime, "login": login,
                               "permissions": config.member_permissions(member),
                               "credential": kind, "source": source, "problem": None,
                               "fix": None}
        row |= _executable(member, versions, timeout)
        if row.get("problem") is None and kind == "none":
            row |= {"problem": f"no credential for its {member.runtime} CLI", "fix": source}
        if member.runtime == CODEX.name and member.host is None:  # elsewhere: its host's
            row |= _codex_sandbox(config, member, env, row)
        if config.member_sandbox(member) != "none":
            row["sandbox"] = _sandbox(config, member, row.get("path") or row["command"])
            if row["version"] is not None and member.host is None:  # it runs outside
                inside = _start_inside(config, member, row["path"], env, timeout)
                row["sandbox"]["started"] = inside.version
                if inside.problem is not None:
                    row |= {key: "; ".join(filter(None, (row[key], new))) for key, new in
                            (("problem", inside.problem), ("fix", inside.fix))}
        rows.append(row)
    return rows


def inspect_sandbox() -> dict[str, Any]:
    """Whether ``sandbox = "process"`` can be had here: bubblewrap's path and version, and
    whether it made its namespaces (a real run), or why not and the fix (the install command
    where it is missing)."""
    from runtimes.sandbox_host import probe

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
    from runtimes.sandbox_host import describe
    from runtimes.sandbox_plan import HIDDEN_IN_HOME, HIDDEN_SYSTEM, SYSTEM_DIRS

    remote = config.member_host(member)
    if remote is not None:
        mine = str(Path.home())  # the file's ~ was expanded here; on the host it is its own
        extra = {key: ["~" + p[len(mine):] if p == mine or p.startswith(mine + "/") else p
                       for p in paths]
                 for key, paths in config.member_sandbox_paths(member).items()}
        workdir = member.workdir or "~ (the remote user's home)"
        return {"host": remote[0], "network": config.member_network(member),
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
    return view | {"network": config.member_network(member)}


def _local_policy(config: TeamConfig, member: MemberConfig) -> SandboxPolicy:
    """The view a member sandboxed on this machine gets (as the daemon builds it)."""
    from orchestrator.paths import Home
    from runtimes.sandbox_host import member_policy

    home = Home.from_env()
    return member_policy(
        workdir=config.member_workdir(member),
        private=home.member_dir(config.name, member.name), state_root=home.root,
        others=config.other_workdirs(member), paths=config.member_sandbox_paths(member),
        runtime=member.runtime, login=config.member_login(member),
        permissions=config.member_permissions(member))


def _start_inside(config: TeamConfig, member: MemberConfig, path: str, env: dict[str, str],
                  timeout: float) -> StartInside:
    """Its command's ``--version`` run inside its own sandbox (runtimes/sandbox_doctor.py):
    its first line, or why it does not start there and the fix."""
    from runtimes.base import member_environ
    from runtimes.sandbox_doctor import start_inside

    return start_inside(member.name, _local_policy(config, member), [path, "--version"],
                        member_environ({}, env), network=config.member_network(member),
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
    from runtimes.base import member_environ
    from runtimes.codex._shared import codex_home_in, profile_sandbox
    from runtimes.codex.helper import describe_helper, helper_env, helper_problem

    home = runtime_home(Home.from_env().member_dir(config.name, member.name))
    codex_home = codex_home_in(home)
    full_env = member_environ({"CODEX_HOME": str(codex_home), **helper_env(home)}, env)
    mode = profile_sandbox(config.member_permissions(member),
                           in_teamctl_sandbox=config.member_sandbox(member) != "none")
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
    from runtimes.opencode_provider import PROVIDER_ENV, api_key_source

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
    """``doctor --host NAME``: can the daemon reach a member's host over SSH (BatchMode, the
    same options members use), and which runtime CLIs does that host have? A HostReport."""
    import time

    import anyio
    from pydantic import TypeAdapter, ValidationError

    from orchestrator.config import HostConfig, SshDestination
    from orchestrator.errors import TeamctlError, UsageError
    from orchestrator.paths import Home
    from orchestrator.wire import ErrorDoc, HostReport, HostRuntime
    from runtimes.ssh import SshHost, SshTarget, control_dir

    if config is not None and name in config.kubernetes_hosts:
        return inspect_kube_host(name, config)
    host = config.hosts.get(name) if config is not None else None
    if host is None:
        try:
            TypeAdapter(SshDestination).validate_python(name)
        except ValidationError:
            known = ", ".join(config.hosts) if config is not None and config.hosts else "none"
            raise UsageError(f"--host {name!r}: neither a [hosts.NAME] of the team file "
                             f"(known: {known}) nor an ssh destination like user@box") from None
        user, _, address = name.rpartition("@")
        host = HostConfig(address=address, user=user or None)
    commands = {r.name: r.default_executable for r in RUNTIMES}
    for member in config.members if config is not None else []:
        command = member.command_line()[0]
        if member.host == name and command:
            commands[member.runtime] = command
    home = Home.from_env()
    link = SshHost(SshTarget(name, host.address, host.user, host.port, host.identity_file,
                             tuple(host.ssh_options)), control_dir(home.root), "doctor",
                   "doctor", "doctor", home.root / "doctor")
    report = HostReport(host=name, destination=link.target.destination, port=host.port,
                        reachable=False)

    async def probe() -> None:
        started = time.monotonic()
        remote = await link.connect()
        report.reachable, report.home, report.python = True, remote.home, remote.python
        report.seconds = round(time.monotonic() - started, 3)
        report.runtimes = [HostRuntime(runtime=runtime, command=command,
                                       **await link.version(command))
                           for runtime, command in commands.items()]

    try:
        anyio.run(probe)
    except TeamctlError as exc:
        report.error = ErrorDoc(code=exc.code, message=getattr(exc, "reason", exc.message),
                                retryable=exc.retryable)
    return report.model_dump(mode="json")


def inspect_kube_host(name: str, config: TeamConfig) -> dict[str, Any]:
    """``doctor --host NAME`` for ``[hosts.NAME] kind = "kubernetes"``: the API server
    answers, Sandbox or Pod + PVC, each verb teamctl needs (RBAC), the Secret (a HostReport;
    runtimes/kube_doctor.py)."""
    from functools import partial

    import anyio

    from orchestrator.errors import TeamctlError
    from orchestrator.paths import Home
    from orchestrator.runtime_table import runtime_info
    from orchestrator.wire import ErrorDoc, HostCheck, HostReport
    from runtimes import kube_doctor
    from runtimes.kube_host import kubernetes_host

    table = config.kubernetes_hosts[name]
    link = kubernetes_host(config.name, "doctor", name, table, Home.from_env().root / "doctor")
    report = HostReport(host=name, kind="kubernetes", destination=table.context or
                        "the kubeconfig's current context", reachable=False,
                        namespace=table.namespace)
    try:
        found = anyio.run(partial(kube_doctor.inspect, link, table.secret, forward=any(
            runtime_info(m.runtime).daemon_connects_in for m in config.members
            if m.host == name)))
    except TeamctlError as exc:
        report.error = ErrorDoc(code=exc.code, message=getattr(exc, "reason", exc.message),
                                retryable=exc.retryable)
        return report.model_dump(mode="json")
    report.reachable, report.mode, report.seconds = True, found.mode, found.seconds
    report.destination = found.server or report.destination
    report.checks = [HostCheck(check=c.check, ok=c.ok, detail=c.detail) for c in found.checks]
    return report.model_dump(mode="json")
