"""teamctl's MCP server (send_message, list_team, message_status and the board's tools), served
by the daemon: a member's runtime starts ``teamctl mcp`` (orchestrator/client/mcp_bridge.py, a
relay of a few MiB), which hands each of the runtime's lines to the daemon on a connection
opened with the member's token; the control server passes those connections here
(docs/messaging.md, docs/dev/performance.md "teamctl's own cost per member").

- ``_server``: the protocol — a relay's opening line, one message answered as the member;
- ``_tools``: the tools' schemas, their arguments checked, a call run as the member;
- ``_tasks``: the board's tools (docs/board.md).
"""

from __future__ import annotations

from orchestrator.daemon.mcp._server import OPENING, McpServer, Reply, opened
from orchestrator.daemon.mcp._tools import Call, Caller, ToolArgumentsInvalid, tools

__all__ = ["OPENING", "Call", "Caller", "McpServer", "Reply", "ToolArgumentsInvalid",
           "opened", "tools"]
