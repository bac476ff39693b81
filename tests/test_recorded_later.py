"""A tool's arguments and result that cannot change are recorded off the caller's path: the
figures on the span are the ones serialising them at once gave, and so is the saved text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import agenttrace
from agenttrace import semconv as sc
from agenttrace._internal.later import RecordedLater, json_length, recorded_text
from agenttrace._internal.redact import recorded_json
from agenttrace.formats.session.files import read_session_file, snapshot_path

from .conftest import Traced

SCALARS = (
    st.text()
    | st.integers(min_value=-(10**18) + 1, max_value=10**18 - 1)
    | st.floats()
    | st.booleans()
    | st.none()
)
IMMUTABLE = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300)
@given(IMMUTABLE)
def test_the_length_measured_is_that_of_the_json_recorded(value: Any) -> None:
    assert json_length(value) == len(json.dumps(value, ensure_ascii=False))


def test_what_can_change_or_is_not_plain_json_is_not_measured() -> None:
    class Text(str):
        pass

    for value in ([1], {1: 2}, {"a": [1]}, (1, [2]), 10**18, Text("x"), b"x", object()):
        assert json_length(value) is None


@given(IMMUTABLE)
def test_the_text_recorded_later_is_the_text_recorded_at_once(value: Any) -> None:
    later = RecordedLater(value, 64)
    assert recorded_text(later) == recorded_json(value, 64)[1] == later.text


def test_a_secret_passed_to_a_tool_is_redacted_when_recorded_later(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.tool
    def fetch(url: str, retries: int, headers: tuple[str, ...]) -> str:
        return f"fetched {url} with Bearer sk-live-abcdefghijklmnopqrstuvwx"

    session = agenttrace.new_session("later")
    with agenttrace.agent("Fetcher"):
        fetch(
            "https://example.com/?api_key=sk-live-abcdefghijklmnop",
            retries=3,
            headers=("Authorization: Bearer abcdefghijklmnopqrstu",),
        )
    traced.handle.force_flush()
    span = traced.one("execute_tool fetch")
    arguments = {
        "url": "https://example.com/?api_key=sk-live-abcdefghijklmnop",
        "retries": 3,
        "headers": ("Authorization: Bearer abcdefghijklmnopqrstu",),
    }
    result = fetch.__wrapped__(**arguments)  # type: ignore[attr-defined]
    assert span.attributes is not None
    assert span.attributes[sc.TOOL_CHARS_IN] == len(json.dumps(arguments, ensure_ascii=False))
    assert span.attributes[sc.TOOL_CHARS_OUT] == len(result)
    (run,) = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id)).runs
    (op,) = run["turns"][0]["ops"]
    cap = traced.handle.settings.max_payload_bytes
    assert op["request"]["payload"] == recorded_json(arguments, cap)[1]
    assert op["response"]["payload"] == recorded_json(result, cap)[1]
    for side in ("request", "response"):
        assert "abcdefghijklmnop" not in op[side]["payload"]
