"""A sandboxed member's way out (docs/security.md, "The network boundary").

- ``_proxy``: the HTTP CONNECT proxy on the member's own Unix socket;
- ``_policy``: which ``host:port`` it may reach (pure);
- ``_proxies``: the daemon's proxies, one per member that needs one.
"""

from __future__ import annotations

from orchestrator.daemon.egress._proxies import EgressProxies

__all__ = ["EgressProxies"]
