"""The egress policy of a sandboxed member (orchestrator/daemon/egress/_policy.py): exact
host:port matching, IP literals, the metadata service and loopback, and the request heads the
proxy accepts (orchestrator/daemon/egress/_proxy.py ``parse_head``)."""

from __future__ import annotations

import ipaddress

import pytest

from orchestrator.daemon.egress._policy import EgressPolicy, parse_entry, parse_target
from orchestrator.daemon.egress._proxy import parse_head
from orchestrator.errors import EgressRefused

POLICY = EgressPolicy.from_strings(["api.anthropic.com", "github.com:443", "pypi.org",
                                    "127.0.0.1:8123", "10.0.0.5:8080"])


def _decide(host: str, port: int) -> tuple[bool, str]:
    target = parse_target(host, port)
    assert target is not None
    decision = POLICY.decide(target)
    return decision.allowed, decision.reason


def test_only_exact_hosts_and_ports_are_allowed() -> None:
    """A host is allowed only as listed (case and a trailing dot aside), on the listed port:
    no suffix, prefix or sub-domain of a listed name passes."""
    assert _decide("api.anthropic.com", 443) == (True, "allowed")
    assert _decide("API.Anthropic.COM.", 443) == (True, "allowed")
    assert _decide("gitHub.com.", 443) == (True, "allowed")
    for host in ("api.anthropic.com.evil.com", "evil-api.anthropic.com", "anthropic.com",
                 "x.api.anthropic.com", "api.anthropic.co", "api-anthropic.com"):
        assert _decide(host, 443) == (False, "not_listed"), host
    assert _decide("api.anthropic.com", 80) == (False, "not_listed")
    assert _decide("api.anthropic.com", 8443) == (False, "not_listed")


def test_a_wildcard_entry_allows_the_names_under_it_only() -> None:
    """``*.github.com`` is any name ending in ``.github.com`` at a label's boundary, on its
    port: not ``github.com`` itself, not ``evilgithub.com``, not an IP literal."""
    policy = EgressPolicy.from_strings(["*.github.com", "*.example.org:8443"])

    def allowed(host: str, port: int = 443) -> bool:
        target = parse_target(host, port)
        assert target is not None
        return policy.decide(target).allowed

    assert allowed("codeload.github.com") and allowed("a.b.github.com")
    assert allowed("x.example.org", 8443) and not allowed("x.example.org")
    for host in ("github.com", "evilgithub.com", "github.com.evil.com", "x.github.co"):
        assert not allowed(host), host
    assert parse_entry("*.1.2.3.4") is None and parse_entry("*.") is None


def test_an_entry_without_a_port_means_443() -> None:
    assert parse_entry("pypi.org") == parse_target("pypi.org", 443)
    assert parse_entry("pypi.org:8080") == parse_target("pypi.org", 8080)


def test_ip_literals_are_denied_unless_listed() -> None:
    """An IP literal passes only as that very entry (and port); any other is ``ip_literal``."""
    assert _decide("127.0.0.1", 8123) == (True, "allowed")
    assert _decide("127.0.0.1", 8124) == (False, "ip_literal")
    assert _decide("10.0.0.5", 8080) == (True, "allowed")
    assert _decide("1.1.1.1", 443) == (False, "ip_literal")
    assert _decide("::1", 8123) == (False, "ip_literal")
    assert _decide("[::ffff:127.0.0.1]", 8123)[0] is False


def test_the_metadata_service_is_denied_even_when_listed() -> None:
    """169.254.169.254 (and all link-local) is never reached, whatever allow_hosts says."""
    policy = EgressPolicy.from_strings(["169.254.169.254:80", "[fe80::1]:80"])
    for host in ("169.254.169.254", "fe80::1"):
        target = parse_target(host, 80)
        assert target is not None
        assert policy.decide(target).reason == "blocked_address"
        assert target.ip is not None
        assert not policy.may_connect(target, target.ip)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.8.8", "::1", "169.254.169.254",
                                     "0.0.0.0", "::", "224.0.0.1", "fe80::1",
                                     "::ffff:169.254.169.254", "::ffff:127.0.0.1", "240.0.0.1"])
