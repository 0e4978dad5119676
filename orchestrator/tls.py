"""The TLS context teamctl's HTTP clients verify servers with, made once per process.

httpx builds a new ``ssl.SSLContext`` for every client it is not given one — the CA bundle
read and parsed each time, ~25 ms of CPU — and the daemon makes clients repeatedly (a forge
client per team and per ``doctor``, an ntfy client per notifier). ``client_context`` is what
httpx would build (its own ``create_ssl_context``, with the same ``trust_env``), kept per
``trust_env`` and per value of the variables httpx reads (``SSL_CERT_FILE``,
``SSL_CERT_DIR``): a client made after one of them changed gets a context for the new value,
as before. A CA bundle rewritten on disk is read again at the next start of the process.

A context is shared by clients that speak HTTP/1.1 only (httpx's default, and every client of
teamctl's): httpcore sets the context's ALPN protocols on each connection, the same value for
all of them.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import ssl

__all__ = ["client_context"]

_READ = ("SSL_CERT_FILE", "SSL_CERT_DIR")  # what httpx reads from the environment


def client_context(*, trust_env: bool = True) -> ssl.SSLContext:
    """The context ``httpx.AsyncClient(trust_env=trust_env)`` would verify servers with."""
    read = tuple(os.environ.get(name) for name in _READ) if trust_env else ()
    return _made(trust_env, read)


@functools.cache
def _made(trust_env: bool, _read: tuple[str | None, ...]) -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=trust_env)
