"""A sandboxed member's network (``network = "allowlist" | "off"``, docs/security.md "The
network boundary"): a real daemon, the real bubblewrap, a fake Claude member whose ``TRY`` steps
(fixtures/escape.py) reach out from inside its empty network namespace. Two local HTTP servers
stand for the provider's API (allowed) and anything else (not)."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.driver import REPO
from tests.support.http_servers import api_servers
from tests.support.members import fake_member

if TYPE_CHECKING:

    from tests.support.driver import Teamctl


def _launch(teamctl: Teamctl, tmp_path: Path, **extra: object) -> None:
    (tmp_path / "a").mkdir()
    path = teamctl.write_team("web", [
        fake_member("a", workdir=str(tmp_path / "a"), sandbox="process", permissions="full",
                    sandbox_ro=[str(REPO / "fixtures")], **extra)])
    done = teamctl.run("launch", str(path))
    assert done.returncode == 0, done.stderr


def _tree(pid: int) -> list[str]:
    """The command lines of ``pid`` and every process under it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        with suppress(OSError):
            found.append(Path(f"/proc/{current}/cmdline").read_bytes()
                          .replace(b"\0", b" ").decode(errors="replace"))
    return found


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
    with api_servers() as (api, other):
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
    # the relay handed its listeners (the proxy port, the API's) to the daemon and became
    # the runtime: no relay process stays in the member's tree
    taken = [(e["member"], e["ports"][1:]) for e in teamctl.log_events()
             if e.get("event") == "egress_listeners_taken"]
    assert taken == [("a", [api])]
    [pid] = teamctl.member_pids()
    inside = [argv for argv in _tree(pid) if not argv.split(" ", 1)[0].endswith("bwrap")]
    assert inside and [argv for argv in inside if "import relay" in argv] == [], inside
    shown = teamctl.run("logs")
    assert shown.returncode == 0 and "egress_denied" in shown.stdout


def test_status_shows_a_members_network_and_its_proxys_counts(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``teamctl status`` shows a sandboxed member's network mode and how many connections
    its egress proxy allowed and denied (``egress`` in ``--json``; null without a proxy)."""
    with api_servers() as (api, other):
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
    with api_servers() as (api, other):
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
