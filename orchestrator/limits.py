"""The bounds both sides check: names, ids, sizes and counts (one copy of each).

The CLI checks a value before it connects (one line, exit 2); the daemon checks it again with
pydantic when the request arrives (a client is any process of the user, not only ``teamctl``).
Both read the figures here, so they cannot drift apart. Standard library only: the CLI and the
MCP server import it, and neither loads pydantic.
"""

from __future__ import annotations

__all__ = [
    "APPROVAL_ID_PATTERN",
    "APPROVAL_SHA256_PATTERN",
    "APPROVAL_SHA256_SHOWN",
    "APPROVAL_SHOWN_CHARS",
    "MAX_APPROVAL_TEXT_CHARS",
    "MAX_ATTACHMENTS",
    "MAX_DEPTH",
    "MAX_PAGE_ROWS",
    "MAX_SEQ",
    "MAX_TASK_DEPS",
    "MAX_TASK_TEXT_BYTES",
    "MAX_TASK_TITLE_CHARS",
    "MAX_WAIT_SECONDS",
    "NAME_PATTERN",
    "ORIGINAL_LIMIT_BYTES",
    "REQUEST_LIMIT_BYTES",
    "TOOL_TASK_ID_PATTERN",
    "ULID_PATTERN",
]

# a team, member or host name: letters, digits, '_' and '-', at most 64, starting with a
# letter or digit (it becomes a directory name and a socket path component)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
# a message id (orchestrator.ids): 26 Crockford base32 characters
ULID_PATTERN = r"^[0-9A-HJKMNP-TV-Z]{26}$"
# a task id as a member's MCP tool takes it: T3, t3 or 3 (the tool hands the daemon the number)
TOOL_TASK_ID_PATTERN = r"^[Tt]?[0-9]{1,19}$"
APPROVAL_ID_PATTERN = r"^apv_[0-9A-HJKMNP-TV-Z]{26}$"
# an approval's request (docs/approvals.md): what a decision may name of its sha256 (at least
# 8 hex digits), how many digits a listing shows, how many characters of its summary a
# listing, the live view's row and a notification show before "… N more characters", and
# the most a request may hold to be asked at all (the operator must be able to read it whole)
APPROVAL_SHA256_PATTERN = r"^[0-9a-f]{8,64}$"
APPROVAL_SHA256_SHOWN = 12
APPROVAL_SHOWN_CHARS = 200
MAX_APPROVAL_TEXT_CHARS = 64 * 1024

# one request line on the control socket (and one MCP line, and a message's text)
REQUEST_LIMIT_BYTES = 1024 * 1024
# arrays/objects nested in one request: deeper input would exhaust the parser's stack
MAX_DEPTH = 64
# one attached file as read from disk (or the clipboard), before it is normalised
ORIGINAL_LIMIT_BYTES = 20 * 1024 * 1024
MAX_ATTACHMENTS = 32  # per message

# a board task (docs/board.md): its one-line title, its body (and a summary, evidence, a
# note: 64 KiB each) and how many tasks it may wait on
MAX_TASK_TITLE_CHARS = 200
MAX_TASK_TEXT_BYTES = 64 * 1024
MAX_TASK_DEPS = 100

# rows in one answer (history, approvals): a bigger page is asked for in several calls
MAX_PAGE_ROWS = 1000
# a journal position (a cursor, an offset): what a SQLite INTEGER holds (larger overflowed)
MAX_SEQ = 2**63 - 1
MAX_WAIT_SECONDS = 30 * 24 * 3600.0  # any --timeout / wait: 30 days (no inf, nan or 1e308)
