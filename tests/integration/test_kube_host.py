"""Members in Kubernetes pods, against the fake API server (tests/support/k8s_fake.py) driven by
the real ``kubernetes`` Python client, a fake Claude running "in the pod" (a local process in the
pod's volume, exec'd over the WebSocket channel protocol). Not a real cluster: docs/scaling.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from runtimes.hosts.kubernetes.manifests import object_name
from tests.support.driver import socket_exchange
from tests.support.k8s_fake import fake_cluster, kubeconfig
from tests.support.members import fake_member

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.k8s_fake import FakeCluster

NS = "agents"
KEY = "sk-ant-pod-test-0000"


@pytest.fixture
def cluster(tmp_path: Path, teamctl: Teamctl) -> Iterator[tuple[FakeCluster, str]]:
    """The fake API server, up until the team is stopped (``teamctl`` is torn down first)."""
    with fake_cluster(tmp_path / "cluster") as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": KEY}
        yield fake, url
        teamctl.shutdown()


def _team(teamctl: Teamctl, fake: FakeCluster, url: str, *members: str,
          local: tuple[str, ...] = (), **host: Any) -> Path:
    config = kubeconfig(teamctl.workdir / "kubeconfig", url)
    table = {k: v for k, v in {"kind": "kubernetes", "kubeconfig": str(config), "namespace": NS,
                               "image": "ghcr.io/example/agent:1", "secret": "claude-key",
                               "start_timeout": 20.0, **host}.items() if v is not None}
    return teamctl.write_team("web", [
        fake_member(name, host="k8s", restart="on-failure", backoff=[0.1, 0.5],
                    workdir=str(fake.volume(NS, f"work-{object_name('web', name)}")
                                / "workspace"))
        for name in members] + [fake_member(name, env={"ANTHROPIC_API_KEY": "sk-ant-near-0000"})
                                for name in local], hosts={"k8s": table},
        login="isolated")


def _member(teamctl: Teamctl, name: str) -> dict[str, Any]:
    members = teamctl.json("status")["teams"][0]["members"]
    return next(m for m in members if m["name"] == name)


def _runs(fake: FakeCluster) -> list[Any]:
    """The exec streams running the member's remote side (not its MCP forwarder's)."""
    return [e for e in fake.execs if e.process.args[-1] == "run"]  # type: ignore[index]


def _kinds(fake: FakeCluster) -> set[str]:
    return {resource for resource, namespace, _ in fake.objects if namespace == NS}


def test_a_member_in_a_pod_answers_and_its_sandbox_goes_at_stop(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str]) -> None:
    """Launch makes the member's Sandbox (named, labelled), its pod runs the fake Claude with
    the Secret's key, a turn is answered and in history; stop deletes the Sandbox."""
    fake, url = cluster
    launched = teamctl.run("launch", str(_team(teamctl, fake, url, "far")))
    assert launched.returncode == 0, launched.stderr
    member = _member(teamctl, "far")
    assert (member["host"], member["readiness"]) == ("k8s", "ready"), member
    name = object_name("web", "far")
    box = fake.objects[("sandboxes", NS, name)]
    assert box["metadata"]["labels"]["teamctl.dev/member"] == "far"
    assert ("pods", NS, name) in fake.objects
    done = teamctl.run("send", "far", "hello in the pod", "--wait")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fake-claude (claude-sonnet-4-5) received: hello in the pod"
    [message] = teamctl.json("history", "far")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 1)
    [running] = _runs(fake)  # the remote side; its child is the runtime, with the Secret's key
    [runtime] = Path(f"/proc/{running.process.pid}/task/{running.process.pid}/children"
                     ).read_text().split()
    assert f"ANTHROPIC_API_KEY={KEY}".encode() in Path(f"/proc/{runtime}/environ").read_bytes()
    assert KEY not in (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    assert teamctl.run("stop", "web").returncode == 0
    assert _kinds(fake) == set(), fake.objects


def test_keep_suspends_the_sandbox_at_stop_and_the_next_launch_resumes_it(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str]) -> None:
    """``keep = true``: stop suspends the Sandbox (pod gone, volume kept); launch resumes it."""
    fake, url = cluster
    team = _team(teamctl, fake, url, "far", keep=True)
    assert teamctl.run("launch", str(team)).returncode == 0
    name = object_name("web", "far")
    assert teamctl.run("stop", "web").returncode == 0
    assert fake.objects[("sandboxes", NS, name)]["spec"]["operatingMode"] == "Suspended"
    assert ("pods", NS, name) not in fake.objects
    assert teamctl.run("launch", str(team)).returncode == 0
    assert fake.objects[("sandboxes", NS, name)]["spec"]["operatingMode"] == "Running"
    done = teamctl.run("send", "far", "back again", "--wait")
    assert done.returncode == 0, done.stderr


