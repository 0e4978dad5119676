"""Claude's permission prompts (``--permission-prompt-tool stdio``) as approval requests, and
the operator's answers as their ``control_response`` (protocols/teammates.md §1.4, §1.6).

A prompt is a ``can_use_tool`` control request: ``tool_name``, ``input``, the CLI's own
``permission_suggestions``. ``AskUserQuestion`` arrives the same way and is a question: its
answer is an allow whose ``updatedInput`` carries ``answers`` keyed by the question's text.
``--always`` adds the CLI's ``addRules`` suggestions for the session (never its
``localSettings`` destination, which would write into the member's worktree).
"""

from __future__ import annotations

from typing import Any

from orchestrator.contracts import ApprovalAnswer, ApprovalRequest

__all__ = ["QUESTION_TOOL", "control_answer", "request_of"]

QUESTION_TOOL = "AskUserQuestion"
_PATH_KEYS = ("file_path", "notebook_path", "path")


def request_of(request: dict[str, Any]) -> ApprovalRequest:
    """The approval request for one ``can_use_tool`` control request's ``request`` body."""
    tool = str(request.get("tool_name") or "?")
    tool_input = request.get("input") if isinstance(request.get("input"), dict) else {}
    assert isinstance(tool_input, dict)
    if tool == QUESTION_TOOL:
        questions = tuple(str(q.get("question") or "") for q in tool_input.get("questions") or []
                          if isinstance(q, dict))
        return ApprovalRequest("question", tool, " | ".join(questions), questions, request)
    if isinstance(tool_input.get("command"), str):
        return ApprovalRequest("permission", tool, tool_input["command"], asked=request)
    path = next((tool_input[k] for k in _PATH_KEYS if isinstance(tool_input.get(k), str)), None)
    if path is not None:
        size = next((len(str(tool_input[k]).splitlines()) for k in ("content", "new_string")
                     if isinstance(tool_input.get(k), str)), None)
        return ApprovalRequest("permission", tool,
                               path + (f" (+{size} lines)" if size is not None else ""),
                               asked=request)
    return ApprovalRequest("permission", tool, str(request.get("description") or tool_input),
                           asked=request)


def control_answer(request_id: Any, request: dict[str, Any], answer: ApprovalAnswer
                   ) -> dict[str, Any]:
    """The ``control_response`` line that applies ``answer`` to the prompt."""
    tool_input = request.get("input") if isinstance(request.get("input"), dict) else {}
    if answer.decision == "deny":
        body: dict[str, Any] = {"behavior": "deny", "message": answer.message or
                                "The operator denied this; do not retry it, ask or do "
                                "something else."}
    elif answer.decision == "answer":
        questions = [str(q.get("question") or "") for q in
                     (tool_input or {}).get("questions") or [] if isinstance(q, dict)]
        body = {"behavior": "allow", "updatedInput": {
            **(tool_input or {}), "answers": {q: answer.text or "" for q in questions}}}
    else:
        body = {"behavior": "allow", "updatedInput": tool_input or {}}
        if answer.always:
            rules = [dict(s, destination="session") for s in
                     request.get("permission_suggestions") or []
                     if isinstance(s, dict) and s.get("type") == "addRules"]
            if rules:
                body["updatedPermissions"] = rules
    return {"type": "control_response", "response": {
        "subtype": "success", "request_id": request_id, "response": body}}
