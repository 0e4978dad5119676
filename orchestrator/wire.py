"""Every JSON document that crosses the control socket or is printed by ``--json``.

One pydantic model per document; the daemon builds its answers from them, ``teamctl schema``
prints their JSON Schema, ``docs/json.md`` shows an example of each, and the contract tests
validate what the CLI prints against them. Unknown keys are refused (``extra="forbid"``): a
document that changes shape fails a test before it reaches a script.

The CLI does not import this module on its hot path (pydantic costs about 200 ms of start-up,
three times click): it prints the daemon's documents as they came, and builds the few it makes
itself (an error, a refusal, a launch result) with the same keys — the contract tests hold
both sides to these models.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
)

__all__ = [
    "DOCUMENTS",
    "OPERATOR",
    "TEAMCTL",
    "ApprovalDoc",
    "ApprovalState",
    "ApprovalsDoc",
    "AttachmentRef",
    "BudgetDoc",
    "ChangesDoc",
    "DecisionDoc",
    "DeliveryError",
    "DeliveryState",
    "DiffDoc",
    "DoctorReport",
    "DryRunPlan",
    "ErrorDoc",
    "ErrorReply",
    "ExportDoc",
    "ExportedAttachment",
    "ExportedMember",
    "ExportedMessage",
    "Failure",
    "HistoryDoc",
    "HostCheck",
    "HostReport",
    "HostRuntime",
    "KeptRuleDoc",
    "KeptRulesDoc",
    "KeptWorktree",
    "LastExit",
    "Launch",
    "LaunchResult",
    "Liveness",
    "LogEvent",
    "MemberStatus",
    "MessageDoc",
    "NotifyCheck",
    "NotifyTestDoc",
    "Original",
    "Ping",
    "PlannedDoc",
    "PriceRow",
    "PricesDoc",
    "Readiness",
    "Refusal",
    "RestartResult",
    "RulePreviewDoc",
    "RuntimeRow",
    "SendResult",
    "Spend",
    "StatusDoc",
    "StopResult",
    "TaskDoc",
    "TaskEventDoc",
    "TaskListDoc",
    "TaskRef",
    "TaskRefIn",
    "TaskShowDoc",
    "TaskState",
    "TaskStatus",
    "TeamStatus",
    "ToolsListedAck",
    "UiDoc",
    "UsageDoc",
    "UsageRow",
    "VariantDoc",
    "VisionCatalogInfo",
    "WireError",
    "WorktreeInfo",
    "WorktreesDoc",
]

# paused: its idle runtime was stopped and its place paused (a pod's ``pause_after``); the next
# message for it resumes it
Launch = Literal["pending", "starting", "running", "backoff", "stopping", "stopped", "fatal",
                 "paused"]
# unresponsive: it did not answer its liveness probe within the deadline (killed, restarted)
Liveness = Literal["alive", "unresponsive", "dead", "unknown"]
Readiness = Literal["ready", "busy", "not_ready"]
DeliveryState = Literal["queued", "prepared", "sent", "answered", "failed", "blocked"]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


_TASK_REF = re.compile(r"[Tt]?([0-9]{1,19})")


def _task_number(value: Any) -> Any:
    """``"T3"`` (as every output writes it) or ``3`` → 3; anything else is left to fail."""
    if isinstance(value, str) and (found := _TASK_REF.fullmatch(value)):
        return int(found.group(1))
    return value


def _task_ref_in(value: Any) -> Any:
    """A request's task id: ``3`` or ``"T3"`` (what an output printed), never ``"3"``."""
    if isinstance(value, str) and re.fullmatch(r"T[0-9]{1,19}", value):
        return int(value[1:])
    return value


# a task id in a request (strict: the int, or T3 as read from an output)
TaskRefIn = Annotated[int, BeforeValidator(_task_ref_in)]
# A board task's id: an int in the daemon, ``"T3"`` in every JSON document as on every screen
# and in the members' tools — one form wherever a task is named (it was 3 in --json, T3
# elsewhere: issue 45). Read back from either.
TaskRef = Annotated[int, BeforeValidator(_task_number),
                    PlainSerializer(lambda number: f"T{number}", return_type=str,
                                    when_used="json"),
                    WithJsonSchema({"type": "string", "pattern": "^T[0-9]+$"})]


