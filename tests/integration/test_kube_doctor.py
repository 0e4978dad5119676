"""``teamctl doctor --host NAME`` for a Kubernetes host, against the fake API server
(tests/k8s_fake.py, the real ``kubernetes`` client); and its ``--json`` stdout kept a document."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:

    from tests.conftest import Teamctl

NS = "agents"


def test_doctor_host_json_stdout_stays_json_when_a_warning_is_logged(teamctl: Teamctl) -> None:
    """``doctor --host X --json`` prints one JSON document on stdout even when the CLI logs
    a warning (here: its ssh control dir refused, under a runtime dir that does not exist):
    the CLI's log goes to stderr."""
    done = teamctl.run("doctor", "--host", "nobody@nosuchhost.invalid", "--json",
                       extra_env={"XDG_RUNTIME_DIR": f"/tmp/tc-none-{uuid.uuid4().hex[:8]}"})
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert (report["reachable"], report["error"]["code"]) == (False, "host_unreachable")
    assert "ssh_control_dir_refused" in done.stderr
