"""The journal's engine: one SQLite file (WAL), one writer connection, group commit, and the
migration runner. The tables themselves belong to their owners, who declare their migrations
and their typed async methods beside their code (``queue``: messages and deliveries;
``_team_records``, ``worktrees``, ``_variant_cache``, ``approvals``, ``ledger``, ``describe``,
``board``, ``notify``); the composition root (``daemon.migrations``) gives the engine their
migrations in a fixed order, so it imports no owner.

Durability: the connection runs ``synchronous=NORMAL`` and a durable commit is followed by an
fsync of the WAL file — what ``synchronous=FULL`` does, but decided per commit, so a group of
calls (``AsyncJournal``'s group commit) pays one fsync, and transitions that recovery undoes
anyway (prepared, sent) pay none. SQLite syncs the WAL before each checkpoint itself.

The schema is versioned (``PRAGMA user_version``); migration n is the nth script. The scripts a
journal lacks run in order in one transaction, committed (and synced) once: a journal is at its
old version or at the newest, never between — and a new home's first start pays one fsync,
not one per migration (27 today).

The journal's calls are synchronous and short; the daemon makes them through ``AsyncJournal``,
which runs them one group at a time in a worker thread, so the event loop never waits on an
fsync — or, for the few calls on a message's way to its member that need no fsync (a claim,
``sent``, a delivery's row), at once on the loop's thread while the writer is idle
(``AsyncJournal.quick``). WAL checkpoints run in the writer thread after a durable commit, not
at the end of whichever commit crossed SQLite's threshold.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import anyio

from orchestrator.errors import StoreError, map_exceptions

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from pathlib import Path

__all__ = ["AsyncJournal", "Journal", "Migrations", "collect"]

P = ParamSpec("P")
T = TypeVar("T")

_CHECKPOINT_BYTES = 1000 * 4096  # SQLite's wal_autocheckpoint default, in bytes
CACHE_KIB = 512  # SQLite's page cache for the journal (its default: 2000 KiB)

# one owner's part of the journal's migrations: schema version → its statements (";"-separated,
# no ";" inside a statement: the runner splits on it)
Migrations = dict[int, str]


def collect(*owners: Mapping[int, str]) -> tuple[str, ...]:
    """The journal's migrations: script n holds every owner's part of version n, in the order
    the owners are given. The versions must run 1, 2, … without a gap."""
    versions = sorted({version for owner in owners for version in owner})
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"the journal's migrations skip a version: {versions}")
    return tuple(";".join(owner[v] for owner in owners if v in owner) for v in versions)


@dataclass
class _Group:
    """What the calls of one group did: savepoints in the current call, and whether any write
    needs the fsync (a ``durable=False`` transition alone does not)."""

    savepoints: int = 0
    durable: bool = False


def _outcome(call: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        with map_exceptions({sqlite3.Error: _read_failed}):
            return True, call()
    except Exception as exc:  # handed back to the caller that asked for this call
        return False, exc


class Journal:
    """The journal's one connection (use from one thread at a time)."""

    def __init__(self, path: Path, migrations: Sequence[str]) -> None:
        self._migrations = tuple(migrations)
        try:
            # Created 0600 before SQLite opens it: the -wal and -shm files take its mode.
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            path.chmod(0o600)
        except OSError as exc:
            raise StoreError(f"cannot open the journal {path}: {exc.strerror}") from exc
        try:
            self._group: _Group | None = None  # set while run_group runs its calls
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # + an fsync per durable commit
            self._wal = f"{os.path.realpath(path)}-wal"  # SQLite keeps it beside the target
            # no checkpoint at the end of whichever commit passes SQLite's threshold — that
            # may be a quick call on the event loop's thread; the writer checkpoints instead
            # (``_checkpoint_if_large``)
            self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=5000")
            # SQLite's page cache is the daemon's own heap (2 MiB by default, filled by a burst
            # of deliveries and kept): the journal's pages are in the OS's cache anyway
            self._db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the journal {path}: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    # -- group commit -------------------------------------------------------------------------

    def run_group(self, calls: Sequence[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        """Run ``calls`` in one transaction, each write a savepoint of it, then commit once:
        one fsync for every call that was waiting (group commit). Each call's outcome is
        ``(True, result)`` or ``(False, exception)``; a call that fails rolls back its own
        savepoint only. If the commit itself fails, every call that wrote fails with it
        (a call that only read keeps its result); nothing is reported written that is not."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:  # e.g. busy or full: each call on its own, as without a group
            return [_outcome(call) for call in calls]
        group = _Group()
        self._group = group
        outcomes, wrote = [], []
        try:
            for call in calls:
                before, group.savepoints = self._db.total_changes, 0
                outcomes.append(_outcome(call))
                changed = self._db.total_changes != before
                wrote.append(changed or group.savepoints > 0)
                group.durable |= changed and group.savepoints == 0  # a write outside _tx
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        finally:
            self._group = None
        try:
            self._commit(durable=group.durable)
        except StoreError as exc:
            return [(False, exc) if did else outcome for outcome, did in zip(outcomes, wrote,
                                                                              strict=True)]
        return outcomes

    def _commit(self, *, durable: bool) -> None:
        """COMMIT, then (durable) fsync the WAL that now holds the commit — the row is on disk
        before the caller hears it was written."""
        try:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"the journal could not be written: {exc}") from exc
        if durable:
            try:
                descriptor = os.open(self._wal, os.O_RDONLY)
                try:
                    os.fsync(descriptor)
                finally:
                    os.close(descriptor)
            except OSError as exc:
                raise StoreError("the journal could not be made durable: "
                                 f"{exc.strerror or exc}") from exc
            self._checkpoint_if_large()

    def _checkpoint_if_large(self) -> None:
        """After a durable commit (in the writer thread): once the WAL holds as much as
        SQLite's own automatic checkpoint waits for (1000 pages of 4 KiB), copy it into the
        database and truncate it. A checkpoint that fails is tried again after the next
        durable commit; the WAL keeps every row meanwhile."""
        try:
            if os.stat(self._wal).st_size < _CHECKPOINT_BYTES:
                return
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except (OSError, sqlite3.Error):
            return

    @contextmanager
    def _savepoint(self, group: _Group, *, durable: bool) -> Iterator[None]:
        try:
            self._db.execute("SAVEPOINT tc_call")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK TO tc_call")
                self._db.execute("RELEASE tc_call")
                raise
            self._db.execute("RELEASE tc_call")
        except sqlite3.Error as exc:
            raise StoreError(f"the journal could not be written: {exc}") from exc
        group.savepoints += 1
        group.durable |= durable

    @property
    def connection(self) -> sqlite3.Connection:
        """For the tables' owners: their reads."""
        return self._db

    def transaction(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (see ``_tx``), for the tables' owners."""
        return self._tx(durable=durable)

    @contextmanager
    def _tx(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction. ``durable=False`` commits without the fsync
        (``synchronous=NORMAL``): the row survives a crash of the daemon but may roll back on
        power loss — only used for transitions that recovery undoes anyway (prepared, sent).
        Inside a group (``run_group``) it is a savepoint, committed with the group."""
        if self._group is not None:
            with self._savepoint(self._group, durable=durable):
                yield self._db
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"the journal could not be written: {exc}") from exc
        self._commit(durable=durable)

    def _migrate(self) -> None:
        newest = len(self._migrations)
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > newest:
            raise StoreError(
                f"the journal has schema {version}, newer than this teamctl ({newest})"
            )
        if version == newest:
            return
        with self._tx() as db:  # every step or none: one commit, one fsync
            for script in self._migrations[version:]:
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {newest}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])


class _Call:
    __slots__ = ("outcome", "run", "wake")

    def __init__(self, run: Callable[[], Any]) -> None:
        self.run = run
        self.wake: anyio.Event | None = None  # made when the call waits (a leader never does)
        self.outcome: tuple[bool, Any] | None = None

    def done(self) -> None:
        if self.wake is not None:
            self.wake.set()


class AsyncJournal:
    """Runs journal calls in a worker thread, one group at a time (the single writer).

    Group commit: calls that arrive while a group is being written wait for the next group, and
    a group is one transaction with one fsync, however many calls it holds — under a fan-out,
    a hundred members' answers cost a few fsyncs, not a hundred. A call returns only after the
    commit that holds its write (so ``send`` still returns journaled). The first caller that
    finds no group running leads: it writes groups until the queue is empty.

    Cancellation: a call cancelled before its group started is never run; once its group runs,
    it completes (the thread is not abandoned) and the cancellation is delivered after.
    """

    def __init__(self, journal: Journal) -> None:
        self.sync = journal
        self._queue: list[_Call] = []
        self._leading = False

    @property
    def writing(self) -> bool:
        """Whether a group is being written or calls wait for one: work in the writer thread
        that no task of the loop shows as runnable (a settled test reads it)."""
        return self._leading or bool(self._queue)

    async def run(self, fn: Callable[Concatenate[Journal, P], T], *args: P.args,
                  **kwargs: P.kwargs) -> T:
        """``fn(journal, *args)`` in the writer thread: how a table's owner reaches its SQL."""
        journal = self.sync
        return await self.call(lambda: fn(journal, *args, **kwargs))

    async def quick(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A short call that needs no fsync — an indexed read, a ``durable=False`` transition
        (a delivery claimed, sent): run at once on the event loop's thread when no group is
        being written, else queued like any call. A message's way to its member's stdin
        is three such calls; each hop to the writer thread and back cost more than the call
        itself (~0.25 ms of thread wake-ups and GIL hand-overs on the project VM, per hop).
        Never for a durable write (the fsync would stall the loop) nor a long read: the
        checkpoints that copy the WAL into the database run in the writer thread after a
        durable commit, never here (``Journal._commit``)."""
        if self._leading or self._queue:
            return await self.call(fn, *args, **kwargs)
        await anyio.lowlevel.checkpoint_if_cancelled()
        ok, value = self.sync.run_group([lambda: fn(*args, **kwargs)])[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one journal call in the writer thread; a raw ``sqlite3.Error`` (a read that
        failed: writes already raise StoreError) comes out as StoreError."""
        call = _Call(lambda: fn(*args, **kwargs))
        self._queue.append(call)
        try:
            while call.outcome is None:
                if not self._leading:
                    await self._lead()
                else:
                    call.wake = anyio.Event()
                    await call.wake.wait()
        except BaseException:
            if call in self._queue:  # cancelled before its group: never run
                self._queue.remove(call)
            if not self._leading and self._queue:  # nobody leads now: a waiting call takes over
                self._queue[0].done()
            raise
        ok, value = call.outcome
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    async def _lead(self) -> None:
        self._leading = True
        try:
            while self._queue:
                await anyio.lowlevel.checkpoint_if_cancelled()
                group, self._queue = self._queue, []
                with anyio.CancelScope(shield=True):  # a group, once taken, is answered
                    outcomes = await anyio.to_thread.run_sync(
                        self.sync.run_group, [c.run for c in group])
                for call, outcome in zip(group, outcomes, strict=True):
                    call.outcome = outcome
                    call.done()
        finally:
            self._leading = False


def _read_failed(exc: BaseException) -> StoreError:
    return StoreError(f"the journal could not be read: {exc}")