def test_a_name_never_connects_to_loopback_link_local_or_reserved(address: str) -> None:
    """A listed name that resolves (by DNS rebinding, say) to one of these is not connected."""
    target = parse_target("api.anthropic.com", 443)
    assert target is not None
    assert not POLICY.may_connect(target, ipaddress.ip_address(address))


def test_a_name_may_connect_to_public_and_private_addresses() -> None:
    target = parse_target("github.com", 443)
    assert target is not None
    for address in ("140.82.112.3", "10.1.2.3", "2606:4700::1111"):
        assert POLICY.may_connect(target, ipaddress.ip_address(address))


def test_a_listed_loopback_literal_connects_to_itself_only() -> None:
    target = parse_target("127.0.0.1", 8123)
    assert target is not None
    assert POLICY.may_connect(target, ipaddress.ip_address("127.0.0.1"))
    assert not POLICY.may_connect(target, ipaddress.ip_address("127.0.0.2"))


@pytest.mark.parametrize("text", ["", "a..b", "-a.com", "a.com:0", "a.com:65536", "a.com:x",
                                  "a.com:443:1", "[::1", "a b.com", "ex\u00e4mple.com",
                                  "a" * 64 + ".com", ("a." * 127) + "com", "a.com:+443",
                                  "a.com:\u0664\u0664\u0663"])
def test_invalid_entries_are_refused(text: str) -> None:
    assert parse_entry(text) is None
    with pytest.raises(ValueError, match="not a host"):
        EgressPolicy.from_strings([text])


def test_connect_and_absolute_form_heads_are_parsed() -> None:
    connect = parse_head(b"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert connect.connect and str(connect.target) == "api.anthropic.com:443"
    plain = parse_head(b"POST http://127.0.0.1:8123/v1/messages?beta=true HTTP/1.1\r\n"
                       b"Host: 127.0.0.1:8123\r\nProxy-Connection: keep-alive\r\n"
                       b"Proxy-Authorization: Basic c2VjcmV0\r\nx-api-key: k\r\n\r\n")
    assert not plain.connect and str(plain.target) == "127.0.0.1:8123"
    assert plain.head.startswith(b"POST /v1/messages?beta=true HTTP/1.1\r\n")
    assert b"Proxy-" not in plain.head and plain.head.endswith(b"Connection: close\r\n\r\n")
    assert b"x-api-key: k" in plain.head  # the member's own request, passed on untouched
    assert str(parse_head(b"GET http://pypi.org HTTP/1.1\r\n\r\n").target) == "pypi.org:80"


@pytest.mark.parametrize(("head", "code"), [
    (b"\x16\x03\x01\x02\x00\r\n\r\n", "egress_bad_request"),  # a TLS hello to a proxy port
    (b"CONNECT api.anthropic.com HTTP/1.1\r\n\r\n", "egress_bad_request"),  # no port
    (b"CONNECT a.com:99999 HTTP/1.1\r\n\r\n", "egress_bad_request"),
    (b"GET / HTTP/1.1\r\nHost: a.com\r\n\r\n", "egress_bad_request"),  # origin form
    (b"GET https://a.com/ HTTP/1.1\r\n\r\n", "egress_bad_request"),
    (b"GET http://user:pw@a.com/ HTTP/1.1\r\n\r\n", "egress_bad_request"),
    (b"get http://a.com/ HTTP/1.1\r\n\r\n", "egress_bad_method"),
    (b"CONNECT a.com:443 SPDY/3\r\n\r\n", "egress_bad_request"),
    (b"\xff\xfe\r\n\r\n", "egress_bad_request"),
    (b"\r\n\r\n", "egress_bad_request"),
])
def test_bad_heads_are_typed_refusals(head: bytes, code: str) -> None:
    with pytest.raises(EgressRefused) as caught:
        parse_head(head)
    assert caught.value.code == code
    assert caught.value.status in (400, 405)
