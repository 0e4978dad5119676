"""The one redactor: no data URL, base64 run, API key or bearer token survives it."""

from __future__ import annotations

import base64
import re
import string

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.diagnostics import redact_event
from orchestrator.redaction import add_secrets, redact, redact_value

_TOKEN = st.text(string.ascii_letters + string.digits + "_-", min_size=16, max_size=64)
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*")
_NOISE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80)


@given(prefix=_NOISE, suffix=_NOISE, data=st.binary(min_size=60, max_size=4000),
       mime=st.sampled_from(["image/png", "image/jpeg", "image/webp", "application/pdf"]))
def test_no_data_url_survives(prefix: str, suffix: str, data: bytes, mime: str) -> None:
    payload = base64.b64encode(data).decode()
    out = redact(f"{prefix}data:{mime};base64,{payload}{suffix}")
    assert payload not in out
    assert f"data:{mime};base64," not in out


@given(prefix=_NOISE, suffix=_NOISE, data=st.binary(min_size=60, max_size=4000))
def test_no_long_base64_run_survives(prefix: str, suffix: str, data: bytes) -> None:
    payload = base64.b64encode(data).decode()
    out = redact(f"{prefix} {payload} {suffix}")
    assert payload not in out


@given(prefix=_NOISE, token=_TOKEN,
       kind=st.sampled_from(["sk-ant-api03-", "sk-or-v1-", "sk-proj-", "sk-", "ghp_",
                             "github_pat_11A"]))
def test_no_api_key_survives(prefix: str, token: str, kind: str) -> None:
    secret = kind + token
    out = redact(f"{prefix} {secret} trailing")
    assert secret not in out
    assert token not in out or token in prefix


@given(token=_TOKEN, style=st.sampled_from([
    "Authorization: Bearer {t}", "authorization={t}", '"Authorization": "Basic {t}"',
    "Bearer {t}", "OPENAI_API_KEY={t}", "ANTHROPIC_API_KEY: {t}", '"x-api-key": "{t}"',
    "OPENCODE_SERVER_PASSWORD={t}",
]))
def test_no_bearer_or_header_value_survives(token: str, style: str) -> None:
    assert token not in redact(style.format(t=token))


def test_safe_fields_stay_readable() -> None:
    digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    line = f"mime=image/png width=1568 height=882 sha256={digest} member=lead code=runtime_exited"
    assert redact(line) == line


def test_redact_value_walks_nested_events() -> None:
    event = {"event": "x", "env": {"ANTHROPIC_API_KEY": "sk-ant-abcdefgh"},
             "lines": ["Bearer abcdefghijklmnop"], "count": 3}
    out = redact_value(event)
    assert "sk-ant-abcdefgh" not in str(out) and "abcdefghijklmnop" not in str(out)
    assert out["count"] == 3
    assert redact_event(None, "info", event) == out


@given(token=_TOKEN, shape=st.sampled_from([
    "AKIA{T16}", "AIza{t}{t}", "xoxb-{t}", "glpat-{t}", "npm_{t}", "hf_{t}",
    "eyJ{t}.{t}.{t}", "https://user:{t}@example.com/repo.git", "PRIVATE_KEY={t}",
    "db_password: {t}", "CREDENTIALS={t}", "-----BEGIN RSA PRIVATE KEY-----\n{t}\n",
]))
def test_every_known_secret_shape_is_redacted(token: str, shape: str) -> None:
    upper16 = (token.upper().replace("-", "A").replace("_", "B") + "X" * 16)[:16]
    text = shape.format(t=token, T16=upper16)
    secret = upper16 if "{T16}" in shape else token
    assert secret not in redact(f"before {text} after")


def test_registered_literal_secrets_are_redacted_whatever_their_shape() -> None:
    add_secrets(["plain-looking-value-42", "abc"])  # too short values are ignored
    out = redact("the value plain-looking-value-42 and abc stay apart")
    assert "plain-looking-value-42" not in out and " abc " in out


