"""The TLS context of teamctl's HTTP clients (orchestrator/tls.py): made once per process and
shared, yet what httpx would have built for each client — from the environment's CA bundle
when ``trust_env`` and it names one, else certifi's."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

import certifi
import pytest

from orchestrator.tls import client_context

if TYPE_CHECKING:
    from pathlib import Path


def test_the_context_is_made_once_and_shared() -> None:
    context = client_context()
    assert client_context() is context
    assert client_context(trust_env=False) is client_context(trust_env=False)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_a_ca_bundle_named_by_the_environment_is_the_one_read_unless_the_client_ignores_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As httpx reads ``SSL_CERT_FILE`` for each client it makes: a client made after it
    changed gets a context from the new file (here not a bundle: refused), one made with
    ``trust_env=False`` certifi's."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    shared = client_context()
    not_a_bundle = tmp_path / "ca.pem"
    not_a_bundle.write_text("not a certificate\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(not_a_bundle))
    with pytest.raises(ssl.SSLError):
        client_context()
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    assert client_context() is client_context()
    assert client_context().cert_store_stats()["x509_ca"] > 0
    assert client_context(trust_env=False).cert_store_stats()["x509_ca"] > 0
    monkeypatch.delenv("SSL_CERT_FILE")
    assert client_context() is shared