# -- errors -----------------------------------------------------------------------------------

class WireError(_Doc):
    """``error.data`` of a JSON-RPC error answer: a TeamctlError as the daemon raised it."""

    code: str
    message: str
    retryable: bool
    exit_code: int
    details: dict[str, Any] = {}


class ErrorDoc(_Doc):
    code: str
    message: str
    retryable: bool


class ErrorReply(_Doc):
    """What ``--json`` prints when a command fails (other than a refusal)."""

    ok: Literal[False] = False
    error: ErrorDoc


class Failure(_Doc):
    """One reason an attachment (or the whole message) was refused before send."""

    code: str
    message: str
    retryable: bool
    attachment: str | None = None
    member: str | None = None


class Refusal(_Doc):
    """``send --json`` when the message is refused before anything is sent (exit 3)."""

    ok: Literal[False] = False
    failures: list[Failure]


# -- status -----------------------------------------------------------------------------------

class LastExit(_Doc):
    code: int | None
    at: float


class Spend(_Doc):
    """What a member (or a team) has used, and its budget (docs/costs.md)."""

    cost_usd: float = Field(description="charged so far, the turn in flight included")
    cost_unknown: int = Field(default=0, description="turns whose cost is unknown (a model "
                              "the price table does not list): not in cost_usd")
    tokens: int = Field(description="input + output tokens")
    budget_usd: float | None = None
    budget_tokens: int | None = None
    lower_bound: str | None = Field(
        default=None, description="why cost_usd and tokens leave some of the API calls out "
        "(an ACP agent that does not report its side requests): they are a lower bound; "
        "null: every call is counted")


class EgressStatus(_Doc):
    """A sandboxed member's egress proxy (docs/security.md, "The network boundary")."""

    allowed: int = Field(description="connections the policy allowed")
    denied: int = Field(description="refused by the policy (egress_denied in the log)")


class MemberStatus(_Doc):
    """One member on the four axes (delivery is per message: see ``history``)."""

    name: str
    runtime: str
    model: str | None
    host: str | None = Field(default=None, description="the SSH host it runs on (null: this "
                             "machine); pid is then the local ssh client's")
    sandbox: str | None = Field(default=None, description="the OS boundary around it: "
                                "\"process, network on\" (bubblewrap; its network mode); "
                                "null: none (docs/security.md)")
    egress: EgressStatus | None = Field(default=None, description="its egress proxy's "
                                        "connections since its team was placed (network off "
                                        "or allowlist; null: none)")
    pid: int | None
    launch: Launch
    liveness: Liveness
    readiness: Readiness
    activity: str | None = None
    restarts: int
    epoch: int = Field(default=0, description="its launch number: each start of its process "
                       "(restart or recycle) is a new epoch; events of an older one are ignored")
    recycles: int = Field(default=0, description="planned restarts (recycle_turns, "
                          "recycle_rss_mb, recycle_children): not failures")
    session_id: str | None
    last_exit: LastExit | None
    error: str | None = None
    note: str | None = None
    queued: int = 0
    turn: str | None = Field(default=None, description="the message id of the turn in flight")
    spend: Spend | None = None
    hold: str | None = Field(default=None, description="why the member's queue is held (a "
                             "budget reached, a rate limit until HH:MM); messages stay queued")
    task: str | None = Field(default=None, description="its current task on the board: "
                             "\"T3 title\" (\" (review)\" when in review; several: \"; \")")


class TeamStatus(_Doc):
    name: str
    members: list[MemberStatus]
    spend: Spend | None = None
    already_running: bool = False
    resumed: bool = False


class StatusDoc(_Doc):
    """``teamctl status --json``."""

    teams: list[TeamStatus]


class LaunchResult(_Doc):
    """``teamctl launch --json``."""

    ok: bool
    team: str
    members: list[MemberStatus]
    already_running: bool = False
    resumed: bool = False


class RestartResult(TeamStatus):
    """``restart``: the member's team after the restart."""


class StopResult(_Doc):
    stopped: list[str]
    daemon_stopping: bool


class Ping(_Doc):
    pid: int


# -- messages ---------------------------------------------------------------------------------

