"""A sandboxed member's network (``network = "allowlist" | "off"``, docs/security.md "The
network boundary"): a real daemon, the real bubblewrap, a fake Claude member whose ``TRY`` steps
(fixtures/escape.py) reach out from inside its empty network namespace. Two local HTTP servers
stand for the provider's API (allowed) and anything else (not)."""

from __future__ import annotations

import http.server
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tests.conftest import REPO, fake_member

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Teamctl


class _Api(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"api on {self.server.server_address[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@contextmanager
def _servers() -> Iterator[tuple[int, int]]:
    """Two local HTTP servers: (the fake API's port, another's)."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield servers[0].server_address[1], servers[1].server_address[1]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def _launch(teamctl: Teamctl, tmp_path: Path, **extra: object) -> None:
    (tmp_path / "a").mkdir()
    path = teamctl.write_team("web", [
        fake_member("a", workdir=str(tmp_path / "a"), sandbox="process", permissions="full",
                    sandbox_ro=[str(REPO / "fixtures")], **extra)])
    done = teamctl.run("launch", str(path))
    assert done.returncode == 0, done.stderr


def _tries(teamctl: Teamctl, *steps: str) -> list[str]:
    done = teamctl.run("send", "a", "\n".join(f"TRY {step}" for step in steps), "--wait")
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("try ")]


def test_an_allowlisted_member_reaches_its_api_and_nothing_else(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """With ``allow_hosts = ["127.0.0.1:API"]``: inside the sandbox the API answers at its own
    URL (the relay's mapped port) and through the proxy port; another local port is refused
    directly (nothing listens in the sandbox's namespace), the outside world is unreachable,
    and through the proxy that port and the metadata service are denied (403) — each denial an
    ``egress_denied`` event with member, host and port."""
    with _servers() as (api, other):
        _launch(teamctl, tmp_path, network="allowlist", allow_hosts=[f"127.0.0.1:{api}"])
        lines = _tries(teamctl, f"http http://127.0.0.1:{api}/v1/models",
                       f"proxy 127.0.0.1:{api}", f"tcp 127.0.0.1:{other}", "tcp 1.1.1.1:443",
                       f"proxy 127.0.0.1:{other}", "proxy 169.254.169.254:80",
                       f"http http://127.0.0.1:{other}/")
        assert lines == [
            f"try http http://127.0.0.1:{api}/v1/models: ok 200 api on {api}",
            f"try proxy 127.0.0.1:{api}: ok HTTP/1.1 200 Connection established",
            f"try tcp 127.0.0.1:{other}: refused ECONNREFUSED",
            "try tcp 1.1.1.1:443: refused ENETUNREACH",
            f"try proxy 127.0.0.1:{other}: ok HTTP/1.1 403 Forbidden",
            "try proxy 169.254.169.254:80: ok HTTP/1.1 403 Forbidden",
            f"try http http://127.0.0.1:{other}/: refused ECONNREFUSED"]
    denied = [(e["member"], e["host"], e["port"]) for e in teamctl.log_events()
              if e.get("event") == "egress_denied"]
    assert denied == [("a", "127.0.0.1", other), ("a", "169.254.169.254", 80)]
    shown = teamctl.run("logs")
    assert shown.returncode == 0 and "egress_denied" in shown.stdout


def test_status_shows_a_members_network_and_its_proxys_counts(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``teamctl status`` shows a sandboxed member's network mode and how many connections
    its egress proxy allowed and denied (``egress`` in ``--json``; null without a proxy)."""
    with _servers() as (api, other):
        _launch(teamctl, tmp_path, network="allowlist", allow_hosts=[f"127.0.0.1:{api}"])
        _tries(teamctl, f"proxy 127.0.0.1:{api}", f"proxy 127.0.0.1:{api}",
               f"proxy 127.0.0.1:{other}")
    member = teamctl.json("status")["teams"][0]["members"][0]
    assert member["sandbox"] == "process, network allowlist"
    assert member["egress"] == {"allowed": 2, "denied": 1}
    shown = teamctl.run("status")
    assert "a: sandbox process, network allowlist (egress: 2 allowed, 1 denied)" \
        in shown.stdout, shown.stdout


def test_a_member_with_network_off_reaches_only_its_provider(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``network = "off"``: the provider (its ``ANTHROPIC_BASE_URL``) and nothing else — not
    even the package registries an allowlist has by default."""
    with _servers() as (api, other):
        _launch(teamctl, tmp_path, network="off",
                env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{api}"})
        lines = _tries(teamctl, f"http http://127.0.0.1:{api}/", "proxy pypi.org:443",
                       f"proxy 127.0.0.1:{other}")
        assert lines == [f"try http http://127.0.0.1:{api}/: ok 200 api on {api}",
                         "try proxy pypi.org:443: ok HTTP/1.1 403 Forbidden",
                         f"try proxy 127.0.0.1:{other}: ok HTTP/1.1 403 Forbidden"]
    # a's proxy (its socket in the home, or a short private dir where that path is too long)
    proxies = [Path(e["socket"]) for e in teamctl.log_events()
               if e["event"] == "egress_proxy_serving"]
    assert len(proxies) == 1 and proxies[0].exists(), proxies
    stopped = teamctl.run("stop", "web")
    assert stopped.returncode == 0, stopped.stderr
    assert not proxies[0].exists()  # the proxy closed with it
