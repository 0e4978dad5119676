"""The ``codex`` runtime adapter: the member on its transport (protocols/codex.md) — one
long-lived ``codex app-server`` (``transport = "app-server"``, ``app_server``) or one ``codex
exec`` per turn (``exec``). The two transports share ``_shared`` and never import each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from orchestrator.contracts import Capabilities
from runtimes.codex.exec import open_exec
from runtimes.kit import Adapter

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from orchestrator.contracts import LaunchSpec
    from runtimes.kit.base import RuntimeProcess

__all__ = ["CodexOptions", "CodexRuntime"]

Transport = Literal["exec", "app-server"]


@dataclass(frozen=True)
class CodexOptions:
    """The member's keys only Codex reads (``LaunchSpec.options``, the runtime table's
    ``options``), typed: a key or a value it does not know is a TypeError, never ignored."""

    transport: Transport = "app-server"

    def __post_init__(self) -> None:
        if self.transport not in get_args(Transport):
            raise TypeError(f"codex transport {self.transport!r} is not one of "
                            f"{', '.join(get_args(Transport))}")

    @classmethod
    def of(cls, spec: LaunchSpec) -> CodexOptions:
        return cls(**spec.options)


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
        if CodexOptions.of(spec).transport == "app-server":
            from runtimes.codex.app_server import open_app_server

            return open_app_server(spec, self._spawner)
        return open_exec(spec, self._spawner)
