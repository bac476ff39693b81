"""Redaction: keys that name secrets, seen secret values, key-shaped tokens; and size caps."""

from __future__ import annotations

import json

import pytest

from agenttrace._internal.caps import capped_json, truncate_utf8
from agenttrace._internal.redact import (
    REDACTED,
    is_secret_key,
    redact,
    remember_environment_secrets,
    remember_secret,
    scrub_text,
)


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "Authorization",
        "x-api-key",
        "x-openai-api-key",
        "x-slack-signature",
        "password",
        "db_password",
        "token",
        "access_token",
        "GITHUB_TOKEN",
        "client_secret",
        "aws_secret_access_key",
        "Cookie",
        "private_key",
        "OPENAI_API_KEY",
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "session",
        "session_id",
        "max_tokens",
        "prompt_tokens",
        "input_tokens",
        "tokenizer",
        "author",
        "keyboard",
        "monkey",
        "model",
        "messages",
        "passage",
        "PWD",
        "OLDPWD",
    ],
)
def test_ordinary_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_redact_nested_and_remembered_values() -> None:
    remember_secret("sk-remembered-value-123")
    data = {
        "headers": {"Authorization": "Bearer abcdefghijklmnop", "Accept": "json"},
        "config": [{"password": "hunter2", "user": "ann"}],
        "text": "key sk-remembered-value-123 in text",
        "session": "keep me",
        "max_tokens": 5,
    }
    clean = redact(data)
    assert clean["headers"] == {"Authorization": REDACTED, "Accept": "json"}
    assert clean["config"] == [{"password": REDACTED, "user": "ann"}]
    assert clean["text"] == f"key {REDACTED} in text"
    assert clean["session"] == "keep me" and clean["max_tokens"] == 5
    assert data["config"][0]["password"] == "hunter2"  # the input is not modified


def test_scrub_text_shapes() -> None:
    assert (
        scrub_text("Authorization: Bearer abc.def-ghi_jkl") == f"Authorization: Bearer {REDACTED}"
    )
    assert scrub_text("key=sk-proj-AAAAAAAAAAAAAAAAAAAAAAAAAAAA done") == f"key={REDACTED} done"
    assert scrub_text("short sk-1 stays") == "short sk-1 stays"


def test_environment_secrets_are_remembered() -> None:
    remember_environment_secrets({"MY_SERVICE_TOKEN": "env-secret-value-77", "HOME": "/root"})
    assert scrub_text("got env-secret-value-77 and /root") == f"got {REDACTED} and /root"


def test_truncate_utf8_never_splits_a_character() -> None:
    text = "é" * 100
    marker = "…[truncated, 200 bytes]"
    cut = truncate_utf8(text, len(marker.encode()) + 11)  # the marker counts towards the cap
    assert cut == "é" * 5 + marker
    assert truncate_utf8("short", 100) == "short"


def test_capped_json_stays_valid_json() -> None:
    value = [{"role": "user", "content": "x" * 10000}, {"role": "assistant", "content": "ok"}]
    text = capped_json(value, 500)
    assert len(text.encode()) <= 500
    parsed = json.loads(text)
    assert parsed[1] == {"role": "assistant", "content": "ok"}
    assert parsed[0]["content"].startswith("xxx") and "chars]" in parsed[0]["content"]