class AttachmentRef(_Doc):
    """An attachment as journaled with a message: the variant that is (or was) sent."""

    name: str
    number: int = Field(default=1, description="its [Image #N] in the message's text")
    sha256: str
    mime: str
    width: int
    height: int
    bytes: int | None = None
    original_sha256: str
    described_by: str | None = Field(
        default=None, description="'runtime:model' of the describer when the member received "
        "a description in place of the image (describe_with)")
    description: str | None = None
    cli_transform: str | None = Field(
        default=None, description="what the member's CLI does to these bytes before the API "
        "sees them ('re-encoded by the CLI to …'); null: the API receives exactly this sha256")
    kind: Literal["image", "document", "text"] = "image"
    route: Literal["native", "pages", "text"] | None = Field(
        default=None, description="documents: how it reached the member — native (the file "
        "itself), pages (rendered page images and the text), text (the text alone)")
    pages: int | None = Field(default=None, description="a PDF's page count")
    page_variants: list[VariantDoc] = Field(
        default=[], description="the rendered pages sent as images (route pages), in order")
    name_warning: str | None = Field(
        default=None, description="its name claims another kind than its bytes, which decide "
        "what is sent: 'notes.png holds text: sent as text' (null: they agree)")


class DeliveryError(_Doc):
    code: str
    message: str | None
    retryable: bool


OPERATOR = "operator"  # who sent a message: the operator,
TEAMCTL = "teamctl"  # teamctl itself (the board's hand-overs, gate results, review asks)


class MessageDoc(_Doc):
    """One message to one member, with its delivery state."""

    id: str
    text: str
    state: DeliveryState
    reply: str | None
    attempts: int
    attachments: list[AttachmentRef] = []
    error: DeliveryError | None
    notes: list[str] = Field(default=[], description="what the runtime refused in the turn; "
                             "'teamctl: …' notes say what teamctl did (a cut turn continued)")
    sender: str = Field(default=OPERATOR, description="'operator', 'teamctl' (what teamctl "
                        "itself sent: a task handed over, a gate's result, a review asked) or "
                        "the teammate who sent it")
    to: str | None = Field(default=None, description="the member it is for")
    kind: Literal["message", "reply"] = "message"
    chain_id: str | None = None
    depth: int = Field(default=0, description="teammate hops from the operator's message")
    reply_to: str | None = None
    task_id: TaskRef | None = Field(default=None, description="the board's task it belongs "
                                    "to (T3)")
    created_at: str | None = Field(default=None, description="when it was journaled (UTC)")
    updated_at: str | None = Field(default=None, description="its delivery's last change (UTC)")
    usage: dict[str, Any] | None = Field(
        default=None, description="what the message's turns used (every attempt): "
        "input_tokens, cached_input_tokens, output_tokens, reasoning_output_tokens, cost_usd "
        "(null: unknown), estimated (a turn cut before its runtime's own figure)")


class HistoryDoc(_Doc):
    """``teamctl history --json``: one page, oldest first; ``before`` names the page before."""

    team: str
    member: str
    messages: list[MessageDoc]
    before: str | None = None


class ToolsListedAck(_Doc):
    """``member.tools_listed``: the daemon took note that this launch's runtime listed
    teamctl's MCP tools."""

    ok: bool = True


class SendResult(_Doc):
    """``teamctl send --json``: the message id; with ``--wait`` also its outcome and the
    attachments that were sent."""

    ok: bool
    id: str
    team: str
    member: str
    text: str | None = None
    state: DeliveryState | None = None
    reply: str | None = None
    attempts: int | None = None
    attachments: list[AttachmentRef] = []
    error: DeliveryError | None = None
    notes: list[str] = []
    sender: str = "operator"
    kind: Literal["message", "reply"] = "message"
    chain_id: str | None = None
    depth: int = 0
    reply_to: str | None = None
    task_id: TaskRef | None = None
    created_at: str | None = None
    updated_at: str | None = None
    usage: dict[str, Any] | None = None


class VariantDoc(_Doc):
    purpose: str
    mime: str
    width: int
    height: int
    bytes: int
    sha256: str = Field(description="sha256 of the exact bytes that would be sent")
    cli_transform: str | None = Field(
        default=None, description="what the member's CLI would do to them before the API "
        "sees them; null: the API receives exactly this sha256")


class Original(_Doc):
    sha256: str
    mime: str
    bytes: int


