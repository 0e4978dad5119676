"""The real Claude Code CLI (pinned) as a member "in a pod": the fake Kubernetes API server
(tests/support/k8s_fake.py) execs it through the member's relay, as a local process in the pod's
volume, against the fake Anthropic API. Not a cluster (docs/scaling.md, "On Kubernetes")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from runtimes.hosts.kubernetes.manifests import object_name
from tests.support.fake_anthropic import newest_user_text
from tests.support.fake_provider import fingerprint
from tests.support.k8s_fake import fake_cluster, kubeconfig
from tests.support.real_members import claude_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.e2e

NS = "agents"
KEY = "sk-ant-e2e-from-the-secret-0000"


def test_real_claude_in_a_pod_answers_with_the_secrets_key(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic, tmp_path: Path) -> None:
    """A turn of the real Claude in a pod is answered; the API key reached it from the
    namespace's Secret (the fake API saw that key's fingerprint; the team file has none) and
    is in neither the daemon's log nor the member's output; its teamctl MCP server, run in the
    pod, listed its tools to the model."""
    with fake_cluster(tmp_path / "cluster") as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": KEY}
        member = claude_member("rev", claude_bin, anthropic, host="k8s",
                               workdir=str(fake.volume(NS, f"work-{object_name('e2e', 'rev')}")
                                           / "workspace"))
        env = dict(member["env"])  # type: ignore[call-overload]
        del env["ANTHROPIC_API_KEY"]  # only the Secret has it
        member["env"] = env
        team = teamctl.write_team("e2e", [member], login="isolated", hosts={"k8s": {
            "kind": "kubernetes", "kubeconfig": str(kubeconfig(tmp_path / "kc", url)),
            "namespace": NS, "image": "ghcr.io/example/claude:1", "secret": "claude-key",
            "start_timeout": 60.0}})
        try:
            launched = teamctl.run("launch", str(team))
            assert launched.returncode == 0, launched.stderr + launched.stdout
            done = teamctl.run("send", "rev", "hello from the operator", "--wait",
                               "--timeout", "120")
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "pong: hello from the operator"
            [request] = anthropic.message_requests()
            assert newest_user_text(request["body"]) == "hello from the operator"
            assert request["headers"]["x-api-key"] == fingerprint(KEY)
            # its teamctl MCP server ran in the pod (python3 there; its tools listed)
            tools = {tool.get("name") for tool in request["body"].get("tools", [])}
            assert "mcp__teamctl__send_message" in tools, sorted(tools)
            assert ("sandboxes", NS, object_name("e2e", "rev")) in fake.objects
            assert KEY not in (teamctl.home / "logs" / "teamctl.jsonl").read_text()
            assert KEY not in done.stdout + done.stderr
            assert teamctl.run("stop", "e2e").returncode == 0
            assert not [k for k in fake.objects if k[1] == NS]
        finally:
            teamctl.shutdown()
