"""``teamctl mcp`` on a machine that is not this one (an SSH host, a pod): its relay
(``McpServer.RELAY``, standard library only) copied into the member's private dir (mirrored
there), and how it starts.

Both remote kinds of host ship it the same way; neither imports the other for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.contracts import McpServer

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["shipped_mcp_server"]


def shipped_mcp_server(state_dir: Path, env: dict[str, str]) -> McpServer:
    """``teamctl mcp`` for a member on another machine (an SSH host, a pod): its relay copied
    into the member's private dir (mirrored there), started there by ``python3 -I -S`` with
    ``env`` (its token, its socket's directory)."""
    shipped = state_dir / "py"
    shipped.mkdir(mode=0o700, parents=True, exist_ok=True)
    relay = shipped / McpServer.RELAY.name
    relay.write_text(McpServer.RELAY.read_text(encoding="utf-8"), encoding="utf-8")
    return McpServer(("python3", "-I", "-S", str(relay)), env)
