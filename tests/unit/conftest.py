"""The unit layer's disk: each test's ``tmp_path`` is in memory (``/dev/shm``) when there is one.

The in-process core tests journal to SQLite under ``tmp_path``, and every durable commit
flushes: on the machine's disk, shared with the integration tests' daemons, about half of their
time was waiting for those flushes. In memory the same calls are made (``os.fsync``, SQLite's
own syncs) and return at once; no unit test can tell a flushed write from one in memory (only a
power loss could). The integration and fault layers keep the disk. Without a ``/dev/shm`` (or
with one too small) ``tmp_path`` is pytest's own.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

_MEMORY = Path("/dev/shm")
_ENOUGH = 1 << 30  # bytes free for the layer's journals, images and artifacts


@pytest.fixture(scope="session")
def _memory_root() -> Iterator[Path | None]:
    try:
        usable = _MEMORY.is_dir() and shutil.disk_usage(_MEMORY).free >= _ENOUGH
    except OSError:
        usable = False
    if not usable:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="teamctl-unit-", dir=_MEMORY))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, _memory_root: Path | None,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh private directory for the test (pytest's ``tmp_path``, in memory)."""
    name = re.sub(r"[\W]", "_", request.node.name)[:30]
    if _memory_root is None:
        yield tmp_path_factory.mktemp(name, numbered=True)
        return
    path = Path(tempfile.mkdtemp(prefix=name + "-", dir=_memory_root))
    os.chmod(path, 0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
