"""The egress proxy's added latency per API request (issue 29's figure): a local HTTP server
asked 200 times directly, then 200 times the way a sandboxed member's CLI asks its provider —
through the relay's loopback proxy port (runtimes/hosts/sandbox/relay.py, a real subprocess) and the
daemon's proxy (orchestrator/daemon/egress/_proxy.py, in an anyio loop of this process), a CONNECT
tunnel per request (new connection each time: the worst case; a CLI keeping its connection
pays the tunnel once). Median and p90 of each, and the difference.

    .venv/bin/python bench/bench_egress.py

Measured in process (the proxy) and a relay subprocess: no member.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import anyio
from _harness import REPO, figure, median, percentile

sys.path.insert(0, str(REPO))

from orchestrator.daemon.egress._policy import EgressPolicy
from orchestrator.daemon.egress._proxy import EgressProxy

N = 200
RELAY = (REPO / "runtimes" / "hosts" / "sandbox" / "relay.py").read_text()
# run by the relay as its child: HTTPS_PROXY is the relay's port
CLIENT = """
import http.client, json, os, sys, time, urllib.parse
port, n = int(sys.argv[1]), int(sys.argv[2])
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
def ask(direct):
    start = time.perf_counter()
    if direct:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    else:
        conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
        conn.set_tunnel("127.0.0.1", port)
    conn.request("POST", "/v1/messages", body=b"{}", headers={"x-api-key": "k"})
    conn.getresponse().read()
    conn.close()
    return (time.perf_counter() - start) * 1000
for direct in (True, False):
    ask(direct)  # warm
print(json.dumps({"direct": [ask(True) for _ in range(n)],
                  "proxied": [ask(False) for _ in range(n)]}))
"""


class _Api(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"type":"message","content":[]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


def _serve_proxy(proxy: EgressProxy, ready: threading.Event, stop: threading.Event) -> None:
    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.serve)
            ready.set()
            await anyio.to_thread.run_sync(stop.wait)
            tg.cancel_scope.cancel()

    anyio.run(main)


def main() -> None:
    api = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    port = api.server_address[1]
    with tempfile.TemporaryDirectory(prefix="tc-eg-") as folder:
        proxy = EgressProxy("bench", "m", EgressPolicy.from_strings([f"127.0.0.1:{port}"]),
                            Path(folder) / "egress.sock")
        ready, stop = threading.Event(), threading.Event()
        thread = threading.Thread(target=_serve_proxy, args=(proxy, ready, stop), daemon=True)
        thread.start()
        ready.wait(10)
        done = subprocess.run([sys.executable, "-I", "-c", RELAY, "--socket", str(proxy.path),
                               "--", sys.executable, "-I", "-c", CLIENT, str(port), str(N)],
                              capture_output=True, text=True, timeout=300, check=True)
        stop.set()
        thread.join(10)
    api.shutdown()
    found = json.loads(done.stdout)
    direct, proxied = found["direct"], found["proxied"]
    figure("egress_direct_request_ms_p50", median(direct))
    figure("egress_proxied_request_ms_p50", median(proxied))
    figure("egress_added_ms_p50", median(proxied) - median(direct))
    figure("egress_proxied_request_ms_p90", percentile(proxied, 90))
    figure("egress_allowed_connections", float(proxy.counts.allowed))


if __name__ == "__main__":
    main()
