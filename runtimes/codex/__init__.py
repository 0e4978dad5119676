"""Codex (protocols/codex.md): ``runtime`` picks the transport; ``exec`` (one ``codex exec`` per
turn) and ``app_server`` (one ``codex app-server``) never import each other — what both need is
in ``_shared`` (launch configuration, the permission → sandbox table) and ``provider``; the
app-server fields relied on are checked by ``schema``."""

from runtimes.codex.runtime import CodexRuntime

__all__ = ["CodexRuntime"]
