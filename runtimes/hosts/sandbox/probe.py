"""Whether bubblewrap works where it will run: a real ``true`` inside the namespaces a sandbox
uses, within a deadline. Standard library only (any python3 >= 3.8): the daemon imports it for
this machine (``runtimes/hosts/sandbox/host.py``) and an SSH host runs this file's source as
``python3 -c SOURCE BWRAP`` (``SshHost.probe_sandbox``), which prints ``probe``'s answer as one
JSON line — so a host is judged by the same test as this machine."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PROBE_TIMEOUT", "SandboxSupport", "probe"]

PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class SandboxSupport:
    """What ``probe`` found: ``ok`` with bubblewrap's ``version`` and ``path``, or ``reason``
    (what is wrong, for the refusal and ``teamctl doctor``)."""

    ok: bool
    path: str | None = None
    version: str | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def probe(bwrap: str, *, timeout: float = PROBE_TIMEOUT) -> SandboxSupport:
    """Whether ``bwrap`` is there and makes the namespaces a sandbox uses (a real run of
    ``true`` inside them within ``timeout`` seconds). Blocking."""
    path = shutil.which(bwrap)
    if path is None:
        return SandboxSupport(False, reason=f"bubblewrap ({bwrap}) is not installed or not on "
                                            "PATH")
    run = [path, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(run, capture_output=True, timeout=timeout, check=False)
        version = subprocess.run([path, "--version"], capture_output=True, timeout=timeout,
                                 check=False).stdout.decode(errors="replace").strip()
    except subprocess.TimeoutExpired:
        return SandboxSupport(False, path, reason=f"bubblewrap did not answer within "
                                                  f"{timeout:g}s")
    except OSError as exc:
        return SandboxSupport(False, path, reason=f"cannot run {path}: {exc.strerror}")
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return SandboxSupport(False, path, version or None,
                              f"bubblewrap cannot create its namespaces here "
                              f"({tail[0][:200]}; user namespaces may be disabled)")
    return SandboxSupport(True, path, version or None)


if __name__ == "__main__":  # on a host: python3 -c SOURCE BWRAP
    sys.stdout.write(json.dumps(probe(sys.argv[1]).as_dict()) + "\n")
