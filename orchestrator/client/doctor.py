"""``teamctl doctor``: which runtime executables are found, and their versions."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from orchestrator.runtime_table import RUNTIMES

__all__ = ["inspect_runtimes"]



def inspect_runtimes(*, timeout: float = 10.0) -> dict[str, Any]:
    rows = []
    for runtime in RUNTIMES:
        name, env_var = runtime.name, runtime.env_var
        path = shutil.which(os.environ.get(env_var) or runtime.default_executable)
        version = None
        if path:
            try:
                done = subprocess.run([path, "--version"], capture_output=True, text=True,
                                      timeout=timeout, check=False)
                version = (done.stdout or done.stderr).strip().splitlines()[0:1]
            except (OSError, subprocess.TimeoutExpired) as exc:
                version = [f"error: {exc}"]
        rows.append({"runtime": name, "env_var": env_var, "path": path,
                     "version": version[0] if version else None})
    from orchestrator import client
    from orchestrator.attachments.catalog import load_catalog
    from orchestrator.paths import Home

    catalog = load_catalog()
    home = Home.from_env()
    return {"runtimes": rows,
            "vision_catalog": {"checked": catalog.checked, "entries": catalog.entries()},
            "home": str(home.root), "daemon_running": client.ping(home)}
