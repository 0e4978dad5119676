"""The suite's fixtures and hooks: a private TEAMCTL_HOME and the teamctl CLI per test
(``teamctl``), its log followed (``follow_logs``), the anyio backend, the property tests' budget,
and the machine's test dependencies installed once a session. The helpers they are built from
are tests/support/'s (driver.py, processes.py, members.py)."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest
from _pytest.pathlib import LOCK_TIMEOUT, cleanup_numbered_dir
from hypothesis import HealthCheck, settings

from tests.support.driver import (
    CREDENTIAL_VARS,
    REPO,
    SYSTEM_DEPS,
    LogFollower,
    Teamctl,
    fakes_path,
    operator_home,
)

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator
    from pathlib import Path

# Property tests get a bounded budget: a fixed number of examples and no per-example deadline
# (a deadline is a wall-clock assertion, and the suite shares its cores). ``thorough`` is the
# same properties with ten times the examples: ``make properties`` (TEAMCTL_HYPOTHESIS=
# thorough, the property tests alone), which CI runs after ``make test``. No test pins its own
# count: the profile is the one place a run's budget is set.
settings.register_profile("suite", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=400, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("TEAMCTL_HYPOTHESIS", "suite"))


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker leaves without tearing its interpreter down. Its results are with the
    controller by then (a worker's atexit runs once the controller closed its channel); what
    is left is freeing every object of a run, ~1 s, while the controller waits on each worker
    to exit (py-spy: ``Group.terminate`` → ``Popen.wait``): 1.1-1.6 s of the unit layer's
    wall. Registered first, so it runs after every other exit handler."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        atexit.register(_leave)


def pytest_sessionstart(session: pytest.Session) -> None:
    """What the suite runs beyond Python and git — bubblewrap for the sandbox tests, the
    OpenSSH client for ``doctor --host`` — is installed by .ci/system-deps when missing and the
    suite runs as root (a fresh machine's ``make test``), once, before any worker starts; run
    as another user, the line to install it is printed, and the tests that need it fail
    naming it. (A real sshd, Chromium and an X server are ``make e2e``'s.)"""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _clear_old_runs(session.config)
    done = subprocess.run([str(SYSTEM_DEPS), "test"], capture_output=True, text=True,
                          check=False)
    said = done.stderr.strip() + ("\n" + done.stdout.strip()[-2000:] if done.returncode else "")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if said.strip() and reporter is not None:
        reporter.write_line(said.strip(), yellow=True)


def _clear_old_runs(config: pytest.Config) -> None:
    """pytest keeps the last three runs' temporary directories and removes an older one when
    the run ends: after the last test, alone (~10,000 files of a unit run: ~1 s, every run).
    The same removal — pytest's own, locks honoured — runs in a thread from the start instead,
    beside the tests; the run's end waits for it (``pytest_unconfigure``) and then finds
    nothing left to remove."""
    factory = config._tmp_path_factory  # type: ignore[attr-defined]  # as xdist reads it
    if factory._given_basetemp is not None:
        return  # --basetemp: pytest empties that one itself, at the start
    base = factory.getbasetemp()
    keep = int(config.getini("tmp_path_retention_count"))
    if config.getini("tmp_path_retention_policy") == "none":
        keep = 0
    dead_before = base.stat().st_mtime - LOCK_TIMEOUT
    thread = threading.Thread(target=_remove_old_runs, name="old pytest runs",
                              args=(base.parent, keep, dead_before), daemon=True)
    thread.start()
    config.stash[_CLEARING] = thread


def _remove_old_runs(root: Path, keep: int, dead_before: float) -> None:
    # a name another pytest removed first (two runs at once) is no test's failure: an error
    # out of this thread would be reported in whichever test runs beside it
    with contextlib.suppress(OSError):
        cleanup_numbered_dir(root, "pytest-", keep, dead_before)


_CLEARING = pytest.StashKey[threading.Thread]()


def pytest_unconfigure(config: pytest.Config) -> None:
    thread = config.stash.get(_CLEARING, None)
    if thread is not None:
        thread.join(timeout=60)  # a removal that hangs leaves its files, as pytest's would


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded — every module, class and test item — lives as long as the
    run: frozen out of the cyclic collector, a full collection no longer walks it (each one
    during the run, and the several pytest makes at its end: ~0.45 s of a unit worker)."""
    gc.freeze()


def _leave() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


@pytest.fixture
def anyio_backend() -> str:
    """Every ``anyio`` test runs on asyncio, the daemon's loop. A test that also holds on
    another backend says so where it is, with the reason, by parametrising this fixture
    (``@pytest.mark.parametrize("anyio_backend", ["trio"])``), or for all its tests with a
    module-level ``ANYIO_BACKENDS`` tuple (see ``pytest_generate_tests``)."""
    return "asyncio"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module whose code under test is written to anyio, not to asyncio, names the backends
    its tests run on in ``ANYIO_BACKENDS`` (trio beside asyncio catches a reliance on
    asyncio's loop); a test that parametrises ``anyio_backend`` itself keeps its own."""
    backends = getattr(metafunc.module, "ANYIO_BACKENDS", None)
    if backends is None or "anyio_backend" not in metafunc.fixturenames:
        return
    if any("anyio_backend" in str(mark.args[0])
           for mark in metafunc.definition.iter_markers("parametrize")):
        return
    metafunc.parametrize("anyio_backend", backends)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                               call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A failed test that drove a daemon shows the daemon's last log lines (redacted, as
    ``teamctl logs`` shows them): a member that "did not start" on a CI machine is then
    diagnosable from CI's output alone."""
    outcome = yield
    report = outcome.get_result()
    ctl = getattr(item, "funcargs", {}).get("teamctl")
    if report.failed and isinstance(ctl, Teamctl):
        path = ctl.home / "logs" / "teamctl.jsonl"
        with contextlib.suppress(OSError):
            lines = path.read_text(errors="replace").splitlines()[-_LOG_LINES_ON_FAILURE:]
            report.sections.append(("teamctl.jsonl (last lines)", "\n".join(lines)))


_LOG_LINES_ON_FAILURE = 60


@pytest.fixture
def teamctl(tmp_path: Path) -> Iterator[Teamctl]:
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEAMCTL_", "FAKE_CLAUDE_"))
           and k not in CREDENTIAL_VARS}
    env["TEAMCTL_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env["HOME"] = str(operator_home(tmp_path / "operator"))
    env["PATH"] = fakes_path(env.get("PATH", ""))
    # `opencode serve` (and its fake) never exits at the end of its stdin: SIGTERM at once
    env["TEAMCTL_OPENCODE_STOP_GRACE"] = "0"
    ctl = Teamctl(home, work, env)
    yield ctl
    ctl.shutdown()


@pytest.fixture
def follow_logs(teamctl: Teamctl) -> Iterator[LogFollower]:
    follower = LogFollower(teamctl)
    yield follower
    follower.close()


