"""Issue 25 figures (one fake claude member, a real daemon, the live view flooded over TCP):
BENCH_FLOOD_CONNECTIONS (default 450) half-sent requests on the live view's port, the daemon's
soft descriptor limit lowered to BENCH_FLOOD_NOFILE (default 300) — the flood that locked the
operator out for 90 s and wrote 214 MB into daemon.out before issue 25. Twice: with the default
connection cap, and with the cap lifted (so the descriptor reserve decides). Printed:
- how many connections the port holds before it refuses new ones (503 and close);
- `teamctl status` during the flood: its answer time (it must answer);
- the peak size of daemon.out (and its rotation) while the flood lasts.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member. The flood is raw TCP on the live view's port.
"""

from __future__ import annotations

import os
import resource
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from _harness import REPO, figure, home, team_file, teamctl

from tests.support.http_servers import half_sent

if TYPE_CHECKING:
    import socket

FLOOD = int(os.environ.get("BENCH_FLOOD_CONNECTIONS", "450"))
NOFILE = int(os.environ.get("BENCH_FLOOD_NOFILE", "300"))


def still_held(socks: list[socket.socket]) -> int:
    """How many the server has not closed, once no more closes come for half a second."""
    open_ = set(socks)
    while open_:
        readable, _, _ = select.select(list(open_), [], [], 0.5)
        if not readable:
            break
        open_ -= set(readable)
    return len(open_)


def out_size(logs: Path) -> int:
    return sum(p.stat().st_size for p in logs.glob("daemon.out*"))


def scenario(label: str, settings: dict[str, str]) -> None:
    with home() as env:
        env.update(settings, TEAMCTL_UI_HEADER_TIMEOUT="300")
        teamctl(env, "launch", str(team_file(Path(env["TEAMCTL_BENCH_DIR"]), "flood", 1)))
        port = int(teamctl(env, "ui").strip().split(":")[2].split("/")[0])
        daemon = int((Path(env["TEAMCTL_HOME"]) / "daemon.pid").read_text())
        logs = Path(env["TEAMCTL_HOME"]) / "logs"
        resource.prlimit(daemon, resource.RLIMIT_NOFILE,
                         (NOFILE, resource.prlimit(daemon, resource.RLIMIT_NOFILE)[1]))
        peak, stop = [out_size(logs)], threading.Event()

        def sample() -> None:
            while not stop.wait(0.05):
                peak[0] = max(peak[0], out_size(logs))

        sampler = threading.Thread(target=sample)
        sampler.start()
        socks = [s for s in (half_sent(port) for _ in range(FLOOD)) if s is not None]
        try:
            held = still_held(socks)
            start = time.perf_counter()
            status = subprocess.run([sys.executable, "-m", "orchestrator", "status"], env=env,
                                    capture_output=True, text=True, timeout=120, check=False)
            status_ms = (time.perf_counter() - start) * 1000
        finally:
            for sock in socks:
                sock.close()
            stop.set()
            sampler.join()
        answered = status.returncode == 0
        print(f"{label}: {FLOOD} half-sent requests, soft fd limit {NOFILE}: the port held "
              f"{held} before refusing; status {'answered' if answered else 'FAILED'} in "
              f"{status_ms:.0f} ms; daemon.out peak {peak[0]} bytes")
        key = label.replace(" ", "_")
        figure(f"ui_flood_{key}_held_connections", held)
        figure(f"ui_flood_{key}_status_ms", status_ms if answered else float("inf"))
        figure(f"ui_flood_{key}_daemon_out_peak_bytes", peak[0])


def main() -> None:
    scenario("default cap", {})
    scenario("cap lifted", {"TEAMCTL_UI_MAX_CONNECTIONS": "100000"})


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
