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
    scrub_json_text,
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


CREDENTIAL_PARAMETERS = [
    "key",
    "Key",
    "api_key",
    "apikey",
    "API_KEY",
    "token",
    "access_token",
    "refresh_token",
    "sig",
    "signature",
    "password",
    "secret",
    "client_secret",
    "X-Amz-Signature",
    "X-Amz-Credential",
    "X-Amz-Security-Token",
    "auth",
    "subscription-key",
    "jwt",
]


@pytest.mark.parametrize("name", CREDENTIAL_PARAMETERS)
def test_url_parameters_that_carry_credentials_are_scrubbed(name: str) -> None:
    text = f"GET https://h.example/v1/x?page=2&{name}=S3cr3t%2Fv4lue&x=1#top failed"
    expected = f"GET https://h.example/v1/x?page=2&{name}={REDACTED}&x=1#top failed"
    assert scrub_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://h/?key=S3CRET", f"https://h/?key={REDACTED}"),
        (
            "https://h/cb#access_token=S3CRET&token_type=bearer",
            f"https://h/cb#access_token={REDACTED}&token_type=bearer",
        ),
        ("https://ann:S3CRET@h.example/x?y=1", f"https://{REDACTED}@h.example/x?y=1"),
        ("postgres://S3CRET@db:5432/app", f"postgres://{REDACTED}@db:5432/app"),
        (
            "https://h/login?next=https://i/?key=S3CRET&x=1",
            f"https://h/login?next=https://i/?key={REDACTED}&x=1",
        ),
        ('<a href="/x?a=1&amp;token=S3CRET">', f'<a href="/x?a=1&amp;token={REDACTED}">'),
        ("/x?a=1\\u0026sig=S3CRET\\u0026b=2", f"/x?a=1\\u0026sig={REDACTED}\\u0026b=2"),
        # httpx's error names the URL in quotes: a credential that ends it eats the quote.
        (
            "Client error '403' for url 'https://h/v1?x=1&key=S3CRET'",
            f"Client error '403' for url 'https://h/v1?x=1&key={REDACTED}",
        ),
    ],
)
def test_credentials_anywhere_in_a_url_are_scrubbed(text: str, expected: str) -> None:
    assert scrub_text(text) == expected
    assert scrub_text(expected) == expected  # scrubbing again changes nothing


@pytest.mark.parametrize("level", [1, 2, 3])
def test_urls_inside_json_are_scrubbed_at_any_depth(level: int) -> None:
    value: object = {"url": "https://h/v1?key=S3CRET&x=1", "password": 'p"w\\d'}
    for _ in range(level):
        value = json.dumps(value)
    clean = scrub_json_text(str(value))
    assert "S3CRET" not in clean and "p\\" not in clean.replace("\\\\", "")
    for _ in range(level):
        clean = json.loads(clean)
    assert clean == {"url": f"https://h/v1?key={REDACTED}&x=1", "password": REDACTED}


@pytest.mark.parametrize(
    "text",
    [
        "https://h.example/search?q=cats&page=2&sort_key=name&max_tokens=5&session=abc&monkey=1",
        "what is key=value? a=b, token = word",
        "http://[::1]:8080/x and git@github.com:org/repo.git and ann@example.com",
        "https://h/?key=&x=1",
        f"https://h/?key={REDACTED}&x=1",
    ],
)
def test_other_parameters_and_text_are_left_alone(text: str) -> None:
    assert scrub_text(text) == text


def test_a_secret_key_whose_string_is_cut_off_takes_nothing_past_it() -> None:
    """Found by hypothesis: ``"password": "`` at the end of a string is no pair to replace, and
    the quotes after it belong to other strings."""
    text = json.dumps(['"password": "', '"\\"x\\""'])
    assert scrub_json_text(text) == text
