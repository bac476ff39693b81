"""Compact JSON as opTree nodes and accounting entries are written: msgspec, read back as what
``json.dumps`` wrote before it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from agenttrace.formats.compact_json import compact_json
from agenttrace.formats.session.schema import AccountingEntry

_BEFORE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)

VALUES = st.recursive(
    st.text() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.booleans()
    | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=16,
)  # fmt: skip


@given(VALUES)
def test_reads_back_as_what_json_dumps_wrote(value: Any) -> None:
    written = compact_json(value)
    before = _BEFORE.encode(value).encode("utf-8", "backslashreplace")
    assert json.loads(written.decode("utf-8", "surrogateescape")) == json.loads(
        before.decode("utf-8", "surrogateescape")
    )


def test_a_lone_surrogate_nan_and_other_objects() -> None:
    assert compact_json({"t": "a\udc80"}) == b'{"t":"a\\udc80"}'
    assert compact_json([float("nan"), float("inf")]) == b"[null,null]"
    assert compact_json({"when": object}) == b'{"when":"<class \'object\'>"}'


def test_a_struct_inside_a_value_is_written_as_its_fields_on_either_path() -> None:
    # An opTree node holds its accounting entry as a struct until it is folded.
    entry = AccountingEntry(
        timestamp=1,
        status="ok",
        latency=0.5,
        type="tool",
        originTxnId="0123456789abcdef",
        txnId="0123456789abcdef",
        agentId="agent_001",
        path="1.1",
        providerLabel="search",
        charactersIn=2,
        charactersOut=None,
    )
    fields = msgspec.to_builtins(entry)
    assert compact_json({"accounting": [entry]}) == compact_json({"accounting": [fields]})
    assert compact_json({"t": "a\udc80", "accounting": [entry]}) == compact_json(
        {"t": "a\udc80", "accounting": [fields]}
    )
    assert b'"charactersOut":null' in compact_json({"t": "a\udc80", "accounting": [entry]})
