"""The ``codex`` runtime adapter: the member on its transport (protocols/codex.md) — one
long-lived ``codex app-server`` (``transport = "app-server"``, ``app_server``) or one ``codex
exec`` per turn (``exec``). The two transports share ``_shared`` and never import each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.contracts import Capabilities
from runtimes.codex.exec import open_exec
from runtimes.kit import Adapter

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from orchestrator.contracts import LaunchSpec
    from runtimes.base import RuntimeProcess

__all__ = ["CodexRuntime"]


class CodexRuntime(Adapter, runtime="codex"):
    """The ``codex`` runtime adapter."""

    capabilities = Capabilities(
        image_input=True,
        # Codex passes PNG, JPEG and WebP through unchanged; it re-encodes GIF (so an animated
        # GIF would not arrive as planned) and replaces anything else by a note.
        image_mimes=frozenset({"image/png", "image/jpeg", "image/webp"}),
        image_purpose="codex-image-file",
        # no native documents: codex takes no PDF (openai/codex#1797); they reach it derived
        document_mimes=frozenset(),
    )

    def open(self, spec: LaunchSpec) -> AbstractAsyncContextManager[RuntimeProcess]:
        """The member on its transport: one ``codex app-server`` (``transport =
        "app-server"``), or one ``codex exec`` per turn."""
        if spec.transport == "app-server":
            from runtimes.codex.app_server import open_app_server

            return open_app_server(spec, self._spawner)
        return open_exec(spec, self._spawner)
