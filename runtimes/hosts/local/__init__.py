"""This machine as a member's host: the runtime is a child process of the daemon (``host``)."""
