"""Which hosts a sandboxed member may reach by default (runtimes/hosts/sandbox/network.py): its
provider's (a base URL in its env or config, else the provider's API hosts), the git remote's
host and the package registries — and the plan that cuts its network (docs/security.md)."""

from __future__ import annotations

import os
from pathlib import Path

from runtimes.hosts.sandbox.network import (
    INSIDE_SOCKET,
    REGISTRIES,
    default_hosts,
    git_remote_host,
    network_plan,
    provider_hosts,
)


def test_each_runtime_names_its_provider_hosts() -> None:
    assert provider_hosts("claude", {}, {}) == ["api.anthropic.com"]
    assert provider_hosts("claude", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8123/x"},
                          {}) == ["127.0.0.1:8123"]
    assert provider_hosts("codex", {}, {})[0] == "api.openai.com"
    gateway = {"model_provider": "gw", "model_providers": {"gw": {
        "base_url": "https://gw.example.com/v1"}}}
    assert provider_hosts("codex", {}, gateway) == ["gw.example.com:443"]
    assert provider_hosts("opencode", {}, {"model": "anthropic/claude-sonnet-4-5"}) == [
        "models.dev", "api.anthropic.com"]
    local = {"provider": {"fake": {"options": {"baseURL": "http://[::1]:9000/v1"}}}}
    assert provider_hosts("opencode", {}, local) == ["models.dev", "[::1]:9000"]


def test_the_git_remote_host_is_read_from_https_ssh_and_scp_urls(tmp_path: Path) -> None:
    for url, host in (("https://github.com/o/r.git", "github.com"),
                      ("ssh://git@GitLab.example.com:2222/o/r", "gitlab.example.com"),
                      ("git@codeberg.org:o/r.git", "codeberg.org")):
        (tmp_path / ".git").mkdir(exist_ok=True)
        (tmp_path / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {url}\n')
        assert git_remote_host(tmp_path) == host
        assert default_hosts(tmp_path) == [host, *REGISTRIES]
    assert git_remote_host(tmp_path / "nowhere") is None


def test_the_plan_cuts_the_network_and_maps_loopback_entries() -> None:
    plan = network_plan("allowlist", Path("/h/egress/x.sock"),
                        ["api.anthropic.com", "127.0.0.1:8123", "127.0.0.2:9"], python="py")
    assert plan.bwrap_args == ("--unshare-net", "--bind", "/h/egress/x.sock", INSIDE_SOCKET)
    assert plan.relay[:4] == ("py", "-I", "-S", "-c") and plan.relay[-1] == "--"
    assert "import relay" in plan.relay[4]  # from teamctl's directory, its compiled file
    assert list(plan.relay[4 + 1:-1]) == ["--socket", INSIDE_SOCKET, "--hand-over", "--map",
                                          "8123"]
    assert not plan.env  # the relay sets the proxy variables itself, with the port it bound


def test_a_member_that_can_write_the_repositorys_config_never_chooses_its_own_git_host(
        tmp_path: Path) -> None:
    """Found while closing issue 44: ``network = "allowlist"`` without ``allow_hosts`` took
    the ``origin`` of a ``.git/config`` that a sandboxed member without a worktree writes
    (the checkout itself is its workdir) — it could allowlist any host for itself at its next
    start. Such a config is not read (``from_git=False``: the registries only); and a FIFO
    planted as the config is no config, never a blocked daemon."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text('[remote "origin"]\n\turl = https://evil.example/x\n')
    assert default_hosts(tmp_path, from_git=False) == list(REGISTRIES)
    assert default_hosts(tmp_path) == ["evil.example", *REGISTRIES]  # a worktree's: read-only
    (tmp_path / ".git" / "config").unlink()
    os.mkfifo(tmp_path / ".git" / "config")
    assert git_remote_host(tmp_path) is None
