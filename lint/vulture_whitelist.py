"""Names vulture (make lint) cannot see used: pydantic fields and validators, click commands,
structlog method aliases, counters read by tests and benches. A name that is really dead is
removed from the code, not added here."""

# ruff: noqa
_.MAX_IMAGE_PIXELS
_._backoff_ordered
_._agent_named
_._check_splits
_._reviewer_exists
_._no_nul
_._unique_members
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
_.spent_usd  # Ledger: a spend in dollars, read by the ledger's tests
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
revoked_at  # KeptRuleDoc: what --rules --all shows (wire.py)
revoked_why
writable  # io.TextIOBase: BoundedOut is a writable stream (daemon/stdio.py)
exc_text  # logging.LogRecord: a held-back repeat drops its traceback (daemon/stdio.py)
exc_info  # logging.LogRecord: a held-back repeat drops its traceback (daemon/stdio.py)
list_tasks  # click command: teamctl task list (client/task_cli.py)
lease_until  # TaskDoc, TaskListDoc, TaskShowDoc: --json fields (wire.py)
tasks
next_after
depends_on
egress  # MemberStatus.egress: the status --json field, set by keyword (wire.py)
_._one_topic  # NtfySettings validator (notify_config.py)
init  # click command: teamctl notify init (client/notify_cli.py)
polling  # NameWatch.polling: the tests' view of the fallback (daemon/name_watch.py)
starts  # ForkServer.starts: the tests' count of servers started (attachments/pdf_forkserver.py)
confine  # Host.confine: what teamctl runs for a member, as the member (board check, git, doctor)
codex_sandbox  # MemberLogin.codex_sandbox: a doctor --json field, set from a dict (wire.py)
tmpdir  # CodexSandboxView.tmpdir: a doctor --json field (wire.py)
