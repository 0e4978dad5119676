"""An in-process fake runtime and the daemon's core wired around it, for fast unit tests.

``FakeRuntime`` implements the Runtime protocol without any process: each turn follows the next
step of its script (answer, exit, hang, stuck, fail, raise, or any coroutine function), so the
mailbox, the supervisor and the teams operations can be proven in milliseconds. ``core()``
builds them with the daemon's own ``build_core`` (orchestrator.daemon.core), over a real SQLite
journal: the tests' core cannot drift from the daemon's.
"""

from __future__ import annotations

import functools
import itertools
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from orchestrator.config import TeamConfig
from orchestrator.contracts import (
    Capabilities,
    LaunchSpec,
    RuntimeExited,
    RuntimeStuck,
    TextPart,
    Turn,
    TurnFailed,
    TurnResult,
)
from orchestrator.daemon.admission import AdmissionSettings, MemorySource
from orchestrator.daemon.core import Core as BuiltCore
from orchestrator.daemon.core import build_core
from orchestrator.daemon.ledger import Ledger
from orchestrator.daemon.migrations import open_journal
from orchestrator.daemon.queue import AsyncStore, Store
from orchestrator.daemon.telemetry import Delays
from orchestrator.paths import Home
from runtimes.hosts.local.host import LocalHost

if TYPE_CHECKING:
    from orchestrator.contracts import ApprovalRequest
    from orchestrator.daemon.approvals import Approvals
    from orchestrator.daemon.mailbox import Mailbox
    from orchestrator.daemon.members._supervisor import Supervisor
    from orchestrator.daemon.router import Router
    from orchestrator.daemon.teams import Teams
    from orchestrator.ports import OnSent

__all__ = ["Core", "FakeProcess", "FakeRuntime", "ManualClock", "ample_memory", "core",
           "team_config", "write_meminfo"]

Step = str | Callable[["FakeProcess", Turn], Awaitable[TurnResult]] | BaseException
_pids = itertools.count(1)


class FakeProcess:
    """One "process" of the fake runtime (the RuntimeProcess protocol)."""

    def __init__(self, runtime: FakeRuntime, spec: LaunchSpec) -> None:
        self._runtime = runtime
        self.spec = spec
        self.number = next(_pids)
        self._session_id = spec.session_id or f"fake-session-{self.number}"
        self.resumed = spec.session_id is not None  # a recorded session goes on
        self._exit_code: int | None = None
        self._exited = anyio.Event()
        self.responsive = True
        self.probes_out: list[Callable[[], None]] = []
        self.probed = 0  # probes sent to this process
        self.turns: list[Turn] = []

    pid = None  # nothing to record for orphan reaping

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    @property
    def usable(self) -> bool:
        return not self._exited.is_set()

    @property
    def healthy(self) -> bool:
        return self.usable

    @property
    def activity(self) -> str | None:
        return None

    def stderr_tail(self) -> list[str]:
        return []

    def exit(self, code: int | None) -> None:
        if not self._exited.is_set():
            self._exit_code = code
            self._exited.set()

    async def wait(self) -> int | None:
        await self._exited.wait()
        return self._exit_code

    async def probe(self, timeout: float) -> bool:
        self._runtime.probed()
        self.probed += 1
        return self.responsive

    def send_probe(self, answered: Callable[[], None]) -> Callable[[], None] | None:
        """A probe written at once when the runtime says so (``inline_probes``): answered
        at once while ``responsive``, else held until ``answer_probes``; otherwise None —
        the round awaits ``probe`` (which tests replace)."""
        if not self._runtime.inline_probes or not self.usable:
            return None
        self._runtime.probed()
        self.probed += 1
        if self.responsive:
            answered()
        else:
            self.probes_out.append(answered)

        def forget() -> None:
            if answered in self.probes_out:
                self.probes_out.remove(answered)
        return forget

    def answer_probes(self) -> None:
        """The probes held (a frozen process continued): answered now."""
        held, self.probes_out = self.probes_out, []
        for answered in held:
            answered()

    def kill(self) -> None:
        self.exit(-9)

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        if not self.usable:
            raise RuntimeExited(self.spec.member, self._exit_code, [])
        self.turns.append(turn)
        self._runtime.turns.append(turn)
        await on_sent()
        step = self._runtime.next_step()
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            return await step(self, turn)
        return await self._follow(step, turn)

    async def _follow(self, step: str, turn: Turn) -> TurnResult:
        member = self.spec.member
        if step == "answer":
            text = " ".join(p.text for p in turn.parts if isinstance(p, TextPart))
            return TurnResult(reply=f"echo: {text}", session_id=self._session_id)
        if step == "exit":
            self.exit(1)
            raise RuntimeExited(member, 1, [])
        if step == "stuck":
            raise RuntimeStuck(member, 1.0)
        if step == "fail":
            raise TurnFailed(member, "API Error: 401 fake", api_status=401, retryable=False)
        if step == "hang":
            await anyio.sleep_forever()
        raise AssertionError(f"unknown fake step {step!r}")


