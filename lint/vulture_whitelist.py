"""Names vulture (make lint) cannot see used: pydantic fields and validators, click commands,
structlog method aliases, counters read by tests and benches. A name that is really dead is
removed from the code, not added here."""

# ruff: noqa
_.MAX_IMAGE_PIXELS
_._backoff_ordered
_._agent_named
_._check_splits
_._ceilings_ordered
_._reviewer_exists
_._no_nul
_._unique_members
_._names_apart
_._slots_apart_from_env
_.accept_failures
_.evicted
_.open_connections
_.refused
_.reported_drops
_.row_factory
_.schema_version
_.sources
_.wait_bound
_.waiting
_.offers  # Core: the board's idle claimers, called by the board's tests
_.spent_usd  # Ledger: a spend in dollars, read by the ledger's tests
_.writing  # AsyncJournal: a group in the writer thread, read by the tests' settle (tests/support/chains.py)
already_running
cost_usd
critical
daemon
daemon_running
daemon_stopping
debug
doctor
fatal
id
messages
model_config
ok
schema
variants
vision_catalog
warn
completion
info
_._ask_needs_a_channel
asked_at
settled_at
confirmed_at
approval
worktrees
diff
dirty
diffstat
credential
thread
mcp
TOOLS
refusals
messaging
sees_images
you
open_app_server
CodexAppServer
transport
capture_signals
total_usd
total_tokens
cost_unknown
lower_bound  # Spend, UsageRow: read by the CLI and the live view as JSON
description_cached
exported_at
redacted
images_described
_._remote_members
_._pod_members
_._image_or_template  # KubernetesHostConfig validator (config.py)
_._network_needs_sandbox
_._attach_paths_unsandboxed_here
reachable
revoked_at  # KeptRuleDoc: what --rules --all shows (protocol/)
revoked_why
writable  # io.TextIOBase: BoundedOut is a writable stream (daemon/stdio.py)
exc_text  # logging.LogRecord: a held-back repeat drops its traceback (daemon/stdio.py)
exc_info  # logging.LogRecord: a held-back repeat drops its traceback (daemon/stdio.py)
list_tasks  # click command: teamctl task list (client/task_cli.py)
lease_until  # TaskDoc, TaskListDoc, TaskShowDoc: --json fields (protocol/)
tasks
next_after
depends_on
egress  # MemberStatus.egress: the status --json field, set by keyword (protocol/)
_._one_topic  # NtfySettings validator (notify_config.py)
init  # click command: teamctl notify init (client/notify_cli.py)
polling  # NameWatch.polling: the tests' view of the fallback (daemon/control/_name_watch.py)
starts  # ForkServer.starts: the tests' count of servers started (attachments/pdf_forkserver.py)
confine  # Host.confine: what teamctl runs for a member, as the member (board check, git, doctor)
list_commands  # click.Group: LazyGroup lists, loads and shows lazy commands (client/lazy_commands.py)
get_command
format_commands
__getattr__  # module attribute: client.call imported at first use (client/__init__.py)
codex_sandbox  # MemberLogin.codex_sandbox: a doctor --json field, set from a dict (protocol/)
tmpdir  # CodexSandboxView.tmpdir: a doctor --json field (protocol/)
_._integrate_apart  # TeamConfig validator: the integration branch is no member's (config.py)
_._one_way  # QueueParams validator: --pause or --resume (protocol/land.py)
queued_at  # QueueEntryDoc: teamctl queue --json fields (protocol/land.py)
finished_at
check_seconds
reported_at  # AccountWindow: accounts --json fields, set by keyword (protocol/quota.py)
reported_by
_._daemons_secrets_kept  # TeamConfig validator: no member handed the forge token or the exporter headers
_.ci_retries  # ForgeSection's pydantic field, read once CI polling is built
_.requests_made  # Forge: requests sent, read by the forge's tests (the figure of docs/forge.md)
trace  # click command: teamctl trace (client/cli.py)
traces  # TaskShowDoc.traces: a task show --json field (protocol/board.py)
duration_ms  # SpanDoc: trace --json fields, set by keyword (protocol/traces.py)
sent_at
