"""Agents over the Agent Client Protocol (protocols/acp.md: Gemini CLI, Qwen Code): ``runtime``
is the protocol's mapping on the kit, ``launch`` each agent's preset and environment, ``prompt``
a turn's content blocks."""

from runtimes.acp.runtime import AcpRuntime

__all__ = ["AcpRuntime"]