class FakeRuntime:
    """The Runtime protocol, in process. ``script``: the steps of the coming turns (then
    "answer"); ``start_error``: raised by every start (e.g. MemberStartFailed)."""

    name = "claude"
    default_executable = "true"
    env_var = "TEAMCTL_FAKE_BIN"
    capabilities = Capabilities(image_input=False)

    def __init__(self, script: list[Step] | None = None, *, inline_probes: bool = False
                 ) -> None:
        """``inline_probes``: its processes' probes are written at once (``send_probe``),
        as Claude's, Codex's and ACP's are; else awaited, as OpenCode's is."""
        self.inline_probes = inline_probes
        self.script: list[Step] = list(script or [])
        self.start_error: BaseException | None = None
        self.opened: list[FakeProcess] = []
        self.turns: list[Turn] = []
        self.probes = 0
        self._probed = anyio.Event()
        self.started = anyio.Event()

    def probed(self) -> None:
        self.probes += 1
        self._probed.set()
        self._probed = anyio.Event()

    async def wait_probes(self, count: int, timeout: float = 10) -> None:
        """Until ``count`` probes were sent in all (told by each probe, no poll)."""
        with anyio.fail_after(timeout):
            while self.probes < count:
                await self._probed.wait()

    def next_step(self) -> Step:
        return self.script.pop(0) if self.script else "answer"

    @asynccontextmanager
    async def open(self, spec: LaunchSpec) -> AsyncIterator[FakeProcess]:
        if self.start_error is not None:
            raise self.start_error
        process = FakeProcess(self, spec)
        self.opened.append(process)
        self.started.set()
        self.started = anyio.Event()
        try:
            yield process
        finally:
            process.exit(0 if process.exit_code is None else process.exit_code)