class PlannedDoc(_Doc):
    name: str
    number: int = Field(default=1, description="its [Image #N] in the message's text")
    original: Original
    variants: list[VariantDoc]
    warnings: list[str] = []
    described_by: str | None = Field(
        default=None, description="the member is text-only and opted in: the image would be "
        "described by this 'runtime:model', and the description sent in its place")
    description_cached: bool | None = Field(
        default=None, description="whether that description is already known (no side call)")
    kind: Literal["image", "document", "text"] = "image"
    route: Literal["native", "pages", "text"] | None = None
    pages: int | None = None


class DryRunPlan(_Doc):
    """``teamctl send --dry-run --json``: what would be sent."""

    ok: Literal[True] = True
    team: str | None = None
    member: str | None = None
    attachments: list[PlannedDoc]


# -- diagnostics and doctor -------------------------------------------------------------------

class LogEvent(BaseModel):
    """One line of ``teamctl logs --json``: these keys always, then the event's own fields
    (ids, counts, codes, sizes — redacted)."""

    model_config = ConfigDict(extra="allow")

    ts: str
    level: str
    event: str


class RuntimeRow(_Doc):
    """A runtime's executable here: with a team file, one row for each its members on this
    machine run; without, one for each runtime and ACP agent teamctl knows."""

    runtime: str
    acp_agent: str | None = Field(default=None, description="the ACP agent's preset")
    command: str | None = Field(default=None, description="the executable looked for")
    env_var: str
    path: str | None = Field(description="where it was found (null: not found)")
    version: str | None


class VisionCatalogInfo(_Doc):
    checked: str
    entries: int


class SandboxView(_Doc):
    """What a sandboxed member will see (``sandbox = "process"``)."""

    rw: list[str]
    ro: list[str]
    hidden: list[str]
    network: str
    host: str | None = Field(default=None, description="the SSH host it runs on: the paths "
                             "are that host's, resolved there at each start (null: here)")
    started: str | None = Field(default=None, description="what its command's --version "
                                "printed inside this sandbox (null: not tried, on a host, or "
                                "it failed there: see problem and fix)")


class SandboxSupport(_Doc):
    """Whether ``sandbox = "process"`` can be had here (a real run of bubblewrap)."""

    ok: bool
    path: str | None
    version: str | None
    reason: str | None
    fix: str | None = Field(default=None, description="what to do where it cannot be had "
                            "(apt-get install bubblewrap where it is missing)")


class CodexSandboxView(_Doc):
    """A Codex member's own sandbox on this machine (runtimes/codex/helper.py)."""

    sandbox: str = Field(description="its codex sandbox: read-only, workspace-write, "
                         "danger-full-access (none)")
    bwrap: str | None = Field(description="the bubblewrap on its PATH codex will run (null: "
                              "codex's own bundled one)")
    tmpdir: str = Field(description="its temp dir: its own, unless its env names one")
    helper: str = Field(description="whether codex can run its sandbox helper there")


class MemberLogin(_Doc):
    member: str
    runtime: str
    login: str
    permissions: str
    credential: str = Field(description="its kind (API key, subscription login, …) or none")
    source: str = Field(description="where it comes from; never the secret")
    command: str = Field(description="what it runs: its command, else the runtime's variable, "
                         "else the default name")
    path: str | None = Field(description="that command found on PATH (None: not found, or the "
                             "member runs on another host)")
    version: str | None = None
    problem: str | None = Field(default=None, description="why it cannot start (doctor exits 1)")
    fix: str | None = None
    sandbox: SandboxView | None = Field(default=None, description="a sandboxed member: what "
                                        "it will see")
    codex_sandbox: CodexSandboxView | None = Field(default=None, description="a Codex member "
                                                   "on this machine: its own sandbox")


class DoctorReport(_Doc):
    """``teamctl doctor [TEAMFILE] --json``."""

    runtimes: list[RuntimeRow]
    vision_catalog: VisionCatalogInfo
    home: str
    daemon_running: bool
    members: list[MemberLogin] = []
    sandbox: SandboxSupport | None = None


class HostRuntime(_Doc):
    runtime: str
    command: str = Field(description="what the host is asked for (a member's command, else "
                         "the default name)")
    found: bool
    path: str | None = None
    version: str | None = None


class HostCheck(_Doc):
    check: str = Field(description="a verb on a resource (RBAC), or 'secret NAME'")
    ok: bool
    detail: str