def test_an_idle_member_falls_asleep_its_sandbox_suspended_and_its_next_message_wakes_it(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str], follow_logs: LogFollower) -> None:
    """``pause_after`` (the host's: its members' default): idle past it, the member's runtime
    stops and its Sandbox is suspended (no pod, the volume kept), status says asleep; a
    message wakes it — the receipt says "resuming", the Sandbox runs again, the same session
    goes on and the message is answered once."""
    fake, url = cluster
    team = _team(teamctl, fake, url, "far", pause_after=0.5)
    assert teamctl.run("launch", str(team)).returncode == 0
    session = _member(teamctl, "far")["session_id"]
    name = object_name("web", "far")
    follow_logs.wait_for(lambda e: e["event"] == "member_asleep")
    assert fake.objects[("sandboxes", NS, name)]["spec"]["operatingMode"] == "Suspended"
    assert ("pods", NS, name) not in fake.objects
    member = _member(teamctl, "far")
    assert (member["launch"], member["readiness"]) == ("asleep", "not_ready"), member
    done = teamctl.run("send", "far", "wake up", "--wait")
    assert done.returncode == 0, done.stderr
    assert "resuming: far was asleep on k8s since " in done.stderr
    assert done.stdout.strip().endswith("received: wake up")
    assert fake.objects[("sandboxes", NS, name)]["spec"]["operatingMode"] == "Running"
    ready = follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("woken"))
    assert ready["session_id"] == session
    [message] = teamctl.json("history", "far")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 1)
    assert _member(teamctl, "far")["restarts"] == 0


def test_a_dropped_exec_stream_mid_turn_redelivers_the_turn_once(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str], follow_logs: LogFollower,
        tmp_path: Path) -> None:
    """The exec stream cut during a turn: the member's relay ends, the member restarts, the
    turn is delivered again on the resumed session and answered once."""
    fake, url = cluster
    gate = tmp_path / "gate"
    launched = teamctl.run("launch", str(_team(teamctl, fake, url, "far")))
    assert launched.returncode == 0, launched.stderr
    sent = teamctl.run("send", "far", f"GATE {gate}\nafter the cut")
    assert sent.returncode == 0, sent.stderr
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent")
    assert fake.drop_exec() == 2  # the runtime's stream and its MCP tools'
    follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("epoch", 0) >= 2)
    gate.touch()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered")
    [message] = teamctl.json("history", "far")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 2), message
    assert len(_runs(fake)) == 1  # never two runs of the member


def test_a_pod_deleted_under_its_member_is_made_again_and_the_member_restarts(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str], follow_logs: LogFollower) -> None:
    """kubectl delete pod: the controller makes the pod again, the member starts in it and
    answers (its session on the volume)."""
    fake, url = cluster
    assert teamctl.run("launch", str(_team(teamctl, fake, url, "far"))).returncode == 0
    assert teamctl.run("send", "far", "first", "--wait").returncode == 0
    name = object_name("web", "far")
    first = fake.objects[("pods", NS, name)]["metadata"]["uid"]
    fake.delete_pod(NS, name)
    follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("epoch", 0) >= 2)
    assert fake.objects[("pods", NS, name)]["metadata"]["uid"] != first
    done = teamctl.run("send", "far", "second", "--wait")
    assert done.returncode == 0, done.stderr


