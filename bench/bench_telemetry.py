"""Issue 51's figures: a turn's overhead with telemetry on vs off (median of 200 ``send
--wait`` round trips, one fake member), the daemon's RSS with telemetry on, and the spans
exported per second at the 100-member throughput benchmark (1000 messages fanned across 100
fake members, as bench_scale.py) without dropping any — received by a local OTLP/HTTP receiver
in this process (tests/support/otlp_receiver.py: no collector runs here).

Members are driven as the operator drives them (requests on the daemon's socket); nothing
calls as a member."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from _harness import figure, home, median, percentile, rss_mib, team_file
from bench_scale import daemon_pid, wait_all_answered

from orchestrator import client, protocol
from orchestrator.paths import Home
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver


def _launch(env: dict[str, str], members: int, receiver: OtlpReceiver | None,
            name: str = "t") -> Home:
    from orchestrator.config import load_team_file

    ctl = Home(Path(env["TEAMCTL_HOME"]))
    client.ensure_daemon(ctl)
    path = team_file(Path(env["TEAMCTL_BENCH_DIR"]), name, members)
    if receiver is not None:
        path.write_text(path.read_text() + f'\n[telemetry]\notlp = {{ endpoint = '
                        f'"{receiver.url}" }}\nmetric_interval = 5.0\n')
    config = load_team_file(path).model_dump(mode="json")
    client.call(ctl, protocol.LAUNCH, {"config": config, "file": str(path)}, timeout=600)
    return ctl


def _round_trip(ctl: Home, text: str) -> float:
    start = time.perf_counter()
    client.call(ctl, protocol.SEND, {"member": "m0", "text": text, "wait": True,
                                     "timeout": 30.0}, timeout=60)
    return (time.perf_counter() - start) * 1000


def overhead(runs: int = 200) -> None:
    """Two daemons at once, one with telemetry, their round trips interleaved: the machine's
    noise (two cores shared with other work) falls on both alike."""
    with otlp_receiver() as receiver, home() as env_off, home() as env_on:
        off_ctl, on_ctl = _launch(env_off, 1, None), _launch(env_on, 1, receiver)
        _round_trip(off_ctl, "warm")
        _round_trip(on_ctl, "warm")
        off, on = [], []
        for i in range(runs):
            off.append(_round_trip(off_ctl, f"ping {i}"))
            on.append(_round_trip(on_ctl, f"ping {i}"))
        rss_off, rss = rss_mib(daemon_pid(off_ctl)), rss_mib(daemon_pid(on_ctl))
        receiver.wait_for(lambda r: len(r.spans) >= 2 * (runs + 1), 60)
        received = len(receiver.spans)
    print(f"send --wait round trip, telemetry off: p50 {median(off):.2f} ms, p99 "
          f"{percentile(off, 99):.2f} ms; on: p50 {median(on):.2f} ms, p99 "
          f"{percentile(on, 99):.2f} ms ({runs} runs each, interleaved, fake claude; "
          f"{received} spans received)")
    print(f"daemon RSS after {runs + 1} turns of 1 fake member: telemetry on {rss:.1f} MiB, "
          f"off {rss_off:.1f} MiB")
    figure("telemetry_off_turn_p50_ms", median(off))
    figure("telemetry_on_turn_p50_ms", median(on))
    figure("telemetry_overhead_p50_ms", median(on) - median(off))
    figure("telemetry_daemon_rss_1_member_mib", rss)
    figure("telemetry_off_daemon_rss_1_member_mib", rss_off)


def _fan(ctl: Home, messages: int, members: int) -> float:
    """``messages`` sent by four operators at once across ``members``; seconds until every one
    is answered."""
    start = time.perf_counter()
    ids: list[str] = []

    def sender(offset: int) -> None:
        ids.extend(client.call(ctl, protocol.SEND,
                               {"member": f"m{n % members}", "text": f"fan {n}"},
                               timeout=60)["id"] for n in range(offset, messages, 4))

    senders = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    wait_all_answered(ctl, len(ids))
    return time.perf_counter() - start


def _fan_exported(ctl: Home, receiver: OtlpReceiver, messages: int, members: int
                  ) -> tuple[float, float, float]:
    """``messages`` fanned across the members until every one is answered, then until both
    spans of each reached ``receiver``: (answered s, exported s, the daemon's RSS MiB)."""
    start = time.perf_counter()
    answered_s = _fan(ctl, messages, members)
    if not receiver.wait_for(lambda r: len(r.spans) >= 2 * messages, 120):
        raise SystemExit(f"only {len(receiver.spans)} of {2 * messages} spans arrived")
    return answered_s, time.perf_counter() - start, rss_mib(daemon_pid(ctl))


def spans_per_second(messages: int = 1000, members: int = 100) -> None:
    with home() as env:
        off_s = _fan(_launch(env, members, None), messages, members)
    with otlp_receiver() as receiver, home() as env:
        ctl = _launch(env, members, receiver)
        answered_s, exported_s, rss = _fan_exported(ctl, receiver, messages, members)
        dropped = [line for line in (ctl.logs / "teamctl.jsonl").read_text().splitlines()
                   if "telemetry_spans_dropped" in line]
    rate = len(receiver.spans) / exported_s
    print(f"{messages} messages across {members} fake members with telemetry on: answered in "
          f"{answered_s:.2f} s ({messages / answered_s:.0f} msgs/s; off: {off_s:.2f} s, "
          f"{messages / off_s:.0f} msgs/s), {len(receiver.spans)} "
          f"spans received in {exported_s:.2f} s: {rate:.0f} spans/s, "
          f"{len(dropped)} drop lines logged")
    print(f"daemon RSS with telemetry on, {members} fake members after {messages} messages: "
          f"{rss:.1f} MiB")
    figure("telemetry_spans_per_s_100_members", rate)
    figure("telemetry_throughput_msgs_per_s", messages / answered_s)
    figure("telemetry_off_throughput_msgs_per_s", messages / off_s)
    figure("telemetry_daemon_rss_100_members_mib", rss)
    figure("telemetry_spans_dropped", float(len(dropped)))


if __name__ == "__main__":
    overhead()
    spans_per_second()
