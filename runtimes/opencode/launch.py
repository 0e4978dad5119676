"""OpenCode's launch configuration (protocols/opencode.md): a free loopback port, the
environment (private HOME and XDG dirs, the server password, the generated config — never on the
command line), the login preflight, and each permission profile's rules in the config.

The generated config (``OPENCODE_CONFIG_CONTENT``) is the member's ``config`` table plus, for its
model, ``modalities.input`` with ``"image"`` exactly when the vision catalog (or the operator)
says the model sees images — so OpenCode's own gate agrees with teamctl's — and
``attachment.image.auto_resize = false`` so the planned variant reaches the API byte for byte.
"""

from __future__ import annotations

import copy
import json
import socket
from typing import TYPE_CHECKING, Any

from orchestrator.contracts import (
    LaunchSpec,
    MemberStartFailed,
    Placed,
    RuntimeNotLoggedIn,
    read_beneath,
    read_regular,
)
from runtimes.kit.base import member_environ
from runtimes.kit.logins import opencode_config_dir, opencode_data_dir
from runtimes.opencode.provider import PROVIDER_ENV, api_key_source, env_reference

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["build_config", "build_env", "check_login", "free_port",
           "member_auth_file", "split_model"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_env(spec: LaunchSpec, password: str) -> dict[str, str]:
    """The minimal environment; private HOME/XDG dirs, the server password, offline-friendly
    switches, the config (in the environment, never on the command line); the member's env."""
    own = {var: str(spec.runtime_home / relative) for var, relative in _DIRS.items()}
    placed = [Placed(spec.runtime_home, relative) for relative in (*_DIRS.values(), _AUTH_DIR)]
    own.update(
        PWD=str(spec.workdir),
        OPENCODE_SERVER_PASSWORD=password,
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_CONFIG_CONTENT=json.dumps(build_config(spec)),
    )
    operator_auth = opencode_data_dir() / "auth.json"
    if spec.login == "operator" and operator_auth.exists():
        placed.append(Placed(spec.runtime_home, _AUTH, link=str(operator_auth)))
    else:  # an isolated member keeps nothing of the operator's
        placed.append(Placed(spec.runtime_home, _AUTH, unlink=True))
    if spec.login == "operator" and opencode_config_dir().is_dir():
        own["OPENCODE_CONFIG_DIR"] = str(opencode_config_dir())  # its providers, AGENTS.md
    try:
        spec.host.place(placed)
    except FileExistsError as exc:
        raise MemberStartFailed(spec.member, f"{exc}; move it away to use the operator's "
                                "login, or set login = \"isolated\"") from None
    except OSError as exc:  # a link where a directory of its home goes: the member's doing
        raise MemberStartFailed(spec.member, f"cannot make its private dirs in "
                                f"{spec.runtime_home}: {exc.strerror}") from None
    return member_environ(own, spec.env)


# the member's private HOME and XDG dirs, in its runtime home
_DIRS = {"HOME": "home", "XDG_CONFIG_HOME": "xdg/config", "XDG_DATA_HOME": "xdg/data",
         "XDG_CACHE_HOME": "xdg/cache", "XDG_STATE_HOME": "xdg/state"}
_AUTH_DIR = "xdg/data/opencode"
_AUTH = f"{_AUTH_DIR}/auth.json"


def member_auth_file(spec: LaunchSpec) -> Path:
    return spec.runtime_home / _AUTH


def check_login(spec: LaunchSpec) -> None:
    """The preflight: the member's model's provider has a credential (an auth.json entry —
    the operator's, linked —, ``OPENCODE_AUTH_CONTENT``, an ``apiKey`` in the config, or the
    provider's variable in the member's env); else it fails to start with the fix."""
    provider, _model = split_model(spec.model)
    if provider is None:
        return
    options = ((spec.config.get("provider") or {}).get(provider) or {}).get("options") or {}
    variable = env_reference(options)
    if variable is not None and variable not in spec.env:
        raise RuntimeNotLoggedIn(spec.member, "opencode", f"its provider {provider!r} takes "
                                 f"apiKey from {{env:{variable}}}: set {variable} in the "
                                 "member's env (or pass_env)")
    if provider not in PROVIDER_ENV or api_key_source(options, spec.env) is not None \
            or PROVIDER_ENV[provider] in spec.env:
        return
    for text in (spec.env.get("OPENCODE_AUTH_CONTENT"), _read_auth(spec)):
        try:
            entries = json.loads(text) if text else {}
        except ValueError:
            entries = {}
        if isinstance(entries, dict) and provider in entries:
            return
    fix = (f"no {provider!r} entry in {opencode_data_dir() / 'auth.json'}: run 'opencode auth "
           f"login', or set {PROVIDER_ENV[provider]} in the member's env"
           if spec.login == "operator" else
           f"this member's login is isolated: set {PROVIDER_ENV[provider]} in its env")
    raise RuntimeNotLoggedIn(spec.member, "opencode", fix)


def _read_auth(spec: LaunchSpec) -> str | None:
    """The login file OpenCode will read: the operator's own for an operator login (what the
    member's link points at), else the member's — read without following a name in its
    home, never blocking on a FIFO."""
    try:
        if spec.login == "operator":
            data = read_regular(opencode_data_dir() / "auth.json")
        else:
            data = read_beneath(spec.runtime_home, _AUTH)
    except OSError:
        return None
    return data.decode("utf-8", "replace")


_PERMISSIONS: dict[str, dict[str, str]] = {
    # "deny" removes the tool from what the model is offered (protocols/teammates.md §3.5)
    "read": {"edit": "deny", "bash": "deny", "external_directory": "deny"},
    # in the project: everything; outside it: refused, never a question nobody answers
    "edit": {"external_directory": "deny"},
    "full": {"external_directory": "allow"},
    # every edit, command, fetch and outside path is a permission.asked the operator answers
    "ask": {"edit": "ask", "bash": "ask", "webfetch": "ask", "external_directory": "ask"},
}


def build_config(spec: LaunchSpec) -> dict[str, Any]:
    """The member's config table, with teamctl's additions for its model."""
    config: dict[str, Any] = copy.deepcopy(dict(spec.config))
    if spec.model:
        config.setdefault("model", spec.model)
    permission = config.get("permission")
    config["permission"] = {**(permission if isinstance(permission, dict) else {}),
                            **_PERMISSIONS[spec.permissions]}
    if spec.mcp is not None:
        config.setdefault("mcp", {})["teamctl"] = {
            "type": "local", "command": list(spec.mcp.command),
            "environment": dict(spec.mcp.env), "enabled": True}
    image = config.setdefault("attachment", {}).setdefault("image", {})
    image.setdefault("auto_resize", False)
    provider, model = split_model(spec.model)
    if provider and model and spec.image_input is not None:
        entry = (config.setdefault("provider", {}).setdefault(provider, {})
                 .setdefault("models", {}).setdefault(model, {}))
        modalities = entry.setdefault("modalities", {})
        modalities["input"] = (["text", "image"] if spec.image_input else ["text"]) + (
            ["pdf"] if spec.pdf_input else [])
        modalities.setdefault("output", ["text"])
    return config


def split_model(model: str | None) -> tuple[str | None, str | None]:
    if not model or "/" not in model:
        return None, None
    provider, _, rest = model.partition("/")
    return provider, rest