class HostReport(_Doc):
    """``teamctl doctor [TEAMFILE] --host NAME --json``: a member host, checked over SSH — or,
    ``kind`` kubernetes, its API server (``destination``), ``mode`` and ``checks``."""

    host: str
    kind: Literal["ssh", "kubernetes"] = "ssh"
    destination: str
    port: int | None = None
    reachable: bool
    error: ErrorDoc | None = None
    home: str | None = None
    python: str | None = None
    seconds: float | None = Field(default=None, description="the probe's round trip")
    runtimes: list[HostRuntime] = []
    namespace: str | None = None
    mode: Literal["sandbox", "pod"] | None = Field(
        default=None, description="kubernetes: an agent-sandbox Sandbox per member, or a Pod "
        "and its PVC where the cluster does not serve the CRD")
    checks: list[HostCheck] = Field(default=[], description="kubernetes: each verb teamctl "
                                    "needs as RBAC answers it, and the Secret named")


class WorktreeInfo(_Doc):
    team: str
    member: str
    path: str
    branch: str
    base: str
    missing: bool
    ahead: int = Field(description="commits on the branch that are not in the base")
    dirty: int = Field(description="tracked files changed and not committed")
    untracked: int
    diffstat: str = Field(description="git diff --shortstat against the base")
    running: bool


class KeptWorktree(_Doc):
    team: str
    member: str
    reason: str


class WorktreesDoc(_Doc):
    """``teamctl worktrees --json [--prune]``."""

    worktrees: list[WorktreeInfo]
    pruned: list[str] = Field(default=[], description="team/member of each removed worktree")
    kept: list[KeptWorktree] = []


class DiffDoc(_Doc):
    """``teamctl diff MEMBER --json``: the member's changes against its base."""

    team: str
    member: str
    base: str
    stat: bool
    text: str


class Receipt(_Doc):
    """``send_message``'s answer: queued, not delivered."""

    id: str
    to: str
    depth: int
    text: str


class MemberCard(_Doc):
    name: str
    runtime: str
    model: str | None
    sees_images: bool | None
    images_described: str | None = Field(
        default=None, description="'runtime:model' describing the images sent to this "
        "text-only member (describe_with)")
    launch: Launch
    readiness: Readiness
    you: bool


class TeamCard(_Doc):
    """``list_team``'s answer."""

    team: str
    members: list[MemberCard]


class MessageStatus(_Doc):
    """``message_status``'s answer."""

    id: str
    to: str
    state: DeliveryState
    reply: str | None
    error: str | None


class ThreadDoc(_Doc):
    """``teamctl thread ID --json``: the chain the message belongs to, in order."""

    chain_id: str
    messages: list[MessageDoc]


ApprovalState = Literal["pending", "approved", "denied", "answered", "expired"]


class ApprovalDoc(_Doc):
    """One request that waits (or waited) on the operator."""

    id: str
    team: str
    member: str
    runtime: str
    kind: Literal["permission", "question"]
    tool: str
    summary: str = Field(description="what it wants, redacted and whole (never cut): a "
                         "command, a path, a diff size")
    questions: list[str] = []
    sha256: str | None = Field(
        default=None, description="sha256 (hex) of the exact request the runtime asked: what "
        "a decision binds to (approve/deny/answer --sha256); null for a request journaled "
        "before teamctl kept it")
    message_id: str | None = Field(default=None, description="the delivery it arose in")
    state: ApprovalState
    answer: dict[str, Any] | None = Field(
        default=None, description="decision, always, message, text, by (operator or a rule)")
    reason: str | None = Field(default=None, description="why it expired")
    asked_at: float
    settled_at: float | None = None
    confirmed_at: float | None = Field(
        default=None, description="when the runtime confirmed it applied the answer")


class ApprovalsDoc(_Doc):
    """``teamctl approvals --json [--all]``: what waits (with ``--all``, the settled ones too),
    oldest first, one page of them (``--limit``, ``--offset``); ``total`` is how many there are
    in all; ``cursor`` is for ``-f`` (requests after it)."""

    approvals: list[ApprovalDoc]
    total: int = Field(default=0, description="how many match, beyond this page too")
    cursor: int = 0


