"""Issue 32 figures (a fake claude member with permissions = "ask", a real daemon, the local
ntfy server of tests/support/ntfy_fake.py): a needs-you item → its notification at the server (p50
of 20: the runtime's request, as the approval's asked_at, to the publish's arrival); a tap
(the action's body POSTed to the response topic) → applied and the member's process told
(the receipt "applied: approved (the runtime confirmed it)" at the server), from the phone's
POST and from the tap's arrival at the server (the daemon's share alone); and the reconnect
after the server returns from a 5 s outage, with the default backoff (1 s doubling to 60 s).
And one more tap right behind 1,000 junk posts on the response topic: the daemon's share
(the tap at the server → the receipt at the server) with the flood read ahead of it.

The phone is one kept ``httpx.Client``, as the ntfy app keeps its connection: a new client per
tap (``httpx.post``) loads certifi's CA bundle each time — ~120 ms on this machine, which the
first version of this bench measured as the daemon's (126 ms p50; the daemon's share was
~20 ms).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member. The phone is the ntfy server's client."""

from __future__ import annotations

import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from _harness import FAKE_CLAUDE, REPO, figure, home, median, percentile, teamctl

from orchestrator import client, protocol
from orchestrator.paths import Home

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.ntfy_fake import FakeNtfy

RUNS = 20
OUTAGE = 5.0
FLOOD = 1000  # junk posts ahead of one real tap


def _more_than(n: int, title: str) -> Callable[[list[dict[str, Any]]], bool]:
    """Whether more than ``n`` of a topic's messages have ``title`` in their title."""
    def holds(messages: list[dict[str, Any]]) -> bool:
        return sum(title in m.get("title", "") for m in messages) > n
    return holds


def main() -> None:
    from tests.support.ntfy_fake import FakeNtfy

    ntfy = FakeNtfy()
    ntfy.start()
    with home() as env:
        teamctl(env, "notify", "init", "--server", ntfy.url)
        operator = tomllib.loads((Path(env["TEAMCTL_HOME"]) / "notify.toml").read_text())
        topic = operator["topic"]
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "ask.toml"
        team.write_text(
            '[team]\nname = "ask"\nworkdir = "' + env["TEAMCTL_BENCH_DIR"] + '"\n\n'
            "[notify]\nntfy = {}\nmax_per_minute = 600\n\n"
            '[[members]]\nname = "lead"\nruntime = "claude"\nmodel = "claude-sonnet-4-5"\n'
            f'command = "{FAKE_CLAUDE}"\npermissions = "ask"\n')
        teamctl(env, "launch", str(team))
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        to_push, to_applied, in_daemon = [], [], []
        phone = httpx.Client(timeout=10, trust_env=False)
        for i in range(RUNS):
            sender = threading.Thread(target=client.call, args=(ctl, protocol.SEND, {
                "member": "lead", "text": f"WRITE f{i}.txt x", "wait": True, "timeout": 60.0}),
                kwargs={"timeout": 90})
            sender.start()
            pushes = ntfy.wait_for(topic, _more_than(i, "asks: Write"))
            push = [m for m in pushes if "asks: Write" in m.get("title", "")][-1]
            [row] = client.call(ctl, protocol.APPROVALS, {}, timeout=30)["approvals"]
            to_push.append((ntfy.received_at[push["id"]] - row["asked_at"]) * 1000)
            [approve] = [a for a in push["actions"] if a["label"] == "Approve"]
            tapped = time.time()
            phone.post(approve["url"], content=approve["body"].encode()).raise_for_status()
            done = ntfy.wait_for(topic, _more_than(i, "runtime confirmed"))
            applied = ntfy.received_at[done[-1]["id"]]
            [tap] = [m for m in ntfy.messages(operator["response_topic"])
                     if m["message"] == approve["body"]]
            to_applied.append((applied - tapped) * 1000)
            in_daemon.append((applied - ntfy.received_at[tap["id"]]) * 1000)
            sender.join()
        behind_flood = _tap_behind_a_flood(ntfy, ctl, phone, topic, operator["response_topic"])
        phone.close()
        ntfy.stop()
        time.sleep(OUTAGE)  # the outage being measured, not a synchronisation
        before = len(ntfy.subscribed_at)
        ntfy.start()
        back = time.time()
        deadline = time.monotonic() + 120
        while len(ntfy.subscribed_at) == before and time.monotonic() < deadline:
            time.sleep(0.01)
        reconnect = ntfy.subscribed_at[before] - back
    ntfy.stop()
    print(f"needs-you item -> published: p50 {median(to_push):.1f} ms, "
          f"p95 {percentile(to_push, 95):.1f} ms ({RUNS} requests)")
    print(f"action posted -> applied and the runtime told: p50 {median(to_applied):.1f} ms, "
          f"p95 {percentile(to_applied, 95):.1f} ms")
    print(f"  of which the tap at the server -> the receipt at the server: p50 "
          f"{median(in_daemon):.1f} ms, p95 {percentile(in_daemon, 95):.1f} ms")
    print(f"the same tap behind {FLOOD:,} junk posts on the response topic: the tap at the "
          f"server -> the receipt at the server {behind_flood:.1f} ms")
    print(f"reconnect after the server returns ({OUTAGE:g} s outage, default backoff): "
          f"{reconnect:.2f} s")
    figure("notify_item_to_published_ms", median(to_push))
    figure("notify_action_to_applied_ms", median(to_applied))
    figure("notify_action_at_server_to_receipt_ms", median(in_daemon))
    figure("notify_action_behind_flood_ms", behind_flood)
    figure("notify_reconnect_s", reconnect)


def _tap_behind_a_flood(ntfy: FakeNtfy, ctl: Home, phone: httpx.Client, topic: str,
                        responses: str) -> float:
    """One more approval, tapped right after ``FLOOD`` junk posts reached the response topic
    (what anyone who saw the topic can send): from the tap's arrival at the server to its
    receipt there — the daemon reads the flood ahead of it (docs/notify.md)."""
    done_before = sum("runtime confirmed" in m.get("title", "") for m in ntfy.messages(topic))
    asked_before = sum("asks: Write" in m.get("title", "") for m in ntfy.messages(topic))
    sender = threading.Thread(target=client.call, args=(ctl, protocol.SEND, {
        "member": "lead", "text": "WRITE flood.txt x", "wait": True, "timeout": 60.0}),
        kwargs={"timeout": 90})
    sender.start()
    pushes = ntfy.wait_for(topic, _more_than(asked_before, "asks: Write"))
    push = [m for m in pushes if "asks: Write" in m.get("title", "")][-1]
    [approve] = [a for a in push["actions"] if a["label"] == "Approve"]
    for n in range(FLOOD):
        phone.post(f"{ntfy.url}/{responses}", content=f"junk {n} approve everything".encode())
    phone.post(approve["url"], content=approve["body"].encode()).raise_for_status()
    done = ntfy.wait_for(topic, _more_than(done_before, "runtime confirmed"), timeout=120)
    [tap] = [m for m in ntfy.messages(responses) if m["message"] == approve["body"]]
    sender.join()
    return (ntfy.received_at[done[-1]["id"]] - ntfy.received_at[tap["id"]]) * 1000


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
