"""The approvals queue (``approvals``, ``approve``, ``deny``, ``answer``, ``approval_rules``,
``revoke_rule``; docs/approvals.md): a request, a page of them, a kept rule, a decision, and
their params (a decision names the request's sha256 as the operator read it).
"""

from typing import Any, Literal

from pydantic import Field

from orchestrator.limits import (
    APPROVAL_ID_PATTERN,
    APPROVAL_SHA256_PATTERN,
    MAX_PAGE_ROWS,
    MAX_SEQ,
    NAME_PATTERN,
)
from orchestrator.protocol.common import Doc, Params, TeamParams

__all__ = [
    "AnswerParams", "ApprovalDoc", "ApprovalRulesParams", "ApprovalState", "ApprovalsDoc",
    "ApprovalsParams", "ApproveParams", "DecisionDoc", "DecisionParams", "DenyParams",
    "KeptRuleDoc", "KeptRulesDoc", "RevokeRuleParams", "RulePreviewDoc",
]


ApprovalState = Literal["pending", "approved", "denied", "answered", "expired"]


class ApprovalDoc(Doc):
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


class ApprovalsDoc(Doc):
    """``teamctl approvals --json [--all]``: what waits (with ``--all``, the settled ones too),
    oldest first, one page of them (``--limit``, ``--offset``); ``total`` is how many there are
    in all; ``cursor`` is for ``-f`` (requests after it)."""

    approvals: list[ApprovalDoc]
    total: int = Field(default=0, description="how many match, beyond this page too")
    cursor: int = 0


class KeptRuleDoc(Doc):
    """A rule ``approve --always`` kept for a member (docs/approvals.md)."""

    team: str
    member: str
    rule: str = Field(description="TOOL(PATTERN), as --revoke takes it")
    scope: str = Field(description="what it approves, as shown before it was kept")
    approval_id: str | None = Field(default=None, description="the request it was kept on")
    created_at: float
    revoked_at: float | None = None
    revoked_why: str | None = None


class KeptRulesDoc(Doc):
    """``teamctl approvals --rules --json`` (the live rules; ``--all``: revoked ones too) and
    ``teamctl approvals --revoke RULE --json`` (what it revoked)."""

    rules: list[KeptRuleDoc]


class RulePreviewDoc(Doc):
    """What ``approve --always`` would keep for a request, before it is kept."""

    rule: str
    scope: str


class DecisionDoc(Doc):
    """``teamctl approve|deny|answer ID --json``: the settled request, and whether the
    runtime confirmed it applied the answer before the command returned."""

    approval: ApprovalDoc
    confirmed: bool
    rule: str | None = Field(default=None, description="the rule --always left for the member")
    scope: str | None = Field(default=None, description="what that rule approves")


class ApprovalsParams(TeamParams):
    id: str | None = Field(default=None, pattern=APPROVAL_ID_PATTERN)  # that one request
    all: bool = False
    after: int = Field(default=0, ge=0, le=MAX_SEQ)
    wait: float = Field(default=0.0, ge=0, le=25.0, allow_inf_nan=False)
    limit: int = Field(default=MAX_PAGE_ROWS, ge=1, le=MAX_PAGE_ROWS)
    offset: int = Field(default=0, ge=0, le=MAX_SEQ)


class ApprovalRulesParams(TeamParams):
    member: str | None = Field(default=None, pattern=NAME_PATTERN)
    all: bool = False


class RevokeRuleParams(TeamParams):
    member: str | None = Field(default=None, pattern=NAME_PATTERN)
    rule: str = Field(min_length=1, max_length=600)


class DecisionParams(Params):
    id: str = Field(pattern=APPROVAL_ID_PATTERN)
    # the request's sha256 (or its start) as the operator read it: another request's is refused
    sha256: str | None = Field(default=None, pattern=APPROVAL_SHA256_PATTERN)


class ApproveParams(DecisionParams):
    always: bool = False
    preview: bool = False  # --always: what would be kept, nothing settled
    rule: str | None = Field(default=None, max_length=600)  # the rule the operator was shown


class DenyParams(DecisionParams):
    message: str | None = Field(default=None, max_length=10_000)


class AnswerParams(DecisionParams):
    text: str = Field(min_length=1, max_length=100_000)
