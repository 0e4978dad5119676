"""The unit layer's disk: ``os.fsync`` does nothing here. And its ``PATH``: the fake CLIs
the in-process cores start find this interpreter first.

No unit test can observe a flush (only a power loss could), yet the journal's durable commits
flushed for real: about 40 % of the in-process core tests' time was spent waiting on the disk.
The calls are still made, in the same places (a test that counts them sees each one); tests
marked ``real_fsync`` (the group commit's, whose grouping depends on a flush taking time) keep
the real one, and the integration and fault layers, with their real daemons, flush as always.
(A ``tmp_path`` in memory, under ``/dev/shm``, is no way round it: an attachment under ``/dev``
is refused by design.)
"""

from __future__ import annotations

import os

import pytest

from tests.support.driver import fakes_path


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_fsync: this test flushes to the disk for real")
    # the members an in-process core starts inherit this process's PATH: their fake CLIs'
    # `#!/usr/bin/env python3` went through pyenv's shim (a shell script forking ~20
    # processes: ~780 of them a run, a tenth of a second for each fake started) — the
    # integration layer's daemons get the same PATH (``fakes_path``)
    os.environ["PATH"] = fakes_path(os.environ.get("PATH", ""))


def _no_flush(fd: int) -> None:
    os.fstat(fd)  # a closed or bad descriptor still fails, as fsync would


@pytest.fixture(autouse=True)
def _fsync_does_nothing(request: pytest.FixtureRequest,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("real_fsync") is None:
        monkeypatch.setattr(os, "fsync", _no_flush)
