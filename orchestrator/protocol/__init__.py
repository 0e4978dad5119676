"""The control protocol's one table: every method the daemon serves, what it takes, what it
answers, and who may call it.

A row is ``Method(name, params, result, caller)``; ``params`` and ``result`` name pydantic
models as ``"family.Model"`` strings (the modules beside this one, one per family: board,
approvals, costs, …), so this module is standard library only — the CLI imports it at start and
calls by these rows (``call(home, protocol.STATUS, …)``), and loading it loads no pydantic.
The daemon builds its dispatch from the table (``daemon/control/_api.py``: one handler per row,
a handler for no row refused at start), resolving the models with ``model``; a member's own
socket reaches only ``caller="member"`` rows. ``DOCUMENTS`` names every JSON document
``--json`` prints (``teamctl schema``, docs/json.md). A new command: docs/dev/new-command.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "ACCOUNTS",
    "ANSWER",
    "APPROVALS",
    "APPROVAL_RULES",
    "APPROVE",
    "BUDGET",
    "CHANGES",
    "DENY",
    "DIFF",
    "DOCUMENTS",
    "EXPORT",
    "HISTORY",
    "INTEGRATE",
    "LAUNCH",
    "MEMBER_LIST_TEAM",
    "MEMBER_MESSAGE_STATUS",
    "MEMBER_SEND_MESSAGE",
    "MEMBER_TASKS",
    "MEMBER_TOOLS_LISTED",
    "METHODS",
    "NOTIFY_TEST",
    "PING",
    "QUEUE",
    "RESTART",
    "REVOKE_RULE",
    "SEND",
    "STATUS",
    "STOP",
    "TASK_ADD",
    "TASK_ASSIGN",
    "TASK_CANCEL",
    "TASK_DEPS",
    "TASK_DONE",
    "TASK_LIST",
    "TASK_RELEASE",
    "TASK_REVIEW",
    "TASK_SHOW",
    "THREAD",
    "TRACE",
    "UI",
    "USAGE",
    "WORKTREES",
    "Caller",
    "Method",
    "by_name",
    "model",
]

Caller = Literal["operator", "member"]


class Method(NamedTuple):
    """One control method. ``result``: the documents it may answer (``send`` answers a dry
    run's plan or a send's result). ``caller="member"``: a member's MCP server calls it with
    the member's token, the only kind a member's own socket serves."""

    name: str
    params: str
    result: tuple[str, ...]
    caller: Caller = "operator"


_ROWS: list[Method] = []


def _row(name: str, params: str, *result: str, caller: Caller = "operator") -> Method:
    """A row, entered in the table in the order written here."""
    row = Method(name, params, result, caller)
    _ROWS.append(row)
    return row


# -- teams: launch, status, restart, stop -------------------------------------------------------
PING = _row("ping", "common.EmptyParams", "teams.Ping")
LAUNCH = _row("launch", "teams.LaunchParams", "teams.TeamStatus")
STATUS = _row("status", "common.TeamParams", "teams.StatusDoc")
RESTART = _row("restart", "common.MemberParams", "teams.RestartResult")
STOP = _row("stop", "common.TeamParams", "teams.StopResult")
# -- messages ---------------------------------------------------------------------------------
SEND = _row("send", "messages.SendParams", "messages.SendResult", "messages.DryRunPlan")
HISTORY = _row("history", "messages.HistoryParams", "messages.HistoryDoc")
THREAD = _row("thread", "messages.ThreadParams", "messages.ThreadDoc")
TRACE = _row("trace", "traces.TraceParams", "traces.TraceDoc")
EXPORT = _row("export", "export.ExportParams", "export.ExportDoc")
# -- worktrees --------------------------------------------------------------------------------
WORKTREES = _row("worktrees", "worktrees.WorktreesParams", "worktrees.WorktreesDoc")
DIFF = _row("diff", "worktrees.DiffParams", "worktrees.DiffDoc")
# -- approvals --------------------------------------------------------------------------------
APPROVALS = _row("approvals", "approvals.ApprovalsParams", "approvals.ApprovalsDoc")
APPROVAL_RULES = _row("approval_rules", "approvals.ApprovalRulesParams",
                      "approvals.KeptRulesDoc")
REVOKE_RULE = _row("revoke_rule", "approvals.RevokeRuleParams", "approvals.KeptRulesDoc")
APPROVE = _row("approve", "approvals.ApproveParams", "approvals.DecisionDoc",
               "approvals.RulePreviewDoc")
DENY = _row("deny", "approvals.DenyParams", "approvals.DecisionDoc")
ANSWER = _row("answer", "approvals.AnswerParams", "approvals.DecisionDoc")
# -- the live view and its change feed --------------------------------------------------------
UI = _row("ui", "live.UiParams", "live.UiDoc")
CHANGES = _row("changes", "live.ChangesParams", "live.ChangesDoc")
# -- costs ------------------------------------------------------------------------------------
USAGE = _row("usage", "costs.UsageParams", "costs.UsageDoc", "costs.PricesDoc")
BUDGET = _row("budget", "costs.BudgetParams", "costs.BudgetDoc")
ACCOUNTS = _row("accounts", "quota.AccountsParams", "quota.AccountsDoc")
# -- notify -----------------------------------------------------------------------------------
NOTIFY_TEST = _row("notify_test", "notify.NotifyTestParams", "notify.NotifyTestDoc")
# -- the board, as the operator reaches it (teamctl task) -------------------------------------
TASK_ADD = _row("task_add", "board.TaskAddParams", "board.TaskDoc")
TASK_LIST = _row("task_list", "board.TaskListParams", "board.TaskListDoc")
TASK_SHOW = _row("task_show", "board.TaskIdParams", "board.TaskShowDoc")
TASK_ASSIGN = _row("task_assign", "board.TaskAssignParams", "board.TaskDoc")
TASK_RELEASE = _row("task_release", "board.TaskReasonParams", "board.TaskDoc")
TASK_CANCEL = _row("task_cancel", "board.TaskReasonParams", "board.TaskDoc")
TASK_DEPS = _row("task_deps", "board.TaskDepsParams", "board.TaskDoc")
TASK_REVIEW = _row("task_review", "board.TaskReviewParams", "board.TaskDoc")
TASK_DONE = _row("task_done", "board.TaskDoneParams", "board.TaskDoc")
# -- the merge queue (teamctl queue, teamctl integrate) ---------------------------------------
QUEUE = _row("queue", "land.QueueParams", "land.QueueDoc")
INTEGRATE = _row("integrate", "land.IntegrateParams", "land.QueueEntryDoc")
# -- a member's MCP server (teamctl mcp): it acts as the member its token names ---------------
MEMBER_SEND_MESSAGE = _row("member.send_message", "members.MemberSendParams",
                           "members.Receipt", caller="member")
MEMBER_LIST_TEAM = _row("member.list_team", "common.TokenParams", "members.TeamCard",
                        caller="member")
MEMBER_MESSAGE_STATUS = _row("member.message_status", "members.MemberStatusParams",
                             "members.MessageStatus", caller="member")
MEMBER_TOOLS_LISTED = _row("member.tools_listed", "common.TokenParams",
                           "members.ToolsListedAck", caller="member")
# the board's MCP tools: tool ``task_x`` calls ``member.task_x`` (daemon/mcp/_tasks.py)
MEMBER_TASKS = {
    row.name.removeprefix("member."): row for row in (
        _row("member.task_list", "member_tasks.ListParams", "board.TaskListDoc",
             caller="member"),
        _row("member.task_get", "member_tasks.IdParams", "board.TaskShowDoc", caller="member"),
        _row("member.task_create", "member_tasks.CreateParams", "board.TaskDoc",
             caller="member"),
        _row("member.task_claim", "member_tasks.ClaimParams", "board.TaskDoc",
             caller="member"),
        _row("member.task_update", "member_tasks.NoteParams", "board.TaskDoc",
             caller="member"),
        _row("member.task_complete", "member_tasks.CompleteParams", "board.TaskDoc",
             caller="member"),
        _row("member.task_release", "member_tasks.ReleaseParams", "board.TaskDoc",
             caller="member"),
        _row("member.task_review", "member_tasks.ReviewParams", "board.TaskDoc",
             caller="member"),
    )}

METHODS: tuple[Method, ...] = tuple(_ROWS)

# every JSON document a command prints with --json: ``teamctl schema NAME`` (docs/json.md)
DOCUMENTS: dict[str, str] = {
    "status": "teams.StatusDoc",
    "launch": "teams.LaunchResult",
    "history": "messages.HistoryDoc",
    "send": "messages.SendResult",
    "dry-run": "messages.DryRunPlan",
    "refusal": "failures.Refusal",
    "error": "failures.ErrorReply",
    "rpc-error": "failures.WireError",
    "logs": "doctor.LogEvent",
    "doctor": "doctor.DoctorReport",
    "doctor-host": "doctor.HostReport",
    "stop": "teams.StopResult",
    "restart": "teams.RestartResult",
    "worktrees": "worktrees.WorktreesDoc",
    "diff": "worktrees.DiffDoc",
    "thread": "messages.ThreadDoc",
    "trace": "traces.TraceDoc",
    "approvals": "approvals.ApprovalsDoc",
    "decision": "approvals.DecisionDoc",
    "approval-rules": "approvals.KeptRulesDoc",
    "rule-preview": "approvals.RulePreviewDoc",
    "ui": "live.UiDoc",
    "usage": "costs.UsageDoc",
    "prices": "costs.PricesDoc",
    "budget": "costs.BudgetDoc",
    "accounts": "quota.AccountsDoc",
    "export": "export.ExportDoc",
    "task": "board.TaskDoc",
    "tasks": "board.TaskListDoc",
    "task-show": "board.TaskShowDoc",
    "notify-test": "notify.NotifyTestDoc",
    "queue": "land.QueueDoc",
    "queue-entry": "land.QueueEntryDoc",
}

_BY_NAME = {method.name: method for method in METHODS}


def by_name(name: str) -> Method | None:
    """The row of the method called ``name``, if the daemon serves one."""
    return _BY_NAME.get(name)


def model(ref: str) -> type[BaseModel]:
    """The pydantic model a row names (``"board.TaskDoc"``): its family module is imported
    now, the first time it is asked for — never by the CLI's start."""
    family, _, name = ref.partition(".")
    found: type[BaseModel] = getattr(
        importlib.import_module(f"{__name__}.{family}"), name)
    return found
