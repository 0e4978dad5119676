"""A sandboxed member's network (``network = "off" | "allowlist"``) as a ``NetworkPlan`` for
bubblewrap, and the hosts it may reach by default (docs/security.md, "The network boundary").

- ``network_plan``: an empty network namespace (``--unshare-net``: the sandbox's own loopback
  only, which bubblewrap brings up), the member's egress-proxy socket bound in at
  ``INSIDE_SOCKET``, and the relay (``relay.py`` in ``RELAY_DIR``, bound in read-only,
  imported from its compiled file by ``python -I -S -c``: ``relay_command``) in front of the
  runtime: it gives the runtime ``HTTPS_PROXY`` to a loopback port that reaches the proxy,
  and listens on each loopback port an entry names (``127.0.0.1:PORT``: a test's fake API).
- ``with_inbound``: the way in, for a runtime whose server the daemon calls (``opencode
  serve`` on a port of the sandbox's loopback): a directory of this machine bound in at
  ``INSIDE_SERVE_DIR``, where the relay listens on ``SERVE_SOCKET`` and joins each
  connection to that port.
- ``proxy_socket`` and ``on_host``: a plan for a member on an SSH host — the proxy's socket
  here (forwarded to the host) and the same plan with that socket's path there bound in and the
  relay's source run by the host's ``python3`` (``python3 -I -S -c SOURCE``: nothing of teamctl
  is installed there).
- ``provider_hosts``: where the member's runtime sends its model requests — its base URL if
  the member's ``env`` or ``config`` sets one, else its provider's API host(s).
- ``default_hosts``: what ``allowlist`` allows when ``allow_hosts`` is not given — the git
  remote's host of the member's workdir and the package registries.
"""

from __future__ import annotations

import configparser
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from orchestrator.contracts import read_regular
from runtimes.hosts.sandbox.plan import NetworkPlan

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["INSIDE_SERVE_DIR", "INSIDE_SOCKET", "REGISTRIES", "RELAY_DIR", "SERVE_SOCKET",
           "default_hosts", "network_plan", "on_host", "provider_hosts", "proxy_socket",
           "relay_command", "with_inbound"]

INSIDE_SOCKET = "/run/teamctl/egress.sock"
INSIDE_SERVE_DIR = "/run/teamctl/serve"  # the inbound socket's directory, as the relay sees it
SERVE_SOCKET = "server.sock"
REGISTRIES = ("registry.npmjs.org", "pypi.org", "files.pythonhosted.org")
RELAY_DIR = Path(__file__).parent  # relay.py's, bound into the sandbox (host.mcp_toolchain)
_RELAY = (RELAY_DIR / "relay.py").read_text(encoding="utf-8")
HAND_OVER = "--hand-over"  # the relay hands its listeners to the daemon and becomes the runtime
_LOOPBACK_ENTRY = re.compile(r"127\.0\.0\.1:(\d{1,5})")

# the API host(s) of each provider a CLI uses when no base URL is configured
_CLAUDE = ("api.anthropic.com",)
_CODEX = ("api.openai.com", "chatgpt.com", "auth.openai.com")  # API key or ChatGPT login
_OPENCODE = {"anthropic": "api.anthropic.com", "openai": "api.openai.com",
             "openrouter": "openrouter.ai", "google": "generativelanguage.googleapis.com",
             "groq": "api.groq.com", "mistral": "api.mistral.ai", "deepseek": "api.deepseek.com",
             "xai": "api.x.ai"}
_OPENCODE_CATALOG = "models.dev"  # OpenCode reads its model catalog from there at start


def network_plan(mode: str, socket: Path, entries: Sequence[str], *,
                 python: str = sys.executable) -> NetworkPlan:
    """The plan for ``mode`` ("off" or "allowlist") with the proxy on ``socket`` (outside);
    ``entries`` are the hosts its policy allows (their loopback ports are mapped inside)."""
    ports = sorted({m[1] for e in entries if (m := _LOOPBACK_ENTRY.fullmatch(e))}, key=int)
    relay = [*relay_command(python), "--socket", INSIDE_SOCKET, HAND_OVER]
    for port in ports:
        relay += ["--map", port]
    return NetworkPlan(mode=mode, bwrap_args=("--unshare-net", "--bind", str(socket),
                                              INSIDE_SOCKET),
                       relay=(*relay, "--"))


def relay_command(python: str, *, source: bool = False) -> tuple[str, ...]:
    """How ``python`` runs the relay: ``relay.py`` imported from ``RELAY_DIR`` (its compiled
    file: the source is not parsed again in every sandbox, ~1.5 MiB less resident), or with
    ``source`` its source given on the command line (a host without teamctl)."""
    if source:
        return (python, "-I", "-S", "-c", _RELAY)
    boot = (f"import sys; sys.path.append({str(RELAY_DIR)!r}); import relay; "
            "sys.exit(relay.main(sys.argv[1:]))")
    return (python, "-I", "-S", "-c", boot)


