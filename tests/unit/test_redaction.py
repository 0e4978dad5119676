"""The one redactor: no data URL, base64 run, API key or bearer token survives it."""

from __future__ import annotations

import base64
import string

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.diagnostics import redact_event
from orchestrator.redaction import add_secrets, redact, redact_value

_TOKEN = st.text(string.ascii_letters + string.digits + "_-", min_size=16, max_size=64)
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
