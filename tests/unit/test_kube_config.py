"""``[hosts.NAME] kind = "kubernetes"``: a strict table beside the SSH host's, and what a member
in a pod may not have (the operator's login, teamctl's MCP tools)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.config import load_team_file
from orchestrator.errors import TeamFileError

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.config import TeamConfig

_HOST = ('[hosts.k8s]\nkind = "kubernetes"\nnamespace = "agents"\nimage = "ghcr.io/x/agent:1"\n'
         'secret = "claude-key"\n')
_MEMBER = '[[members]]\nname = "builder"\nruntime = "claude"\nhost = "k8s"\n'


def _load(tmp_path: Path, text: str) -> TeamConfig:
    path = tmp_path / "team.toml"
    path.write_text(text)
    return load_team_file(path)


def _refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(TeamFileError) as info:
        _load(tmp_path, text)
    return str(info.value)


def test_a_kubernetes_host_is_read_beside_ssh_hosts(tmp_path: Path) -> None:
    """A kubernetes table keeps its settings, defaults the rest, and places its member there:
    its workdir is on the pod's volume, its messaging on (as anywhere), and it is no SSH
    host."""
    team = _load(tmp_path, '[team]\nname = "w"\nlogin = "isolated"\n'
                             '[hosts.gpu]\naddress = "10.0.0.1"\n' + _HOST + _MEMBER +
                             '[[members]]\nname = "b"\nruntime = "claude"\nhost = "gpu"\n')
    [builder, other] = team.members
    name, host = team.resolved(builder).kubernetes or ("", None)
    assert name == "k8s" and host is not None
    assert (host.namespace, host.image, host.secret, host.storage, host.workdir, host.keep) == (
        "agents", "ghcr.io/x/agent:1", "claude-key", "10Gi", "/workspace", False)
    assert team.resolved(builder).ssh_host is None and team.resolved(other).kubernetes is None
    assert team.resolved(other).ssh_host is not None and list(team.hosts) == ["gpu"]
    assert team.resolved(builder).remote_workdir == "/workspace"
    assert builder.messaging is True


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("token", '"abc"', "kubernetes_hosts.k8s.token: unknown key"),
    ("namespace", '"Not_A_Name"', "kubernetes_hosts.k8s.namespace"),
    ("storage", '"lots"', "kubernetes_hosts.k8s.storage"),
    ("workdir", '"relative"', "kubernetes_hosts.k8s.workdir"),
    ("image", '"-oops"', "kubernetes_hosts.k8s.image"),
    ("pause_after", "0", "kubernetes_hosts.k8s.pause_after"),
    ("pause_after", "-5", "kubernetes_hosts.k8s.pause_after"),
    ("pause_after", "1e12", "kubernetes_hosts.k8s.pause_after"),
    ("pause_after", '"ten minutes"', "kubernetes_hosts.k8s.pause_after"),
])
def test_a_kubernetes_host_refuses_unknown_keys_and_bad_values(tmp_path: Path, key: str,
                                                               value: str,
                                                               expected: str) -> None:
    """Strict like every table: an unknown key or a value Kubernetes would refuse is named."""
    host = "".join(line + "\n" for line in _HOST.splitlines()
                   if not line.startswith(key + " "))
    text = '[team]\nname = "w"\nlogin = "isolated"\n' + host + f"{key} = {value}\n" + _MEMBER
    assert expected in _refused(tmp_path, text)


def test_an_operator_login_in_a_pod_is_refused_naming_the_secret(tmp_path: Path) -> None:
    """A subscription login copied into a pod would log the operator out: refused, with the
    two ways that work (a Secret's API key, or an SSH host)."""
    message = _refused(tmp_path, '[team]\nname = "w"\n' + _HOST + _MEMBER)
    assert "members[0].login" in message and "Secret" in message and "SSH host" in message


def test_a_sandbox_template_without_an_image_is_a_host(tmp_path: Path) -> None:
    """``template`` names an agent-sandbox SandboxTemplate: the image may then come from it
    (the table's ``image`` optional), and the member is placed on the host."""
    host = _HOST.replace('image = "ghcr.io/x/agent:1"\n', 'template = "python"\n')
    team = _load(tmp_path, '[team]\nname = "w"\nlogin = "isolated"\n' + host + _MEMBER)
    name, table = team.resolved(team.members[0]).kubernetes or ("", None)
    assert name == "k8s" and table is not None
    assert (table.template, table.image) == ("python", None)


def test_a_kubernetes_host_with_neither_image_nor_template_is_refused(tmp_path: Path) -> None:
    """No image and no template: no pod could be made; refused, naming both keys."""
    host = _HOST.replace('image = "ghcr.io/x/agent:1"\n', "")
    message = _refused(tmp_path, '[team]\nname = "w"\nlogin = "isolated"\n' + host + _MEMBER)
    assert "kubernetes_hosts.k8s" in message and "image or template is required" in message, \
        message