class KeptRuleDoc(_Doc):
    """A rule ``approve --always`` kept for a member (docs/approvals.md)."""

    team: str
    member: str
    rule: str = Field(description="TOOL(PATTERN), as --revoke takes it")
    scope: str = Field(description="what it approves, as shown before it was kept")
    approval_id: str | None = Field(default=None, description="the request it was kept on")
    created_at: float
    revoked_at: float | None = None
    revoked_why: str | None = None


class KeptRulesDoc(_Doc):
    """``teamctl approvals --rules --json`` (the live rules; ``--all``: revoked ones too) and
    ``teamctl approvals --revoke RULE --json`` (what it revoked)."""

    rules: list[KeptRuleDoc]


class RulePreviewDoc(_Doc):
    """What ``approve --always`` would keep for a request, before it is kept."""

    rule: str
    scope: str


class DecisionDoc(_Doc):
    """``teamctl approve|deny|answer ID --json``: the settled request, and whether the
    runtime confirmed it applied the answer before the command returned."""

    approval: ApprovalDoc
    confirmed: bool
    rule: str | None = Field(default=None, description="the rule --always left for the member")
    scope: str | None = Field(default=None, description="what that rule approves")


class ChangesDoc(_Doc):
    """The ``changes`` call's answer (``status --watch``): the change counter's version."""

    version: int


class UiDoc(_Doc):
    """``teamctl ui --json``: the live view's address, with a one-time sign-in token."""

    url: str


class NotifyCheck(_Doc):
    """One leg of ``teamctl notify test``: a kind published, the round trip, the alerts."""

    what: str = Field(description="approval, question, fatal, budget, review, round trip, "
                      "alerts")
    ok: bool
    seconds: float | None = None
    detail: str = ""


class NotifyTestDoc(_Doc):
    """``teamctl notify test --json``: one of each configured kind sent, and the round trip
    (a test action posted to the response topic, verified and its receipt published)."""

    team: str
    server: str | None = Field(default=None, description="the ntfy server (null: no ntfy)")
    checks: list[NotifyCheck]


class UsageRow(_Doc):
    team: str
    group: str = Field(description="the member, the model or the day (YYYY-MM-DD), per --by")
    turns: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_output_tokens: int
    cost_usd: float = Field(description="the known part (see cost_unknown)")
    cost_unknown: int = Field(description="turns whose cost is unknown")
    lower_bound: str | None = Field(
        default=None, description="why these turns' figures leave API calls out (a lower "
        "bound); null: every call is counted")


class UsageDoc(_Doc):
    """``teamctl usage --json``: tokens and cost from the journal, grouped."""

    by: Literal["member", "model", "day"]
    rows: list[UsageRow]
    total_usd: float
    total_tokens: int


class PriceRow(_Doc):
    model: str
    input: float = Field(description="USD per million input tokens")
    cached_input: float
    output: float
    source: str


class PricesDoc(_Doc):
    """``teamctl usage --prices --json``: the vendored price table."""

    checked: str
    sources: dict[str, str]
    models: list[PriceRow]


class BudgetDoc(_Doc):
    """``teamctl budget --json``: a member's (or a team's) budget and spend after the change."""

    team: str
    member: str | None = Field(description="null: the whole team's budget")
    spend: Spend
    hold: str | None = None


class ExportedVariant(VariantDoc):
    """A document's rendered page in an export, its bytes inlined as its attachment's are."""

    data: str | None = Field(default=None, description="the page image's bytes, base64 (null "
                             "with --redact, or when the artifact is missing)")
    missing: bool = Field(default=False, description="the artifact is gone from the store, or "
                          "its bytes no longer match its sha256")


class ExportedAttachment(AttachmentRef):
    """An attachment in an export: its metadata, and the bytes that were sent, inlined (a
    document: the PDF or text sent natively, or its page-marked text and each page image)."""

    data: str | None = Field(
        default=None, description="the variant's bytes, base64 — the one place teamctl writes "
        "base64 (null with --redact, or when the artifact is missing)")
    missing: bool = Field(default=False, description="the artifact is gone from the store, or "
                          "its bytes no longer match its sha256")
    page_variants: list[ExportedVariant] = Field(  # type: ignore[assignment]
        default=[], description="the rendered pages sent as images (route pages), in order, "
        "each with its bytes")


class ExportedMessage(MessageDoc):
    attachments: list[ExportedAttachment] = []  # type: ignore[assignment]


