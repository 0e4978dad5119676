"""Members in Kubernetes pods after a daemon crash (``kill -9``), against the fake API server
(tests/support/k8s_fake.py): re-attached, never duplicated; objects no wanted member owns let go of
at the next start; another teamctl home's objects never touched (docs/scaling.md)."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

import pytest

from runtimes.hosts.kubernetes.manifests import (
    LABEL_HOME,
    LABEL_MEMBER,
    LABEL_OWNER,
    LABEL_TEAM,
    object_name,
)
from tests.support.k8s_fake import fake_cluster, kubeconfig
from tests.support.members import fake_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.k8s_fake import FakeCluster

NS = "agents"


@pytest.fixture
def cluster(tmp_path: Path, teamctl: Teamctl) -> Iterator[tuple[FakeCluster, str]]:
    with fake_cluster(tmp_path / "cluster") as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": "sk-ant-orphan-0000"}
        yield fake, url
        teamctl.shutdown()


def _team(teamctl: Teamctl, fake: FakeCluster, url: str, **host: Any) -> Path:
    table = {"kind": "kubernetes", "namespace": NS, "image": "ghcr.io/example/agent:1",
             "kubeconfig": str(kubeconfig(teamctl.workdir / "kubeconfig", url)),
             "secret": "claude-key", "start_timeout": 20.0, **host}
    workdir = fake.volume(NS, f"work-{object_name('web', 'far')}") / "workspace"
    return teamctl.write_team("web", [fake_member("far", host="k8s", restart="on-failure",
                                                  backoff=[0.1, 0.5], workdir=str(workdir))],
                              hosts={"k8s": table}, login="isolated")


def _crash(teamctl: Teamctl) -> None:
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)


def _runs(fake: FakeCluster) -> list[Any]:
    return [e for e in fake.execs if e.process.args[-1] == "run"]  # type: ignore[index]


def test_after_a_daemon_crash_the_member_reattaches_to_its_sandbox_and_stop_deletes_it(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str]) -> None:
    """kill -9 of the daemon, then launch: the member is back in the same Sandbox and pod
    (one create ever, the pod's uid unchanged, one run of it), labelled with this home's id;
    ``teamctl stop`` then deletes the Sandbox."""
    fake, url = cluster
    team = _team(teamctl, fake, url)
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "far", "before", "--wait").returncode == 0
    name = object_name("web", "far")
    pod = fake.objects[("pods", NS, name)]["metadata"]["uid"]
    home = (teamctl.home / "home-id").read_text().strip()
    assert fake.objects[("sandboxes", NS, name)]["metadata"]["labels"][LABEL_HOME] == home
    _crash(teamctl)
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stderr
    after = teamctl.run("send", "far", "after the crash", "--wait")
    assert after.returncode == 0, after.stderr
    assert fake.requests.count(("create", "sandboxes")) == 1
    assert fake.objects[("pods", NS, name)]["metadata"]["uid"] == pod
    assert len(_runs(fake)) == 1
    assert teamctl.run("stop", "web").returncode == 0
    assert [key for key in fake.objects if key[1] == NS] == []


def _foreign(fake: FakeCluster, name: str) -> None:
    """A Sandbox another operator's teamctl made in the same namespace (same team and member)."""
    fake.objects[("sandboxes", NS, name)] = {
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
        "metadata": {"name": name, "namespace": NS, "labels": {
            LABEL_OWNER: "teamctl", LABEL_HOME: "0123456789abcdef", LABEL_TEAM: "web",
            LABEL_MEMBER: "far"}, "annotations": {LABEL_TEAM: "web", LABEL_MEMBER: "far"}},
        "spec": {"operatingMode": "Running"}}


@pytest.mark.parametrize("keep", [False, True])
def test_objects_no_wanted_member_owns_are_let_go_at_the_next_daemon_start(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str], follow_logs: LogFollower,
        keep: bool) -> None:
    """A stop whose delete RBAC refused leaves the Sandbox; after a kill -9 the next daemon
    start (another team's launch) finds it by this home's label and deletes it (``keep``:
    suspends it); another home's Sandbox of the same team and member is never touched."""
    fake, url = cluster
    assert teamctl.run("launch", str(_team(teamctl, fake, url, keep=keep))).returncode == 0
    name = object_name("web", "far")
    _foreign(fake, "tc-someone-elses-far")
    fake.forbid.update({("delete", "sandboxes"), ("patch", "sandboxes")})
    assert teamctl.run("stop", "web").returncode == 0
    assert ("sandboxes", NS, name) in fake.objects  # the stop could not let go of it
    _crash(teamctl)
    fake.forbid.clear()
    other = teamctl.write_team("ops", [fake_member("near")])
    assert teamctl.run("launch", str(other)).returncode == 0
    follow_logs.wait_for(lambda e: e["event"] == "kube_orphans_swept" and e["reaped"] == 1)
    if keep:
        assert fake.objects[("sandboxes", NS, name)]["spec"]["operatingMode"] == "Suspended"
        assert ("pods", NS, name) not in fake.objects
    else:
        assert ("sandboxes", NS, name) not in fake.objects
    assert fake.objects[("sandboxes", NS, "tc-someone-elses-far")]["spec"][
        "operatingMode"] == "Running"