def test_without_the_sandbox_crd_a_pod_and_its_claim_are_made(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """A cluster without agent-sandbox: discovery finds no group; a Pod and a PVC instead,
    both deleted at stop."""
    with fake_cluster(tmp_path / "plain", crd=False) as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": KEY}
        launched = teamctl.run("launch", str(_team(teamctl, fake, url, "far")))
        assert launched.returncode == 0, launched.stderr
        assert _kinds(fake) == {"pods", "persistentvolumeclaims"}
        done = teamctl.run("send", "far", "no crd here", "--wait")
        assert done.returncode == 0, done.stderr
        assert teamctl.run("stop", "web").returncode == 0
        assert _kinds(fake) == set()
        teamctl.shutdown()


def test_without_the_crd_an_asleep_member_keeps_its_claim_and_gets_a_new_pod(
        teamctl: Teamctl, tmp_path: Path, follow_logs: LogFollower) -> None:
    """The Pod + PVC fallback suspends an asleep member's place by deleting the pod (its claim
    kept: the working tree and the session); the next message makes the pod again and is
    answered on the same session."""
    with fake_cluster(tmp_path / "plain", crd=False) as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": KEY}
        team = _team(teamctl, fake, url, "far", pause_after=0.5)
        assert teamctl.run("launch", str(team)).returncode == 0
        session = _member(teamctl, "far")["session_id"]
        follow_logs.wait_for(lambda e: e["event"] == "member_asleep")
        assert _kinds(fake) == {"persistentvolumeclaims"}
        done = teamctl.run("send", "far", "a new pod", "--wait")
        assert done.returncode == 0, done.stderr
        assert "resuming" in done.stderr
        assert _kinds(fake) == {"pods", "persistentvolumeclaims"}
        assert _member(teamctl, "far")["session_id"] == session
        teamctl.shutdown()


def test_an_rbac_denial_is_fatal_and_names_the_fix(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str]) -> None:
    """403 on creating the Sandbox: the member is fatal (no retry loop), its error names the
    verb, the resource and the Role to grant."""
    fake, url = cluster
    fake.forbid.add(("create", "sandboxes"))
    teamctl.run("launch", str(_team(teamctl, fake, url, "far")))
    member = _member(teamctl, "far")
    assert member["launch"] == "fatal", member
    assert "refused to create sandboxes.agents.x-k8s.io" in member["error"], member
    assert "grant the Role" in member["error"]
    codes = {e.get("code") for e in teamctl.log_events() if e.get("member") == "far"}
    assert "kube_forbidden" in codes
    assert fake.requests.count(("create", "sandboxes")) == 1


def test_a_member_in_a_pod_messages_a_teammate_through_its_mcp_tools(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str], follow_logs: LogFollower) -> None:
    """teamctl's MCP tools from a pod: the member's ``teamctl mcp`` runs in the pod and
    reaches the daemon over a second exec stream of its relay (runtimes/hosts/kubernetes/mux.py) — a
    socket in the pod (0600, in a 0700 dir), the daemon's member socket here; send_message is
    queued for ``near``, delivered and answered. The MCP config names the pod's socket and
    nothing listens on a TCP port."""
    fake, url = cluster
    launched = teamctl.run("launch", str(_team(teamctl, fake, url, "far", local=("near",))))
    assert launched.returncode == 0, launched.stderr
    args = json.dumps({"to": "near", "text": "from the pod"})
    done = teamctl.run("send", "far", f"MCP send_message {args}", "--wait")
    assert done.returncode == 0, done.stderr
    [receipt] = [line for line in done.stdout.splitlines() if line.startswith("mcp")]
    assert "queued as " in receipt and "for near" in receipt, done.stdout
    message_id = receipt.split("queued as ")[1].split()[0]
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id)
    [to_near] = teamctl.json("history", "near")["messages"]
    assert (to_near["sender"], to_near["text"]) == ("far", "from the pod")
    config = json.loads((teamctl.home / "members" / "web" / "far" / "mcp.json").read_text())
    socket_home = Path(config["mcpServers"]["teamctl"]["env"]["TEAMCTL_MCP_HOME"])
    assert socket_home.parent == Path("/tmp") and socket_home.name.startswith("tc-mcp-")
    assert (socket_home.stat().st_mode & 0o777, (socket_home / "teamctl.sock").stat().st_mode
            & 0o777) == (0o700, 0o600)


def test_the_pods_socket_carries_member_calls_only_never_the_operators(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str]) -> None:
    """What a prompt-injected process in the pod can reach through its MCP socket: the
    daemon's member socket of that member — an operator method (``stop``) is no method there,
    and a member call without its current token does nothing (never the control socket)."""
    fake, url = cluster
    assert teamctl.run("launch", str(_team(teamctl, fake, url, "far",
                                           local=("near",)))).returncode == 0
    config = json.loads((teamctl.home / "members" / "web" / "far" / "mcp.json").read_text())
    pod_socket = Path(config["mcpServers"]["teamctl"]["env"]["TEAMCTL_MCP_HOME"]) / \
        "teamctl.sock"  # in the fake, the pod's /tmp is this machine's
    stop = json.loads(socket_exchange(pod_socket, b'{"jsonrpc": "2.0", "id": 1, '
                                                  b'"method": "stop", "params": {}}\n'))
    assert stop["error"]["code"] == -32601, stop  # no such method on a member socket
    forged = json.loads(socket_exchange(pod_socket, json.dumps({
        "jsonrpc": "2.0", "id": 2, "method": "member.send_message",
        "params": {"token": "not-the-token-of-far-0000", "to": "near", "text": "x"}}).encode()
        + b"\n"))
    assert forged["error"]["data"]["code"] == "messaging_token_unknown", forged
    assert [m["name"] for m in teamctl.json("status")["teams"][0]["members"]] == ["far", "near"]
    assert teamctl.json("history", "near")["messages"] == []


