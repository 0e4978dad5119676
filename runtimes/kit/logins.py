"""Where each CLI keeps the operator's own login and user-level settings, and how a member
uses them without ever copying a credential (protocols/logins.md).

- Claude: a member with ``login = "operator"`` runs with the operator's own config dir (no
  private ``CLAUDE_CONFIG_DIR``): the CLI's lock file serializes token refreshes, and the
  operator's CLAUDE.md, settings and MCP servers apply. Never a symlinked or copied
  ``.credentials.json`` (its refresh replaces the link and spends the operator's token).
- Codex: a private ``CODEX_HOME`` whose ``auth.json`` is a symlink to the operator's (codex
  rewrites through the link, atomically, under a lock beside the real file); ``AGENTS.md``,
  ``prompts/``, ``skills/`` and ``rules/`` linked too; the operator's ``config.toml`` merged
  into the member's (never its ``forced_login_method``, which deletes the login).
- OpenCode: private HOME/XDG dirs, ``$XDG_DATA_HOME/opencode/auth.json`` a symlink to the
  operator's (written in place through the link), ``OPENCODE_CONFIG_DIR`` the operator's config
  dir (providers, AGENTS.md, agents).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "claude_config_dir",
    "codex_home",
    "link",
    "opencode_config_dir",
    "opencode_data_dir",
    "operator_home",
]


def operator_home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def claude_config_dir() -> Path:
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else operator_home() / ".claude"


def codex_home() -> Path:
    configured = os.environ.get("CODEX_HOME")
    return Path(configured) if configured else operator_home() / ".codex"


def opencode_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME")
    return (Path(base) if base else operator_home() / ".local" / "share") / "opencode"


def opencode_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base else operator_home() / ".config") / "opencode"


def link(target: Path, at: Path) -> bool:
    """Make ``at`` a symlink to ``target`` (replacing an old link, never a real file);
    False (and no link) when ``target`` does not exist. Never copies anything."""
    if not target.exists():
        if at.is_symlink():
            at.unlink()
        return False
    if at.is_symlink():
        if Path(os.readlink(at)) == target:
            return True
        at.unlink()
    elif at.exists():
        raise FileExistsError(f"{at} exists and is not a link teamctl made")
    at.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    at.symlink_to(target)
    return True