def with_inbound(plan: NetworkPlan, directory: Path, port: int) -> NetworkPlan:
    """``plan`` with the way in: ``directory`` (here, 0700) bound in at ``INSIDE_SERVE_DIR``
    and the relay joining each connection to its socket there to ``127.0.0.1:port``."""
    relay = plan.relay[:-1]  # the relay's own arguments end with "--"
    return replace(plan, bwrap_args=(*plan.bwrap_args, "--bind", str(directory),
                                     INSIDE_SERVE_DIR),
                   relay=(*relay, "--inbound", f"{port}:{INSIDE_SERVE_DIR}/{SERVE_SOCKET}", "--"))


def proxy_socket(plan: NetworkPlan) -> str | None:
    """The egress proxy's socket ``plan`` binds in (None: ``network = "on"``)."""
    args = plan.bwrap_args
    found = [args[i - 1] for i in range(2, len(args))
             if args[i] == INSIDE_SOCKET and args[i - 2] == "--bind"]
    return found[0] if found else None


def on_host(plan: NetworkPlan, socket: str, python: str) -> NetworkPlan:
    """``plan`` on a member's host: the proxy's socket forwarded to ``socket`` there (bound in
    at ``INSIDE_SOCKET`` as here), the relay's source run by that machine's ``python``."""
    local = proxy_socket(plan)
    args = tuple(socket if a == local else a for a in plan.bwrap_args)
    own = tuple(a for a in plan.relay[len(relay_command(plan.relay[0])):]  # its arguments
                if a != HAND_OVER)  # a descriptor does not cross the forwarding: it relays
    return replace(plan, bwrap_args=args, relay=(*relay_command(python, source=True), *own))


def _url_host(url: object) -> str | None:
    """``host:port`` of a base URL (the scheme's port when it names none)."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}"


def provider_hosts(runtime: str, env: Mapping[str, str], config: Mapping[str, Any]) -> list[str]:
    """The hosts the member's model requests go to (``env`` and ``config``: the member's)."""
    if runtime == "claude":
        found = _url_host(env.get("ANTHROPIC_BASE_URL"))
        return [found] if found else list(_CLAUDE)
    if runtime == "codex":
        return _codex_hosts(env, config)
    if runtime == "opencode":
        return _opencode_hosts(config)
    return []


def _codex_hosts(env: Mapping[str, str], config: Mapping[str, Any]) -> list[str]:
    provider = str(config.get("model_provider") or "openai")
    providers = config.get("model_providers")
    table = providers.get(provider) if isinstance(providers, dict) else None
    found = _url_host(table.get("base_url")) if isinstance(table, dict) else None
    found = found or _url_host(env.get("OPENAI_BASE_URL"))
    return [found] if found else list(_CODEX)


def _opencode_hosts(config: Mapping[str, Any]) -> list[str]:
    hosts = [_OPENCODE_CATALOG]
    model = config.get("model")
    providers = config.get("provider")
    for name, table in (providers.items() if isinstance(providers, dict) else ()):
        options = table.get("options") if isinstance(table, dict) else None
        found = _url_host(options.get("baseURL")) if isinstance(options, dict) else None
        hosts.append(found or _OPENCODE.get(str(name), ""))
    if isinstance(model, str) and "/" in model:
        hosts.append(_OPENCODE.get(model.split("/", 1)[0], ""))
    if len(hosts) == 1:
        hosts += list(_OPENCODE.values())  # no provider named: the catalog's own
    return list(dict.fromkeys(h for h in hosts if h))


def git_remote_host(workdir: Path) -> str | None:
    """The host of the workdir's ``origin`` (https or ssh URL, or ``user@host:path``), from
    ``.git/config`` (a worktree's ``.git`` file is followed to its common dir) — each read
    bounded and never blocking (a FIFO there is no config: None)."""
    git = workdir / ".git"
    try:
        if git.is_file():
            text = read_regular(git, limit_bytes=4096).decode("utf-8").strip()
            common = Path(text.removeprefix("gitdir:").strip())
            git = (common.parent.parent if common.parent.name == "worktrees" else common)
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.read_string(read_regular(git / "config").decode("utf-8"))
        url = parser.get('remote "origin"', "url", fallback=None)
    except (OSError, configparser.Error, UnicodeDecodeError):
        return None
    if url is None:
        return None
    if "://" in url:
        found = urlsplit(url).hostname
    else:  # scp-like: [user@]host:path
        found = url.split(":", 1)[0].rpartition("@")[2] if ":" in url else None
    return found.lower() if found else None


def default_hosts(workdir: Path, *, from_git: bool = True) -> list[str]:
    """``allowlist``'s hosts when ``allow_hosts`` is not given: the git remote's host (over
    HTTPS: an ssh remote needs ``network = "on"``) and the package registries. ``from_git``
    False: the repository's config is the member's to write (a sandboxed member without a
    worktree works in the checkout itself), so its ``origin`` would be a host the member
    chose for its own allowlist — not taken (docs/security.md)."""
    remote = git_remote_host(workdir) if from_git else None
    return [*([remote] if remote else []), *REGISTRIES]
