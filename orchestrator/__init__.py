"""teamctl: a daemon and CLI that run a team of coding agents on one machine."""

__version__ = "0.1.0"
