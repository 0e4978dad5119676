"""OpenCode (protocols/opencode.md): ``runtime`` drives ``opencode serve`` over HTTP and its event
stream; ``launch`` its config and environment, ``provider`` the provider's key, ``message`` a
turn's parts and errors, ``asks`` its permission events as operator approvals."""

from runtimes.opencode.runtime import OpenCodeRuntime

__all__ = ["OpenCodeRuntime"]