def test_a_credential_named_field_is_replaced_whole() -> None:
    out = redact_value({"SERVICE_TOKEN": "no shape at all", "name": "lead", "tokens": 12})
    assert out == {"SERVICE_TOKEN": "[REDACTED]", "name": "lead", "tokens": 12}


def test_long_runs_of_name_characters_are_scanned_once() -> None:
    """The assignment pattern backtracked quadratically over long runs of name characters
    (minutes for this text; the per-test timeout catches a return of it)."""
    text = "key " + "x_" * 200_000 + "=value"
    assert redact(text).endswith("=value")
    assert redact(text + " API_KEY=hunter22").endswith("API_KEY=[REDACTED]")


def test_a_secret_added_after_a_short_text_was_redacted_is_still_redacted_in_it() -> None:
    """Short texts (names, ids, states) are redacted once and remembered — a literal secret
    registered later (a member launched with a new credential) still never passes through a
    remembered result."""
    text = "token=short tail qz7-late-literal-9f"
    assert "qz7-late-literal-9f" in redact(text)
    add_secrets(["qz7-late-literal-9f"])
    assert "qz7-late-literal-9f" not in redact(text)
    assert "qz7-late-literal-9f" not in redact_value({"note": text})


# -- values, never teamctl's own words (issue 45) -----------------------------------------------

def test_a_secret_that_names_a_kubernetes_secret_is_shown_as_written() -> None:
    """``secret = "claude-key"`` in a [hosts.NAME] table names a Secret object (an RFC 1123
    label, never a value: config.py); teamctl's fix text that quotes it stays readable."""
    fix = 'name a Secret with its API key (secret = "claude-key" in [hosts.k8s])'
    assert redact(fix) == fix


def test_the_placeholders_of_teamctls_fix_text_are_not_values() -> None:
    """What teamctl tells the operator to type — ``...``, ``…``, ``<KEY>``, ``$VAR`` — holds no
    secret: shown as written, not ``[REDACTED]``."""
    for fix in ("kubectl -n agents create secret generic claude-key "
                "--from-literal=ANTHROPIC_API_KEY=...",
                "name a Secret with its API key (secret = ... in [hosts.k8s])",
                "set ANTHROPIC_API_KEY=… in the member's env",
                "export OPENAI_API_KEY=$OPENAI_API_KEY, or OPENAI_API_KEY=${KEY}",
                "set GITHUB_TOKEN=<your token> in env"):
        assert redact(fix) == fix, fix


def test_a_path_is_never_taken_for_a_credential_name_or_value() -> None:
    """``~/.aws/credentials`` is a path: neither it nor the word after it is a secret
    (``cannot read ~/.aws/credentials: Permission denied`` stayed unreadable)."""
    for line in ("cannot read ~/.aws/credentials: Permission denied",
                 "/home/op/.git-credentials: No such file or directory",
                 "hidden: ~/.aws/credentials, ~/.config/git/credentials",
                 "GOOGLE_APPLICATION_CREDENTIALS=~/.config/gcloud/key.json"):
        assert redact(line) == line, line


@given(token=_TOKEN, shape=st.sampled_from([
    'secret = "{t}"', "secret: {t}", "secret={t}", "client_secret = \"{t}\"",
    "X-Auth-Token: {t}", "https://api.example.com/v1?access_token={t}",
    "AWS_SECRET_ACCESS_KEY=/{t}/{t}", "API_KEY=...{t}", "PASSWORD=${t}",
]))
def test_values_next_to_the_exceptions_are_still_redacted(token: str, shape: str) -> None:
    """The exceptions are narrow: a Secret's name only as ``secret = "label"`` (a label: no
    capitals, no underscore: a token that happens to be one is shown), a placeholder only whole
    (``$NAME`` in capitals), a path only from ``~/`` or a name inside one."""
    text = shape.format(t=token)
    if shape == 'secret = "{t}"' and _LABEL.fullmatch(token):
        return  # an RFC 1123 label: the name of a Secret object, by the rule above
    if shape == "PASSWORD=${t}" and _VARIABLE.fullmatch(token):
        return  # $NAME: a shell variable's name, what teamctl's fix text tells you to write
    assert token not in redact(f"before {text} after")
