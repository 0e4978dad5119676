"""Claude Code (protocols/claude.md): ``runtime`` is its stream-JSON control protocol on the kit,
``launch`` the member's argv, settings and environment, ``asks`` its permission requests as
operator approvals."""

from runtimes.claude.runtime import ClaudeRuntime

__all__ = ["ClaudeRuntime"]
