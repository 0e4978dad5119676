"""The runtime port: what the core asks of a runtime adapter, and nothing of how one works.

The supervisor opens a member's process through a ``Runtime``; the mailbox runs turns on the
``RuntimeProcess`` it lends. Adapters (``runtimes/*``) implement these protocols, defined beside
the types they carry in ``orchestrator.contracts`` (the one module adapters import); the core
(``orchestrator/daemon``) names them here, so it never imports an adapter — the composition
root wires them in.
"""

from __future__ import annotations

from orchestrator.contracts import OnSent, Runtime, RuntimeProcess, Spawner

__all__ = ["OnSent", "Runtime", "RuntimeProcess", "Spawner"]
