"""The teamctl home's id on its Kubernetes objects (orchestrator/daemon/members/_orphans.py,
runtimes/hosts/kubernetes/manifests.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.daemon.members._orphans import home_id
from runtimes.hosts.kubernetes.manifests import LABEL_HOME, PodPlan, pod, pvc, sandbox

if TYPE_CHECKING:
    from pathlib import Path


def test_a_homes_id_is_made_once_private_and_random(tmp_path: Path) -> None:
    """Made at the first call (0600), the same at every later one; two homes differ."""
    (tmp_path / "a").mkdir()
    first = home_id(tmp_path / "a")
    assert (tmp_path / "a" / "home-id").stat().st_mode & 0o777 == 0o600
    assert home_id(tmp_path / "a") == first and len(first) == 16
    (tmp_path / "b").mkdir()
    assert home_id(tmp_path / "b") != first


def test_every_object_carries_the_homes_label_when_it_has_one() -> None:
    """The Sandbox, its pod template and claim template, the fallback's Pod and PVC."""
    plan = PodPlan(team="web", member="far", namespace="agents", image="img:1",
                   home="0123456789abcdef")
    box = sandbox(plan)
    labelled = [box["metadata"], box["spec"]["podTemplate"]["metadata"],
                box["spec"]["volumeClaimTemplates"][0]["metadata"], pod(plan)["metadata"],
                pvc(plan)["metadata"]]
    assert {m["labels"][LABEL_HOME] for m in labelled} == {"0123456789abcdef"}
    assert LABEL_HOME not in PodPlan(team="web", member="far", namespace="agents",
                                     image="img:1").labels