class ExportedMember(_Doc):
    name: str
    runtime: str | None = None
    model: str | None = None
    messages: list[ExportedMessage]


class ExportDoc(_Doc):
    """``teamctl export``: whole conversations, standing alone (images inlined)."""

    format: Literal["teamctl-export"] = "teamctl-export"
    version: Literal[1] = 1
    team: str
    exported_at: str
    redacted: bool = Field(default=False, description="--redact: image bytes left out")
    members: list[ExportedMember]
    missing: list[str] = Field(default=[], description="sha256 of every image whose bytes "
                               "could not be inlined (its metadata is kept)")


# -- the board (docs/board.md) ----------------------------------------------------------------

TaskStatus = Literal["pending", "in_progress", "review", "done", "failed", "cancelled"]
# what a task is shown as: a pending one is ready (every dependency done) or blocked
TaskState = Literal["ready", "blocked", "in_progress", "review", "done", "failed", "cancelled"]


_JOURNALED: dict[TaskState, TaskStatus] = {
    "ready": "pending", "blocked": "pending", "in_progress": "in_progress", "review": "review",
    "done": "done", "failed": "failed", "cancelled": "cancelled"}


class TaskDoc(_Doc):
    """One board task (``teamctl task add|assign|release|cancel|deps --json``)."""

    id: TaskRef = Field(description="T3, as every output names it")
    team: str
    title: str
    body: str
    role: str | None = Field(description="only a member of this role may claim it")
    priority: int = Field(description="higher first")
    state: TaskState = Field(description="the one state: a pending task is ready or blocked")
    owner: str | None = Field(description="who holds it (a pending one: assigned, waiting)")
    epoch: int | None = Field(description="which launch of the owner holds it")
    lease_until: float | None = Field(description="its owner's process ended: released to "
                                      "pending at this time unless the owner comes back")
    blocked_by: list[TaskRef] = Field(description="the dependencies not done yet")
    blocked: str | None = Field(description="what blocks it, in words (a failed or "
                                "cancelled dependency said so)")
    check: str | None = Field(description="the gate command to pass before done")
    created_by: str
    summary: str | None
    evidence: str | None
    created_at: float
    updated_at: float

    @property
    def status(self) -> TaskStatus:
        """As journaled: ``ready`` and ``blocked`` are both ``pending`` (the daemon's own
        transitions read it; no output carries it beside ``state``)."""
        return _JOURNALED[self.state]


class TaskListDoc(_Doc):
    """``teamctl task list --json``: one page, oldest first."""

    team: str
    tasks: list[TaskDoc]
    total: int = Field(description="tasks matching the filter, every page")
    next_after: TaskRef | None = Field(description="--after for the next page (null: the "
                                       "last)")


class TaskEventDoc(_Doc):
    at: float
    actor: str = Field(description="the operator or a member")
    kind: str = Field(description="created, assigned, claimed, updated, released, lapsed, "
                      "adopted, deps, completed, failed, cancelled")
    note: str | None


class TaskShowDoc(_Doc):
    """``teamctl task show ID --json``: the task, its edges and its lifetime."""

    task: TaskDoc
    depends_on: list[TaskRef]
    dependents: list[TaskRef]
    events: list[TaskEventDoc]


DOCUMENTS: dict[str, type[BaseModel]] = {
    "status": StatusDoc,
    "launch": LaunchResult,
    "history": HistoryDoc,
    "send": SendResult,
    "dry-run": DryRunPlan,
    "refusal": Refusal,
    "error": ErrorReply,
    "rpc-error": WireError,
    "logs": LogEvent,
    "doctor": DoctorReport,
    "doctor-host": HostReport,
    "stop": StopResult,
    "restart": RestartResult,
    "worktrees": WorktreesDoc,
    "diff": DiffDoc,
    "thread": ThreadDoc,
    "approvals": ApprovalsDoc,
    "decision": DecisionDoc,
    "approval-rules": KeptRulesDoc,
    "rule-preview": RulePreviewDoc,
    "ui": UiDoc,
    "usage": UsageDoc,
    "prices": PricesDoc,
    "budget": BudgetDoc,
    "export": ExportDoc,
    "task": TaskDoc,
    "tasks": TaskListDoc,
    "task-show": TaskShowDoc,
    "notify-test": NotifyTestDoc,
}