def test_without_the_crd_an_orphaned_pod_and_claim_are_deleted_at_the_next_daemon_start(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path) -> None:
    """The Pod + PVC fallback: a stop whose pod delete RBAC refused leaves both; after a
    kill -9 the next daemon start lists them by this home's label and deletes both."""
    with fake_cluster(tmp_path / "plain", crd=False) as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": "sk-ant-orphan-0000"}
        assert teamctl.run("launch", str(_team(teamctl, fake, url))).returncode == 0
        fake.forbid.add(("delete", "pods"))
        assert teamctl.run("stop", "web").returncode == 0
        assert {r for r, ns, _ in fake.objects if ns == NS} == {"pods",
                                                                 "persistentvolumeclaims"}
        _crash(teamctl)
        fake.forbid.clear()
        assert teamctl.run("launch", str(teamctl.write_team("ops", [fake_member("near")]))
                           ).returncode == 0
        follow_logs.wait_for(lambda e: e["event"] == "kube_orphans_swept" and e["reaped"] == 1)
        assert [key for key in fake.objects if key[1] == NS] == []
        teamctl.shutdown()


def test_a_name_another_home_made_is_refused_never_used(
        teamctl: Teamctl, cluster: tuple[FakeCluster, str]) -> None:
    """The member's Sandbox name already made by another teamctl home (its label): the
    member is fatal (``kube_name_taken``, the fix named) and that Sandbox is left as it was."""
    fake, url = cluster
    name = object_name("web", "far")
    _foreign(fake, name)
    teamctl.run("launch", str(_team(teamctl, fake, url)))
    [member] = teamctl.json("status")["teams"][0]["members"]
    assert member["launch"] == "fatal", member
    assert "belongs to another teamctl home" in member["error"]
    assert fake.objects[("sandboxes", NS, name)]["metadata"]["labels"][LABEL_HOME] == \
        "0123456789abcdef"
    assert teamctl.run("stop", "web").returncode == 0
    assert ("sandboxes", NS, name) in fake.objects


def test_the_sweep_with_the_cluster_gone_is_logged_and_the_daemon_goes_on(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path) -> None:
    """After a kill -9, the next daemon start cannot reach the API server: the sweep logs
    ``kube_orphans_unlisted`` (typed, retried at the next start) and the daemon serves on."""
    with fake_cluster(tmp_path / "gone") as (fake, url):
        fake.secrets[(NS, "claude-key")] = {"ANTHROPIC_API_KEY": "sk-ant-orphan-0000"}
        assert teamctl.run("launch", str(_team(teamctl, fake, url))).returncode == 0
        _crash(teamctl)
    other = teamctl.write_team("ops", [fake_member("near")])
    assert teamctl.run("launch", str(other), "--no-wait").returncode == 0
    event = follow_logs.wait_for(lambda e: e["event"] == "kube_orphans_unlisted")
    assert event["code"] == "kube_unreachable"
    done = teamctl.run("send", "near", "still serving", "--team", "ops", "--wait")
    assert done.returncode == 0, done.stderr
