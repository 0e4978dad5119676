"""Codex's own sandbox helper where a system bubblewrap runs it (docs/runtimes.md, Codex: "Its
own sandbox and /tmp").

What codex 0.171.0 does (codex-rs ``arg0``, captured with ``codex sandbox`` and a member's
turns): at every start it makes links to itself named ``codex-linux-sandbox``, ``apply_patch``
and ``applypatch`` in ``CODEX_HOME/tmp/arg0-linux/codex-arg0XXXXXX/`` and puts that directory
first on its PATH — unless ``CODEX_HOME`` lies under its temp dir (``std::env::temp_dir()``:
``$TMPDIR``, else ``/tmp``; "Refusing to create helper binaries under temporary dir"). With a
``bwrap`` on PATH (a system bubblewrap) it runs each sandboxed command as ``bwrap …
codex-linux-sandbox …``, the helper found by that name inside the new namespace: without the
links every command fails, ``bwrap: execvp codex-linux-sandbox: No such file or directory``,
and each turn is still "answered". With no ``bwrap`` on PATH it uses the one it bundles, which
needs no link.

So a Codex member gets a temp dir of its own, ``tmp`` beside ``codex-home`` in its runtime
home (as a Claude member does): its CODEX_HOME is then never under its temp dir, wherever
TEAMCTL_HOME lies (``/tmp`` included), and codex makes its links. A member whose own ``env``
names a TMPDIR that holds its CODEX_HOME keeps it — and, sandboxed by codex with a system
bubblewrap on its PATH, would run no command: ``helper_problem`` says why, and the launch and
``teamctl doctor`` name the fix.
"""

from __future__ import annotations

import os
import shutil
from pathlib import PurePath
from typing import TYPE_CHECKING

from orchestrator.contracts import Placed

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["describe_helper", "helper_dirs", "helper_env", "helper_problem"]

_TMP = "tmp"  # in the runtime home, beside codex-home
_UNSANDBOXED = "danger-full-access"


def helper_dirs(runtime_home: Path) -> list[Placed]:
    """What ``Host.place`` makes for it: the member's own temp dir."""
    return [Placed(runtime_home, _TMP)]


def helper_env(runtime_home: Path) -> dict[str, str]:
    """Codex's TMPDIR: the member's own temp dir (its ``env`` may still name another)."""
    return {"TMPDIR": str(runtime_home / _TMP)}


def helper_problem(codex_home: PurePath, env: Mapping[str, str],
                   sandbox: str) -> tuple[str, str] | None:
    """Why codex would make no helper links and run none of the member's commands, and the
    fix; None when it makes them, or needs none (no sandbox; no ``bwrap`` on the PATH of
    ``env``, its whole environment). ``sandbox``: the member's codex sandbox mode."""
    temp = _temp_dir(env)
    bwrap = _system_bwrap(env)
    if sandbox == _UNSANDBOXED or not codex_home.is_relative_to(temp) or bwrap is None:
        return None
    return (f"its CODEX_HOME {codex_home} lies under its temp dir ({temp}: TMPDIR, else "
            f"/tmp), where codex makes no links to its helper, and the bubblewrap it finds "
            f"({bwrap}) runs each command through one (bwrap: execvp codex-linux-sandbox)",
            "remove TMPDIR from the member's env (teamctl gives it one of its own), or name "
            f"one that does not hold {codex_home.parent}")


def describe_helper(codex_home: PurePath, env: Mapping[str, str],
                    sandbox: str) -> dict[str, str | None]:
    """What ``teamctl doctor`` says of a Codex member's own sandbox: its mode, the bubblewrap
    codex will use, its temp dir, and whether it can run the helper."""
    bwrap = _system_bwrap(env)
    if sandbox == _UNSANDBOXED:
        helper = "not used: codex runs its commands without its own sandbox"
    elif bwrap is None:
        helper = "its own bundled bubblewrap (none on PATH): no links needed"
    elif helper_problem(codex_home, env, sandbox) is not None:
        helper = "refused: no links under its temp dir, every command would fail"
    else:
        helper = f"links in {codex_home}/tmp, run by {bwrap}"
    return {"sandbox": sandbox, "bwrap": bwrap, "tmpdir": str(_temp_dir(env)),
            "helper": helper}


def _temp_dir(env: Mapping[str, str]) -> PurePath:
    """Codex's ``std::env::temp_dir()``: TMPDIR, else /tmp."""
    return PurePath(env.get("TMPDIR") or "/tmp")


def _system_bwrap(env: Mapping[str, str]) -> str | None:
    return shutil.which("bwrap", path=env.get("PATH", os.defpath))
