"""The runtime port: what the core asks of a runtime adapter, and nothing of how one works.

The supervisor opens a member's process through a ``Runtime``; the mailbox runs turns on the
``RuntimeProcess`` it lends. Adapters (``runtimes/*``) implement these protocols; the core
(``orchestrator/daemon``) names only them, so it never imports an adapter — the composition
root wires them in (``orchestrator.contracts`` re-exports this module for the adapters).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from anyio.abc import Process

    from orchestrator.contracts import Capabilities, LaunchSpec, Turn, TurnResult

__all__ = ["OnSent", "Runtime", "RuntimeProcess", "Spawner"]

OnSent = Callable[[], Awaitable[None]]


class RuntimeProcess(Protocol):
    """A running member process, ready for turns (one at a time)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def resumed(self) -> bool:
        """Whether the process went on with a session that existed before it started (Claude's
        ``--resume``, Codex's thread resume, OpenCode's session found again): what earlier
        turns on it did, a cut one included, is in the session."""
        ...

    @property
    def exit_code(self) -> int | None:
        """The exit status once the process has exited (negative: killed by that signal)."""
        ...

    @property
    def usable(self) -> bool:
        """False once the process has exited or is being killed: no turn may start on it."""
        ...

    @property
    def healthy(self) -> bool:
        """Liveness evidence beyond the pid (e.g. OpenCode's event stream heartbeats)."""
        ...

    @property
    def activity(self) -> str | None:
        """What the runtime says it is doing now, for status (e.g. "retrying (attempt 2)")."""
        ...

    def stderr_tail(self) -> list[str]: ...

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        """Deliver ``turn``; call ``on_sent`` once the transport accepted it; return at the
        runtime's end-of-turn event. Raises RuntimeExited, RuntimeStuck or TurnFailed."""
        ...

    async def wait(self) -> int | None:
        """Wait until the process has exited; its exit status (negative: killed by signal)."""
        ...

    async def probe(self, timeout: float) -> bool:
        """Liveness of an idle member: True if the runtime answered within ``timeout``."""
        ...

    def send_probe(self, answered: Callable[[], None]) -> Callable[[], None] | None:
        """The same probe written now, without awaiting (a round of the team's idle members
        goes out in one turn of the event loop; the round holds the deadline):
        ``answered()`` runs when the runtime's answer is read. The callable that forgets the
        probe (its round is over); None when it cannot be written at once — a runtime whose
        probe must be awaited, a write already in progress — and ``probe`` is awaited."""
        ...

    def kill(self) -> None:
        """SIGKILL the member's process group now (an unresponsive member); the supervisor
        sees it exit and restarts it by policy."""
        ...


class Runtime(Protocol):
    """One runtime adapter: its row of ``orchestrator.runtime_table`` (name, executable, and
    the capability fields the core reads), what its transport carries, and how it opens a
    member's process."""

    name: str
    default_executable: str
    env_var: str
    capabilities: Capabilities

    def open(self, spec: LaunchSpec) -> AbstractAsyncContextManager[RuntimeProcess]: ...


class Spawner(Protocol):
    async def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
    ) -> Process: ...
