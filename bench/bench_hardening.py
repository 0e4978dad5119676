"""Issue 10: what the hardened control socket holds, and what bounded answers cost.

- connections held open at once before the daemon makes room or refuses (its cap), how many it
  evicted under a flood of idle connections, and ``status`` latency while they are held;
- daemon RSS after 100 ``history`` calls on a member with 1,000 messages (default page and the
  largest page), against the RSS before.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member.
"""

from __future__ import annotations

import socket
import time

from _harness import figure, home, median, percentile, rss_mib
from bench_scale import daemon_pid, launch

from orchestrator import client, protocol

IDLE_CONNECTIONS = 2000


def connection_flood() -> None:
    with home() as env:
        ctl = launch(env, 1)
        path = str(ctl.socket)
        baseline = _status_ms(ctl, 50)
        held: list[socket.socket] = []
        try:
            for _ in range(IDLE_CONNECTIONS):
                sock = socket.socket(socket.AF_UNIX)
                sock.connect(path)
                held.append(sock)
            loaded = _status_ms(ctl, 50)
            alive = sum(1 for s in held if _still_open(s))
        finally:
            for sock in held:
                sock.close()
        events = (ctl.logs / "teamctl.jsonl").read_text()
        evicted = events.count('"control_connection_evicted"')
        refused = events.count('"control_connection_refused"')
    print(f"{IDLE_CONNECTIONS} idle connections opened: {alive} still open at the end (the cap "
          f"is 256), {evicted} evicted to make room, {refused} refused; status while held: p50 "
          f"{median(loaded):.2f} ms, p99 {percentile(loaded, 99):.2f} ms (idle daemon: p50 "
          f"{median(baseline):.2f} ms, p99 {percentile(baseline, 99):.2f} ms)")
    figure("connections_held_open", alive)
    figure("connections_evicted", evicted)
    figure("status_p99_with_2000_idle_connections_ms", percentile(loaded, 99))


def _status_ms(ctl: object, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        client.call(ctl, protocol.STATUS, {})  # type: ignore[arg-type]
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def history_rss(messages: int = 1000, calls: int = 100) -> None:
    with home() as env:
        ctl = launch(env, 1)
        for i in range(messages):
            client.call(ctl, protocol.SEND, {"member": "m0", "text": f"message {i} " + "x" * 200,
                                      "wait": True, "timeout": 30.0}, timeout=60)
        pid = daemon_pid(ctl)
        before = rss_mib(pid)
        timings = {}
        for limit in (50, 1000):
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                doc = client.call(ctl, protocol.HISTORY, {"member": "m0", "limit": limit})
                samples.append((time.perf_counter() - start) * 1000)
            assert len(doc["messages"]) == min(limit, messages)
            timings[limit] = median(samples)
        after = rss_mib(pid)
    print(f"daemon RSS with {messages} messages journaled: {before:.1f} MiB; after {calls} "
          f"history calls of 50 and {calls} of 1000 messages: {after:.1f} MiB "
          f"(+{after - before:.1f}); history call p50: 50 messages {timings[50]:.1f} ms, "
          f"1000 messages {timings[1000]:.1f} ms")
    figure("daemon_rss_after_history_calls_mib", after)
    figure("daemon_rss_growth_history_calls_mib", after - before)
    figure("history_50_p50_ms", timings[50])


if __name__ == "__main__":
    connection_flood()
    history_rss()
