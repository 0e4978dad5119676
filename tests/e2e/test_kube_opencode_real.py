"""The real OpenCode (pinned) as a member "in a pod": the fake Kubernetes API server
(tests/support/k8s_fake.py) execs its ``serve`` through the member's relay, as a local process in
the pod's volume, and the daemon reaches its server only through the port-forward
(runtimes/hosts/kubernetes/forward.py), against the fake chat API. Not a cluster (docs/scaling.md,
"On
Kubernetes")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from runtimes.hosts.kubernetes.manifests import object_name
from tests.support.fake_chat import newest_user_text
from tests.support.k8s_fake import fake_cluster, kubeconfig
from tests.support.real_members import opencode_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_chat import FakeChat

pytestmark = pytest.mark.e2e

NS = "agents"


def test_real_opencode_in_a_pod_answers_through_the_port_forward(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat, tmp_path: Path) -> None:
    """A turn of the real OpenCode in a pod is answered — its server reached only through a
    ``pods/portforward`` stream per connection (its event stream one of them); with ``keep``
    stop suspends the Sandbox and the relaunch resumes the same session on its volume."""
    with fake_cluster(tmp_path / "cluster") as (fake, url):
        member = opencode_member("des", opencode_bin, chat, model="fake/text-model",
                                 host="k8s", workdir=str(fake.volume(
                                     NS, f"work-{object_name('e2e', 'des')}") / "workspace"))
        team = teamctl.write_team("e2e", [member], login="isolated", hosts={"k8s": {
            "kind": "kubernetes", "kubeconfig": str(kubeconfig(tmp_path / "kc", url)),
            "namespace": NS, "image": "ghcr.io/example/opencode:1", "start_timeout": 60.0,
            "keep": True}})
        try:
            launched = teamctl.run("launch", str(team), timeout=180)
            assert launched.returncode == 0, launched.stderr + launched.stdout
            session = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
            done = teamctl.run("send", "des", "hello from the operator", "--wait",
                               "--timeout", "120")
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "pong: hello from the operator"
            assert newest_user_text(chat.chat_requests()[-1]["body"]) == \
                "hello from the operator"
            assert ("create", "pods/portforward") in fake.requests
            assert teamctl.run("stop", "e2e").returncode == 0
            name = object_name("e2e", "des")
            assert fake.objects[("sandboxes", NS, name)]["spec"]["operatingMode"] == "Suspended"
            assert ("pods", NS, name) not in fake.objects
            assert teamctl.run("launch", str(team), timeout=180).returncode == 0
            assert teamctl.json("status")["teams"][0]["members"][0]["session_id"] == session
            again = teamctl.run("send", "des", "again", "--wait", "--timeout", "120")
            assert again.returncode == 0 and again.stdout.strip() == "pong: again", again.stderr
            assert teamctl.run("stop", "e2e").returncode == 0
        finally:
            teamctl.shutdown()
