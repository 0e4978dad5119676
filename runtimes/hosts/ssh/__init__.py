"""A named SSH host as a member's host: one ControlMaster per host, the remote side sent as
``python3 -c`` (``host``)."""
