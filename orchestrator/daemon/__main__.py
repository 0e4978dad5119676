"""The daemon's own entry, ``python -m orchestrator.daemon [--notify-fd N]``: what ``teamctl``
starts in the background (``client/calls.py``), without the CLI — click and every command
module are ~1.4 MiB of a daemon's resident memory it never uses. ``teamctl daemon`` still
runs it in the foreground."""

from __future__ import annotations

import argparse
import sys

from orchestrator.daemon.main import main
from orchestrator.paths import Home

parser = argparse.ArgumentParser(prog="python -m orchestrator.daemon")
parser.add_argument("--notify-fd", type=int, default=None, help=argparse.SUPPRESS)
sys.exit(main(Home.from_env(), notify_fd=parser.parse_args().notify_fd))
