"""What a check reads of a source file, kept on disk: ``facts(path, read)`` is
``read(source, filename)`` — a JSON value — from ``.cache/source-facts/`` when that file's bytes
and the module that defines ``read`` are the ones it was read from, else read and stored.

The checks that read the tree with ``ast`` (the import graph, the layout, the hints) parsed
~550 modules, ~6 ms each, in every test worker, at every run — the largest part of their cost.
The key is the SHA-256 of the file's bytes, of the reader's name and of its module's source: a
file edited, or a reader changed, is a new key, read again. A cache that cannot be read or
written is no cache: the file is read."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "source-facts"


@functools.cache
def _reader_key(read: Callable[[bytes, str], Any]) -> bytes:
    module = Path(inspect.getfile(read)).read_bytes()
    return hashlib.sha256(module + read.__qualname__.encode()).digest()


def facts(path: Path, read: Callable[[bytes, str], Any]) -> Any:
    """``read(path's bytes, str(path))``, from the cache when it holds that reading."""
    source = path.read_bytes()
    entry = CACHE / f"{hashlib.sha256(_reader_key(read) + source).hexdigest()}.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(entry.read_bytes())
    found = read(source, str(path))
    with contextlib.suppress(OSError):
        CACHE.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=CACHE, prefix=".facts-")
        with os.fdopen(fd, "w") as out:
            json.dump(found, out)
        os.replace(temp, entry)  # whole or absent: another worker may read it at once
    return found