class ManualClock:
    """Time that moves only when the code under test sleeps (or a test advances it): the
    supervisor's backoff and restart window, proven without waiting."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await anyio.lowlevel.checkpoint()


@dataclass
class Core:
    """The daemon's pieces around one fake runtime, from the daemon's own ``build_core``."""

    home: Home
    store: AsyncStore
    supervisor: Supervisor
    mailbox: Mailbox
    teams: Teams
    runtime: FakeRuntime
    router: Router
    approvals: Approvals
    built: BuiltCore | None = None  # every part, as build_core made them (the ledger...)
    extra: dict[str, Any] = field(default_factory=dict)


def ledger_alone(journal: AsyncStore, tg: Any, *,
                 on_release: Callable[[str, str], None] = lambda team, member: None,
                 **options: Any) -> Ledger:
    """A ledger outside a core: its hooks do nothing unless the test listens (``on_release``)."""
    return Ledger(journal, tg, on_release=on_release, on_change=lambda: None,
                  on_budget_change=lambda team, member: None, **options)


def team_config(tmp_path: Path, *members: dict[str, Any], name: str = "web",
                **team: Any) -> TeamConfig:
    """A validated team of fake members (``members``: MemberConfig fields beyond the name;
    ``team``: more keys of ``[team]``)."""
    rows = [{"runtime": "claude", "start_timeout": 5.0, **m} for m in members]
    return TeamConfig.model_validate(
        {"team": {"name": name, "workdir": str(tmp_path), **team}, "members": rows})


@functools.cache
def _migrated() -> bytes:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "state.db"
        open_journal(path).close()  # its WAL checkpointed into the file
        return path.read_bytes()


def _new_journal(path: Path) -> Path:
    """A new journal at today's schema, as ``Store`` makes it, from one made once per process:
    migrating each test's new journal cost ~35 ms (SQLite's syncs, mostly); the migrations are
    tested on their own (test_journal_migrations)."""
    path.write_bytes(_migrated())
    path.chmod(0o600)
    return path


def journal_at(path: Path) -> Store:
    """``open_journal(path)``, a journal not there yet made as ``core`` makes it: copied from
    the one migrated once per process (a new journal's 77 statements of schema are ~7 ms of
    CPU; a test that is about the migrations opens its own)."""
    if not path.exists():
        _new_journal(path)
    return open_journal(path)


@asynccontextmanager
async def core(tmp_path: Path, runtime: FakeRuntime | None = None,
               store: Store | None = None, clock: ManualClock | None = None,
               **options: Any) -> AsyncIterator[Core]:
    """The mailbox, supervisor and teams over a real journal and a fake runtime; everything
    is stopped when the block ends. ``options``: more of build_core's keywords (``runtimes``:
    the fakes by runtime name, else ``runtime`` is the claude one)."""
    home = Home(tmp_path / "home")
    home.prepare()
    runtime = runtime or FakeRuntime()
    journal = store or open_journal(_new_journal(home.database))
    db = AsyncStore(journal)
    try:
        async with anyio.create_task_group() as tg:
            hosts = options.pop("hosts", lambda team, member: LocalHost())
            runtimes = options.pop("runtimes", {"claude": runtime})  # by runtime name
            options.setdefault("admission", ample_memory(tmp_path))
            # spans read and sent at once: a test waits on the receiver, never on a batch
            options.setdefault("telemetry_delays", Delays(batch=0.02, export=0.02))
            built = await build_core(home, db, tg, runtimes=runtimes,
                                     hosts=hosts,
                                     local_host=LocalHost(),
                                     vision=lambda rt, model, override: override,
                                     **({"clock": clock, "sleep": clock.sleep} if clock else {}),
                                     **options)
            teams = built.teams
            yield Core(home, db, built.supervisor, built.mailbox, teams, runtime, built.router,
                       built.approvals, built=built)
            with anyio.CancelScope(shield=True), anyio.fail_after(20):
                await teams.shutdown()
                await built.telemetry.close(5.0)
            tg.cancel_scope.cancel()
    finally:
        journal.close()


def write_meminfo(path: Path, *, available_mib: int, total_mib: int = 64 * 1024) -> Path:
    """A /proc/meminfo's lines admission reads, written whole (a new file renamed over the old:
    the daemon never reads half of one)."""
    part = path.with_name(path.name + ".part")
    part.write_text(f"MemTotal:       {total_mib * 1024} kB\n"
                    f"MemFree:        {available_mib * 1024} kB\n"
                    f"MemAvailable:   {available_mib * 1024} kB\n"
                    "Buffers:           1024 kB\n")
    part.replace(path)
    return path


def ample_memory(directory: Path, **settings: Any) -> AdmissionSettings:
    """Admission over a meminfo file with 60 GiB available and no PSI (a fake's pids are not
    processes: nothing is measured) — a core's members never wait on this machine's memory
    unless the test says so."""
    meminfo = directory / "meminfo"
    if not meminfo.exists():
        write_meminfo(meminfo, available_mib=60 * 1024)
    return AdmissionSettings(memory=MemorySource(meminfo, None),
                             **{"measure": lambda pid: None, **settings})


def asking_step(request: ApprovalRequest, outcomes: list[Any]) -> Step:
    """A turn step whose runtime asks, then answers with what the operator decided."""
    async def step(process: FakeProcess, turn: Turn) -> TurnResult:
        approver = process.spec.approver
        assert approver is not None
        got: list[Any] = []
        async with anyio.create_task_group() as tg:  # as the adapters do: the process may die
            async def ask() -> None:
                got.append(await approver.ask(request))
                tg.cancel_scope.cancel()
            tg.start_soon(ask)
            await process.wait()
            tg.cancel_scope.cancel()
        if not got:
            raise RuntimeExited(process.spec.member, process.exit_code, [])
        answer = got[0]
        outcomes.append(answer)
        await approver.confirmed(answer.request_id)
        return TurnResult(reply=f"{answer.decision}: {answer.message or answer.text or ''}")
    return step
