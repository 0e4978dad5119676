"""The live view: a local web page served by the daemon (docs/live-view.md)."""
