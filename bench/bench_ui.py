"""Issue 16 figures (fake claude members, a real daemon, the live view over HTTP):
- a state change in the journal (a `send`, journaled) -> the `change` event on the page's
  stream (median of 50);
- the page's first load: the HTML and every fragment it fetches (median of 10);
- the daemon's RSS with the page's stream open on a busy team (a message every 0.2 s, the page
  refetching its fragments on every change) for BENCH_UI_MINUTES (default 10) minutes
  (BENCH_UI_NO_PAGE=1: the same team without the page, for comparison).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member. The page is an HTTP client of the live view.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import httpx
from _harness import REPO, figure, home, median, percentile, rss_mib, team_file, teamctl

from orchestrator import client, protocol
from orchestrator.paths import Home

FRAGMENTS = ("/fragments/needs-you", "/fragments/members", "/fragments/conversation",
             "/fragments/between", "/fragments/log")


def _signed_in(url: str) -> httpx.Client:
    base = url.split("/?")[0]
    browser = httpx.Client(base_url=base, timeout=30)
    assert browser.get("/?" + url.split("?", 1)[1]).status_code in (200, 303)
    return browser


def change_to_event(ctl: Home, browser: httpx.Client, i: int) -> float:
    """One sample: a fresh stream, one journaled send, the time to its change event."""
    with browser.stream("GET", "/events", timeout=60) as stream:
        lines = stream.iter_lines()
        next(lines), next(lines)  # the stream's opening event
        start = time.perf_counter()
        message_id = client.call(ctl, protocol.SEND, {"member": "m0", "text": f"change {i}"})["id"]
        elapsed = next((time.perf_counter() - start) * 1000 for line in lines
                       if line.startswith("data: "))
    client.call(ctl, protocol.SEND, {"member": "m0", "text": f"settle {message_id}", "wait": True,
                              "timeout": 30.0}, timeout=40)  # the delivery's own changes end
    return elapsed


def main() -> None:
    minutes = float(os.environ.get("BENCH_UI_MINUTES", "10"))
    with home() as env:
        teamctl(env, "launch", str(team_file(Path(env["TEAMCTL_BENCH_DIR"]), "ui", 3)))
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        url = client.call(ctl, protocol.UI, {})["url"]
        browser = _signed_in(url)
        samples = [change_to_event(ctl, browser, i) for i in range(50)]
        print(f"journal change -> the page's stream event: median {median(samples):.2f} ms, "
              f"p95 {percentile(samples, 95):.2f} ms ({len(samples)} changes)")
        figure("ui_change_to_event_ms", median(samples))

        loads = []
        for _ in range(10):
            fresh = _signed_in(client.call(ctl, protocol.UI, {})["url"])
            start = time.perf_counter()
            assert fresh.get("/").status_code == 200
            for path in ("/static/app.js", "/static/app.css", *FRAGMENTS):
                assert fresh.get(path).status_code == 200, path
            loads.append((time.perf_counter() - start) * 1000)
            fresh.close()
        print(f"first load (page, assets, {len(FRAGMENTS)} fragments): median "
              f"{median(loads):.1f} ms")
        figure("ui_first_load_ms", median(loads))

        daemon = int(ctl.pid_file.read_text().split()[0])
        stop = threading.Event()

        def busy() -> None:
            n = 0
            while not stop.wait(0.2):
                client.call(ctl, protocol.SEND, {"member": f"m{n % 3}", "text": f"busy {n}"})
                n += 1

        def page() -> None:  # what app.js does: refetch every fragment on each change
            with browser.stream("GET", "/events", timeout=None) as stream:
                for line in stream.iter_lines():
                    if stop.is_set():
                        return
                    if line.startswith("data: "):
                        for path in FRAGMENTS:
                            browser.get(path)

        threads = [threading.Thread(target=busy)]
        if not os.environ.get("BENCH_UI_NO_PAGE"):  # the same busy team without the page
            threads.append(threading.Thread(target=page, daemon=True))
        for thread in threads:
            thread.start()
        start_rss = rss_mib(daemon)
        peak, deadline = start_rss, time.monotonic() + minutes * 60
        while not stop.wait(min(10.0, max(0.0, deadline - time.monotonic()))):
            peak = max(peak, rss_mib(daemon))
            if time.monotonic() >= deadline:
                stop.set()
        end_rss = rss_mib(daemon)
        threads[0].join()
        print(f"daemon RSS with the page open on a busy team for {minutes:g} min: "
              f"{start_rss:.1f} -> {end_rss:.1f} MiB (peak {peak:.1f})")
        figure("ui_daemon_rss_start_mib", start_rss)
        figure("ui_daemon_rss_end_mib", end_rss)
        figure("ui_daemon_rss_peak_mib", peak)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