def _seed_template(teamctl: Teamctl, url: str) -> dict[str, Any]:
    """The SandboxTemplate fixture (tests/data/k8s) created in the fake cluster by the real
    client, as a cluster admin's ``kubectl apply`` would."""
    from kubernetes import client, config

    template: dict[str, Any] = yaml.safe_load(
        (Path(__file__).resolve().parents[1] / "data" / "k8s" / "sandboxtemplate_example.yaml"
         ).read_text())
    api = config.new_client_from_config(str(kubeconfig(teamctl.workdir / "admin", url)))
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "extensions.agents.x-k8s.io", "v1beta1", NS, "sandboxtemplates", template)
    return template


def test_a_member_from_a_sandbox_template_answers_and_its_pod_has_the_templates_settings(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str]) -> None:
    """``template = "gpu-agent"`` and no image: the member's Sandbox is rendered from the
    SandboxTemplate it reads (its node selector, its agent container's resources and image;
    teamctl's sleeper, volume and Secret over them), its pod runs the member, a turn is
    answered."""
    fake, url = cluster
    theirs = _seed_template(teamctl, url)["spec"]["podTemplate"]["spec"]
    launched = teamctl.run("launch", str(_team(teamctl, fake, url, "far", image=None,
                                               template="gpu-agent")))
    assert launched.returncode == 0, launched.stderr
    assert ("get", "sandboxtemplates") in fake.requests
    spec = fake.objects[("sandboxes", NS, object_name("web", "far"))]["spec"]["podTemplate"][
        "spec"]
    assert spec["nodeSelector"] == {"pool": "agents"}
    [agent] = [c for c in spec["containers"] if c["name"] == "agent"]
    assert agent["resources"] == theirs["containers"][1]["resources"]
    assert agent["image"] == "ghcr.io/example/template-agent:2"
    assert agent["envFrom"][-1] == {"secretRef": {"name": "claude-key"}}
    done = teamctl.run("send", "far", "hello from a template", "--wait")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fake-claude (claude-sonnet-4-5) received: hello from a template"


@pytest.mark.parametrize(("template", "forbid", "code", "says"), [
    ("no-such-template", None, "kube_template_missing", "kubectl get sandboxtemplates -n agents"),
    ("gpu-agent", ("get", "sandboxtemplates"), "kube_forbidden",
     "refused to get sandboxtemplates.extensions.agents.x-k8s.io"),
])
def test_a_template_that_cannot_be_read_is_fatal_and_names_the_fix(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str], template: str,
        forbid: tuple[str, str] | None, code: str, says: str) -> None:
    """A SandboxTemplate that is not there, or that RBAC will not let teamctl read: the member
    is ``fatal`` (no retry loop) with the fix named, in ``teamctl status`` and the log; no
    Sandbox is made."""
    fake, url = cluster
    _seed_template(teamctl, url)
    if forbid is not None:
        fake.forbid.add(forbid)
    teamctl.run("launch", str(_team(teamctl, fake, url, "far", template=template)))
    member = _member(teamctl, "far")
    assert member["launch"] == "fatal", member
    assert says in member["error"], member
    assert code in {e.get("code") for e in teamctl.log_events() if e.get("member") == "far"}
    assert "sandboxes" not in _kinds(fake)
    assert fake.requests.count(("get", "sandboxtemplates")) == 1


def test_a_template_without_the_sandbox_crd_is_refused_at_start(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """No agent-sandbox in the cluster (the Pod + PVC fallback) means no SandboxTemplate:
    ``template`` is refused at start (``kube_template_unsupported``, fatal), nothing made."""
    with fake_cluster(tmp_path / "plain", crd=False) as (fake, url):
        teamctl.run("launch", str(_team(teamctl, fake, url, "far", template="gpu-agent")))
        member = _member(teamctl, "far")
        assert member["launch"] == "fatal", member
        assert "needs agent-sandbox" in member["error"], member
        assert "kube_template_unsupported" in {e.get("code") for e in teamctl.log_events()
                                               if e.get("member") == "far"}
        assert _kinds(fake) == set()
        teamctl.shutdown()
